package credentials

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

func TestLiteralPasswordRefused(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:hunter2@h/db",
		"postgresql://u:hunter2@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=hunter2",
		"host=h user=u password=hunter2 dbname=db",
		"host=h user=u PASSWORD = 'hunter 2'",
	} {
		_, err := NewDSNRef("--source", dsn, "", "")
		if !errcode.Is(err, errcode.LiteralSecret) {
			t.Errorf("%q: got %v, want %s", dsn, err, errcode.LiteralSecret)
		}
		if err != nil && strings.Contains(err.Error(), "hunter") {
			t.Errorf("%q: error leaks the password: %v", dsn, err)
		}
		if errcode.ExitStatus(err) != errcode.ExitUsage {
			t.Errorf("%q: exit %d, want 2", dsn, errcode.ExitStatus(err))
		}
	}
}

func TestResolve(t *testing.T) {
	t.Setenv("SLUICE_TEST_PW", "s3 cr'et")
	r, err := NewDSNRef("--source", "postgres://u@h:5432/db?sslmode=disable", "SLUICE_TEST_PW", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if got != "postgres://u:s3%20cr%27et@h:5432/db?sslmode=disable" {
		t.Errorf("url form: %s", got)
	}
	if strings.Contains(r.String(), "cr'et") {
		t.Errorf("String leaks secret")
	}

	f := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(f, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = DSNRef{DSN: "host=h user=u", PasswordFile: f}
	got, err = r.Resolve()
	if err != nil || got != "host=h user=u password='from-file'" {
		t.Errorf("kv form: %q %v", got, err)
	}

	r = DSNRef{DSN: "host=h", PasswordEnv: "SLUICE_TEST_UNSET_VAR"}
	if _, err := r.Resolve(); !errcode.Is(err, errcode.SecretUnresolved) {
		t.Errorf("unset env: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h/db":            "postgres://u:xxxxx@h/db",
		"host=h password=pw user=u":       "host=h password=xxxxx user=u",
		"host=h password='p w' user=u":    "host=h password=xxxxx user=u",
		"postgres://u@h/db?password=pw":   "postgres://u@h/db?password=xxxxx",
		"postgres://u@h/db?sslmode=allow": "postgres://u@h/db?sslmode=allow",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
