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
