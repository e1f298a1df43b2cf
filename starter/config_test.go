package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/errcode"
)

const validConfig = `
[temporal]
address = "temporal.file:7233"
namespace = "file-ns"

[store]
endpoint = "https://s3.file"
path_style = true

[sources.app]
dsn = "postgres://app@db:5432/app"
password = { env = "SLUICE_TEST_APP_PASSWORD" }

[targets.replica]
dsn = "postgres://app@replica:5432/app"
password = { file = "/run/secrets/replica" }
`

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCLI runs the sluice command line with a clean Temporal environment.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := newCLI(&stdout, &stderr).run(context.Background(), args)
	return code, stdout.String(), stderr.String()
}

func cleanEnv(t *testing.T) {
	for _, k := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "SLUICE_TASK_QUEUE", config.EnvPath} {
		t.Setenv(k, "")
	}
}

func TestValidateConfigPrintJSON(t *testing.T) {
	cleanEnv(t)
	t.Setenv("SLUICE_TEST_APP_PASSWORD", "hunter2-do-not-print")
	t.Setenv("TEMPORAL_NAMESPACE", "env-ns")
	path := writeConfig(t, validConfig)

	code, out, errOut := runCLI(t, "validate-config", "--config", path, "--print-json", "--task-queue", "flag-queue")
	if code != errcode.ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if strings.Contains(out+errOut, "hunter2") {
		t.Fatalf("output leaks the password:\n%s", out)
	}
	var v config.View
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if v.File != path {
		t.Errorf("file %q", v.File)
	}
	// flags > environment > file > default
	if v.Temporal != (config.TemporalView{Address: "temporal.file:7233", Namespace: "env-ns", TaskQueue: "flag-queue"}) {
		t.Errorf("temporal %+v", v.Temporal)
	}
	wantOrigins := map[string]config.Origin{
		"temporal.address": config.FromFile, "temporal.namespace": config.FromEnv, "temporal.task_queue": config.FromFlag,
		"store.endpoint": config.FromFile, "store.region": config.FromDefault, "store.path_style": config.FromFile,
	}
	for k, want := range wantOrigins {
		if v.Origins[k] != want {
			t.Errorf("origin of %s = %q, want %q", k, v.Origins[k], want)
		}
	}
	if v.Store != (config.StoreView{Endpoint: "https://s3.file", PathStyle: true}) {
		t.Errorf("store %+v", v.Store)
	}
	app := v.Sources["app"]
	if app.DSN != "postgres://app@db:5432/app" || app.Password == nil || *app.Password != (config.SecretView{Env: "SLUICE_TEST_APP_PASSWORD", ResolvesHere: true}) {
		t.Errorf("sources.app %+v %+v", app, app.Password)
	}
	rep := v.Targets["replica"]
	if rep.Password == nil || *rep.Password != (config.SecretView{File: "/run/secrets/replica"}) {
		t.Errorf("targets.replica %+v", rep.Password)
	}
}

