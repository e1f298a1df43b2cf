package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/workflows"
)

// siteConfig writes a configuration naming a source whose password is in
// SLUICE_TEST_SRC_PW and a target whose password is in a file that does not
// exist.
func siteConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.toml")
	body := `
[sources.app]
dsn = "postgres://sluice@db.internal:5432/app"
password = { env = "SLUICE_TEST_SRC_PW" }

[targets.replica]
dsn = "postgres://sluice@replica.internal:5432/app"
password = { file = "` + filepath.Join(dir, "missing-password") + `" }
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A worker checks the credentials of its roles before it dials Temporal:
// each role that needs a secret the worker cannot read is refused, naming
// the connection and the reference; the roles that do not read it start.
func TestRolesNeedTheirCredentials(t *testing.T) {
	f, err := config.Load(siteConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_TEST_SRC_PW", "")
	os.Unsetenv("SLUICE_TEST_SRC_PW")
	for _, tc := range []struct {
		roles string
		want  string // "" when the roles' credentials resolve
	}{
		{"producer", "SLUICE_TEST_SRC_PW"},
		{"broker", "missing-password"},
		{"restore", "missing-password"},
		{"maintenance", "SLUICE_TEST_SRC_PW"},
	} {
		roles, err := workflows.ParseRoles(tc.roles)
		if err != nil {
			t.Fatal(err)
		}
		err = checkRoleCredentials(f, roles)
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.SecretUnresolved || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "role "+tc.roles) {
			t.Errorf("--roles %s: %v; want SLUICE-E-SECRET-UNRESOLVED naming role %s and %s", tc.roles, err, tc.roles, tc.want)
		}
	}
	// With the source's variable set, the source site's worker starts; the
	// target's file is not its business.
	t.Setenv("SLUICE_TEST_SRC_PW", "s3cret")
	if err := checkRoleCredentials(f, []workflows.Role{workflows.RoleProducer}); err != nil {
		t.Errorf("producer with its source password set: %v", err)
	}
	if err := checkRoleCredentials(nil, workflows.Roles); err != nil {
		t.Errorf("no configuration names nothing to check, got %v", err)
	}
}

// The whole command: a role the worker lacks credentials for, or an unknown
// role, is refused with exit status 2 before Temporal is dialled (nothing
// listens on the address given).
func TestRunRefusesRolesItCannotServe(t *testing.T) {
	path := siteConfig(t)
	for _, args := range [][]string{
		{"--roles", "producer", "--config", path},
		{"--roles", "broker", "--config", path},
		{"--roles", "brokers"},
		{"--roles", "producer,producer"},
	} {
		args = append(args, "--temporal-address", "127.0.0.1:1", "--admin-addr", "")
		if got := run(args); got != errcode.ExitUsage {
			t.Errorf("sluice-worker %s: exit %d, want %d", strings.Join(args, " "), got, errcode.ExitUsage)
		}
	}
}

// The built-in --roles is every role.
func TestDefaultRolesAreAll(t *testing.T) {
	if config.DefaultRoles != workflows.RoleList(workflows.Roles) {
		t.Fatalf("config.DefaultRoles %q, want %q", config.DefaultRoles, workflows.RoleList(workflows.Roles))
	}
}

// --site takes the worker's roles from [sites.NAME]: a source site's worker
// is refused for the source password it lacks, an unknown site is refused,
// and a --roles flag beats the site's roles.
func TestSiteGivesTheWorkerItsRoles(t *testing.T) {
	path := siteConfig(t)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n[sites.source]\nroles = \"producer\"\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Unsetenv("SLUICE_TEST_SRC_PW")
	base := []string{"--config", path, "--temporal-address", "127.0.0.1:1", "--admin-addr", ""}
	if got := run(append([]string{"--site", "source"}, base...)); got != errcode.ExitUsage {
		t.Errorf("--site source without the source password: exit %d, want %d", got, errcode.ExitUsage)
	}
	if got := run(append([]string{"--site", "elsewhere"}, base...)); got != errcode.ExitUsage {
		t.Errorf("--site elsewhere (not in the file): exit %d, want %d", got, errcode.ExitUsage)
	}
	// A flag beats the site: --roles broker needs only the target's file,
	// which is missing too, so this is refused as well, for the target.
	t.Setenv("SLUICE_TEST_SRC_PW", "set")
	if got := run(append([]string{"--site", "source", "--roles", "broker"}, base...)); got != errcode.ExitUsage {
		t.Errorf("--site source --roles broker: exit %d, want %d (the target's password file is missing)", got, errcode.ExitUsage)
	}
}
