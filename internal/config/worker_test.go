package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/errcode"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sluice.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWorkerTable(t *testing.T) {
	f, err := Load(writeFile(t, "[worker]\nadmin_addr = \"127.0.0.1:9999\"\nadmin_token_env = \"TOKEN\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
	addr := fs.String("admin-addr", "127.0.0.1:9464", "")
	tokenEnv := fs.String("admin-token-env", "", "")
	if err := fs.Parse([]string{"--admin-token-env", "FROM_FLAG"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(fs, f, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if *addr != "127.0.0.1:9999" {
		t.Errorf("the file's admin_addr was not applied: %q", *addr)
	}
	if *tokenEnv != "FROM_FLAG" {
		t.Errorf("a flag must win over the file: %q", *tokenEnv)
	}

	_, err = Load(writeFile(t, "[worker]\nadmin_token = \"hunter2hunter2hunter2\"\nadmin_adr = \"x\"\n"))
	if err == nil || !strings.Contains(err.Error(), "worker.admin_token") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a literal admin token must be refused by path without echoing it: %v", err)
	}
	if !strings.Contains(err.Error(), "worker.admin_adr") {
		t.Errorf("the unknown key should be named too: %v", err)
	}
	if errcode.ExitStatus(err) != errcode.ExitUsage {
		t.Errorf("exit %d, want 2", errcode.ExitStatus(err))
	}
}

// [sites.NAME] names a site's namespace, task queue and roles; --site fills
// the flags the command line did not give, over the environment and the
// [temporal] table.
func TestSites(t *testing.T) {
	f, err := Load(writeFile(t, `
[temporal]
namespace = "from-file"

[sites.source]
namespace  = "sluice-source"
task_queue = "sluice-source"
roles      = "producer"

[sites.target]
namespace = "sluice-target"
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Site("source")
	if err != nil || s != (Site{Namespace: "sluice-source", TaskQueue: "sluice-source", Roles: "producer"}) {
		t.Fatalf("sites.source: %+v, %v", s, err)
	}
	fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
	ns := fs.String("namespace", "default", "")
	queue := fs.String("task-queue", "sluice", "")
	roles := fs.String("roles", DefaultRoles, "")
	if err := fs.Parse([]string{"--task-queue", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(fs, f, func(k string) string {
		if k == "TEMPORAL_NAMESPACE" {
			return "from-env"
		}
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.UseSite(fs); err != nil {
		t.Fatal(err)
	}
	if *ns != "sluice-source" || *queue != "from-flag" || *roles != "producer" {
		t.Errorf("after --site source: namespace %q, task queue %q, roles %q; want the site's namespace and roles, the flag's queue", *ns, *queue, *roles)
	}
	// A site that sets only its namespace leaves the rest alone.
	fs2 := pflag.NewFlagSet("w", pflag.ContinueOnError)
	queue2 := fs2.String("task-queue", "sluice", "")
	ns2 := fs2.String("namespace", "default", "")
	if err := f.Sites["target"].UseSite(fs2); err != nil || *ns2 != "sluice-target" || *queue2 != "sluice" {
		t.Errorf("sites.target: namespace %q, queue %q, %v", *ns2, *queue2, err)
	}

	for _, tc := range []struct {
		f    *File
		want string
	}{{f, "it defines source, target"}, {nil, "none is loaded"}} {
		_, err := tc.f.Site("elsewhere")
		if e, ok := errcode.As(err); !ok || e.Code != errcode.ConfigSiteUnknown || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("unknown site: %v, want SLUICE-E-CONFIG-SITE-UNKNOWN saying %q", err, tc.want)
		}
	}
	// Unknown keys of a site are refused by their path.
	_, err = Load(writeFile(t, "[sites.source]\nqueue = \"x\"\n"))
	if err == nil || !strings.Contains(err.Error(), "sites.source.queue") {
		t.Errorf("an unknown key of a site: %v", err)
	}
}