func TestValidateConfigFromEnvironment(t *testing.T) {
	cleanEnv(t)
	t.Setenv(config.EnvPath, writeConfig(t, validConfig))
	code, out, errOut := runCLI(t, "validate-config")
	if code != errcode.ExitOK || !strings.Contains(out, "is valid; sources: @app; targets: @replica") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestValidateConfigRefusals(t *testing.T) {
	cleanEnv(t)
	for _, tc := range []struct {
		name, text string
		code       errcode.Code
		want       []string
	}{
		{"unknown keys", validConfig + "\n[targets.replica.tls]\nmode = 1\n[sources.b]\ndsn = \"postgres://b@h/b\"\npasword = { env = \"X\" }\n",
			errcode.ConfigUnknownKey, []string{"sources.b.pasword", "targets.replica.tls"}},
		{"password string", "[sources.app]\ndsn = \"postgres://app@h/db\"\npassword = \"hunter2\"\n",
			errcode.ConfigFileLiteralSecret, []string{"sources.app.password", `{ env = "VAR" }`}},
		{"password in dsn", "[targets.r]\ndsn = \"postgres://app:hunter2@h/db\"\n",
			errcode.ConfigFileLiteralSecret, []string{"targets.r.dsn"}},
		{"malformed", "[temporal]\naddress = \"h:1\"\nnamespace = hunter2\n",
			errcode.ConfigFileMalformed, []string{"line 3, column 13"}},
		{"wrong type", "[temporal]\naddress = 7233\n",
			errcode.ConfigFileInvalid, []string{"temporal.address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "validate-config", "--config", writeConfig(t, tc.text), "--print-json")
			if code != errcode.ExitUsage {
				t.Fatalf("exit %d, want 2; stderr %s", code, errOut)
			}
			if out != "" {
				t.Errorf("stdout not empty: %q", out)
			}
			if !strings.Contains(errOut, string(tc.code)) {
				t.Errorf("stderr lacks %s: %s", tc.code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q: %s", w, errOut)
				}
			}
			if strings.Contains(errOut, "hunter2") {
				t.Errorf("stderr leaks the password: %s", errOut)
			}
		})
	}
	t.Run("no file", func(t *testing.T) {
		if code, _, errOut := runCLI(t, "validate-config", "--print-json"); code != errcode.ExitUsage || !strings.Contains(errOut, "SLUICE-E-USAGE") {
			t.Errorf("exit %d, stderr %s", code, errOut)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		code, _, errOut := runCLI(t, "validate-config", "--config", filepath.Join(t.TempDir(), "none.toml"))
		if code != errcode.ExitUsage || !strings.Contains(errOut, string(errcode.ConfigFileUnreadable)) {
			t.Errorf("exit %d, stderr %s", code, errOut)
		}
	})
}

// A broken file stops every command, before it would reach Temporal.
func TestEveryCommandLoadsTheFile(t *testing.T) {
	cleanEnv(t)
	t.Setenv(config.EnvPath, writeConfig(t, "[temporal]\nadress = \"x\"\n"))
	code, _, errOut := runCLI(t, "sync", "from-backup", "status", "--stream-id", "s")
	if code != errcode.ExitUsage || !strings.Contains(errOut, "unknown key temporal.adress") {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
}

// parsed builds the command at path, parses args as cobra would and runs the
// configuration hook, without running the command.
func parsed(t *testing.T, path []string, args ...string) (*cli, map[string]string, error) {
	t.Helper()
	c := newCLI(&bytes.Buffer{}, &bytes.Buffer{})
	cmd, _, err := c.root().Find(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	err = c.loadConfig(cmd)
	values := map[string]string{}
	for _, name := range []string{"source", "source-password-env", "source-password-file", "target", "target-password-env", "target-password-file", "backup-endpoint", "backup-path-style"} {
		if fl := cmd.Flags().Lookup(name); fl != nil {
			values[name] = fl.Value.String()
		}
	}
	return c, values, err
}

func TestNamedConnections(t *testing.T) {
	cleanEnv(t)
	path := writeConfig(t, validConfig)

	c, v, err := parsed(t, []string{"restore"}, "--config", path, "--target", "@replica", "--backup-target", "/tmp/chain")
	if err != nil {
		t.Fatal(err)
	}
	if v["target"] != "postgres://app@replica:5432/app" || v["target-password-file"] != "/run/secrets/replica" || v["target-password-env"] != "" {
		t.Errorf("restore --target @replica: %v", v)
	}
	if v["backup-endpoint"] != "https://s3.file" || v["backup-path-style"] != "true" {
		t.Errorf("store defaults from the file: %v", v)
	}
	if c.temporal.Address != "temporal.file:7233" || c.temporal.Namespace != "file-ns" {
		t.Errorf("temporal from the file: %+v", c.temporal)
	}

	// A password flag on the command line replaces the file's reference.
	_, v, err = parsed(t, []string{"backup", "full"}, "--config", path, "--source", "@app", "--source-password-file", "/pw", "--target", "/tmp/chain")
	if err != nil {
		t.Fatal(err)
	}
	if v["source"] != "postgres://app@db:5432/app" || v["source-password-env"] != "" || v["source-password-file"] != "/pw" {
		t.Errorf("backup full --source @app --source-password-file: %v", v)
	}
	var src sourceFlags
	src.dsn, src.passwordFile, src.driver = v["source"], v["source-password-file"], "postgres"
	if ref, err := src.ref(); err != nil || ref.DSN != "postgres://app@db:5432/app" || ref.PasswordFile != "/pw" {
		t.Errorf("ref %+v, %v", ref, err)
	}

	// On backup commands --target is the store: @NAME is refused there.
	if _, _, err := parsed(t, []string{"backup", "full"}, "--config", path, "--source", "@app", "--target", "@replica"); errcode.ExitStatus(err) != errcode.ExitUsage || !strings.Contains(err.Error(), "backup store URL") {
		t.Errorf("backup full --target @replica: %v", err)
	}
	if _, _, err := parsed(t, []string{"sync", "from-backup", "run"}, "--config", path, "--target", "@replika"); !errcode.Is(err, errcode.ConfigConnectionUnknown) || !strings.Contains(err.Error(), "@replica") {
		t.Errorf("unknown connection: %v", err)
	}
	if _, _, err := parsed(t, []string{"restore"}, "--target", "@replica"); !errcode.Is(err, errcode.ConfigConnectionUnknown) || !strings.Contains(err.Error(), "no configuration file") {
		t.Errorf("no file: %v", err)
	}
	// The same refusals end the process with exit 2, before Temporal is dialled.
	if code, _, errOut := runCLI(t, "restore", "--config", path, "--target", "@nope", "--backup-target", "/tmp/chain"); code != errcode.ExitUsage || !strings.Contains(errOut, string(errcode.ConfigConnectionUnknown)) {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}

// --site NAME takes the site's namespace and task queue from the file, over
// the environment; a flag still wins; an unknown site is refused.
func TestSiteFlag(t *testing.T) {
	cleanEnv(t)
	t.Setenv("TEMPORAL_NAMESPACE", "env-ns")
	path := writeConfig(t, `
[sites.target]
namespace  = "sluice-target"
task_queue = "sluice-target-q"
`)
	for _, tc := range []struct {
		args          []string
		wantNamespace string
		wantQueue     string
	}{
		{[]string{"--config", path, "--site", "target"}, "sluice-target", "sluice-target-q"},
		{[]string{"--config", path, "--site", "target", "--namespace", "flag-ns"}, "flag-ns", "sluice-target-q"},
	} {
		c, _, err := parsed(t, []string{"sync", "from-backup", "stop"}, tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if c.temporal.Namespace != tc.wantNamespace || c.temporal.TaskQueue != tc.wantQueue {
			t.Errorf("%v: namespace %q, task queue %q; want %q, %q", tc.args, c.temporal.Namespace, c.temporal.TaskQueue, tc.wantNamespace, tc.wantQueue)
		}
	}
	t.Setenv(config.SiteEnv, "target")
	if c, _, err := parsed(t, []string{"sync", "from-backup", "stop"}, "--config", path); err != nil || c.temporal.Namespace != "sluice-target" {
		t.Errorf("SLUICE_SITE=target: %v, namespace %q", err, c.temporal.Namespace)
	}
	t.Setenv(config.SiteEnv, "")
	code, _, errOut := runCLI(t, "sync", "from-backup", "stop", "--config", path, "--site", "source", "--backup-target", "/tmp/chain", "--stream-id", "s")
	if code != errcode.ExitUsage || !strings.Contains(errOut, string(errcode.ConfigSiteUnknown)) || !strings.Contains(errOut, "it defines target") {
		t.Errorf("unknown site: exit %d, stderr %s", code, errOut)
	}
}
