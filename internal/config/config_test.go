package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/temporalcfg"
)

// parse parses text and checks that a failure carries want and exit 2.
func parse(t *testing.T, text string, want errcode.Code) (*File, string) {
	t.Helper()
	f, err := Parse("sluice.toml", []byte(text))
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return f, ""
	}
	if !errcode.Is(err, want) {
		t.Fatalf("got %v, want %s", err, want)
	}
	if got := errcode.ExitStatus(err); got != errcode.ExitUsage {
		t.Fatalf("exit %d, want %d", got, errcode.ExitUsage)
	}
	return nil, err.Error()
}

func TestExampleFile(t *testing.T) {
	f, err := Load("testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	tlsOn := f.Temporal.TLS
	f.Temporal.TLS = nil
	if tlsOn == nil || !*tlsOn || f.Temporal != (Temporal{Address: "temporal.internal:7233", Namespace: "replication", TaskQueue: "sluice",
		TLSCA: "/etc/sluice/temporal-ca.pem", TLSCert: "/etc/sluice/client.pem", TLSKey: "/etc/sluice/client.key",
		TLSServerName: "temporal.internal", APIKeyEnv: "TEMPORAL_API_KEY", PayloadKeyEnv: "SLUICE_PAYLOAD_KEY"}) {
		t.Errorf("temporal: %+v (tls %v)", f.Temporal, tlsOn)
	}
	if f.Store.Endpoint != "https://s3.eu-west.example" || f.Store.Region != "auto" || f.Store.PathStyle == nil || !*f.Store.PathStyle {
		t.Errorf("store: %+v", f.Store)
	}
	app, err := f.Connection(Sources, "app")
	if err != nil {
		t.Fatal(err)
	}
	if app.Driver != "postgres" || app.Password != (SecretRef{Env: "APP_DB_PASSWORD"}) || !strings.HasPrefix(app.DSN, "postgres://sluice@db.internal") {
		t.Errorf("sources.app: %+v", app)
	}
	if ref := app.Ref(); ref.PasswordEnv != "APP_DB_PASSWORD" || ref.DSN != app.DSN || ref.PasswordFile != "" {
		t.Errorf("sources.app ref: %+v", ref)
	}
	rep, _ := f.Connection(Targets, "replica")
	if rep.Password != (SecretRef{File: "/run/secrets/replica-password"}) {
		t.Errorf("targets.replica: %+v", rep)
	}
	if scratch, _ := f.Connection(Targets, "scratch"); !scratch.Password.IsZero() || scratch.Driver != DefaultDriver {
		t.Errorf("targets.scratch: %+v", scratch)
	}
	if s, err := f.Site("target"); err != nil || s != (Site{Namespace: "sluice-target", TaskQueue: "sluice-target", Roles: "broker,restore,maintenance"}) {
		t.Errorf("sites.target: %+v, %v", s, err)
	}
}

// The example in docs/configuration.md is the tested one.
func TestDocShowsTheExample(t *testing.T) {
	example, err := os.ReadFile("testdata/example.toml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```toml\n"+string(example)+"```") {
		t.Fatal("docs/configuration.md does not show internal/config/testdata/example.toml verbatim")
	}
}

func TestEmptyFile(t *testing.T) {
	f, _ := parse(t, "# nothing set\n", "")
	if f.Temporal != (Temporal{}) || len(f.Sources) != 0 || len(f.Targets) != 0 || f.Store.PathStyle != nil {
		t.Errorf("empty file: %+v", f)
	}
}

func TestUnknownKeysNamedByFullPath(t *testing.T) {
	_, msg := parse(t, `
colour = "blue"

[temporal]
adress = "x:7233"

[temporal.mtls]
cert = "/c"

[sources.app]
dsn = "postgres://app@h/db"
pasword = { env = "PW" }

[targets.replica]
dsn = "postgres://app@h/db"
password = { enV = "PW", env = "PW" }

[targets.replica.options]
"table include" = ["a"]

[sourcs.app]
dsn = "postgres://app@h/db"
`, errcode.ConfigUnknownKey)
	want := []string{
		"colour",
		"sources.app.pasword",
		"sourcs",
		"targets.replica.options",
		"targets.replica.password.enV",
		"temporal.adress",
		"temporal.mtls",
	}
	if !strings.Contains(msg, "unknown keys "+strings.Join(want, ", ")) {
		t.Errorf("message %q does not list %v", msg, want)
	}
}

func TestUnknownKeyIsCaseSensitive(t *testing.T) {
	_, msg := parse(t, "[Temporal]\naddress = \"h:1\"\n", errcode.ConfigUnknownKey)
	if !strings.Contains(msg, "unknown key Temporal") {
		t.Errorf("message: %q", msg)
	}
}

func TestUnknownKeyQuotedInPath(t *testing.T) {
	_, msg := parse(t, "[sources.app]\ndsn = \"postgres://a@h/d\"\n\"pass word\" = 1\n", errcode.ConfigUnknownKey)
	if !strings.Contains(msg, `sources.app."pass word"`) {
		t.Errorf("message: %q", msg)
	}
}

func TestLiteralPasswordRefused(t *testing.T) {
	for _, tc := range []struct{ name, text, path string }{
		{"password string", "[sources.app]\ndsn = \"postgres://app@h/db\"\npassword = \"hunter2\"\n", "sources.app.password"},
		{"password number", "[targets.r]\ndsn = \"postgres://app@h/db\"\npassword = 2222\n", "targets.r.password"},
		{"inline password", "sources.app = { dsn = \"postgres://app@h/db\", password = 'hunter2' }\n", "sources.app.password"},
		{"url dsn", "[sources.app]\ndsn = \"postgres://app:hunter2@h:5432/db\"\n", "sources.app.dsn"},
		{"url query", "[targets.r]\ndsn = \"postgres://app@h/db?password=hunter2\"\npassword = { env = \"PW\" }\n", "targets.r.dsn"},
		{"key=value dsn", "[targets.r]\ndsn = \"host=h user=app password=hunter2 dbname=db\"\n", "targets.r.dsn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, msg := parse(t, tc.text, errcode.ConfigFileLiteralSecret)
			if !strings.Contains(msg, "password in clear at "+tc.path) {
				t.Errorf("message %q does not name %s", msg, tc.path)
			}
			if strings.Contains(msg, "hunter") || strings.Contains(msg, "2222") {
				t.Errorf("message leaks the password: %q", msg)
			}
		})
	}
	spec, _ := errcode.Lookup(errcode.ConfigFileLiteralSecret)
	if !strings.Contains(spec.Hint, `{ env = "VAR" }`) || !strings.Contains(spec.Hint, `{ file = `) {
		t.Errorf("hint does not show the reference forms: %q", spec.Hint)
	}
}

// A literal password wins over other problems, which the message still mentions.
func TestProblemsOfSeveralKinds(t *testing.T) {
	_, msg := parse(t, "typo = 1\n[temporal]\naddress = 7\n[sources.a]\ndsn = \"postgres://u@h/d\"\npassword = \"hunter2\"\n", errcode.ConfigFileLiteralSecret)
	for _, want := range []string{"password in clear at sources.a.password", "unknown key typo", "invalid value at temporal.address (expected a string, found an integer)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

func TestMalformedNamesLineAndColumn(t *testing.T) {
	for _, tc := range []struct{ name, text, where string }{
		{"bare value", "[temporal]\naddress = \"h:1\"\n[sources.app]\npassword = hunter2\n", "line 4, column 12 (after key sources.app.password)"},
		{"unclosed table", "[temporal\naddress = \"h\"\n", "line 1, column 10"},
		{"duplicate key", "[store]\nregion = \"a\"\nregion = \"b\"\n", "line 3, column 1"},
		{"unterminated string", "[store]\nendpoint = \"https://s3\n", "line 2, column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, msg := parse(t, tc.text, errcode.ConfigFileMalformed)
			if !strings.Contains(msg, "sluice.toml: "+tc.where) {
				t.Errorf("message %q does not name %q", msg, tc.where)
			}
			if strings.Contains(msg, "hunter") {
				t.Errorf("message leaks file content: %q", msg)
			}
		})
	}
}

func TestInvalidValues(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"string expected", "[temporal]\nnamespace = 3\n", "temporal.namespace (expected a string, found an integer)"},
		{"bool expected", "[store]\npath_style = \"yes\"\n", "store.path_style (expected true or false, found a string)"},
		{"table expected", "temporal = \"h:7233\"\n", "temporal (expected a table, found a string)"},
		{"connection table", "[sources]\napp = \"postgres://a@h/d\"\n", "sources.app (expected a table, found a string)"},
		{"array of tables", "[[sources]]\ndsn = \"postgres://a@h/d\"\n", "sources (expected a table, found an array)"},
		{"missing dsn", "[sources.app]\npassword = { env = \"PW\" }\n", "sources.app (dsn is required)"},
		{"empty dsn", "[sources.app]\ndsn = \"\"\n", "sources.app.dsn (empty)"},
		{"both references", "[targets.r]\ndsn = \"postgres://a@h/d\"\npassword = { env = \"PW\", file = \"/pw\" }\n", "targets.r.password (give exactly one of"},
		{"empty reference", "[targets.r]\ndsn = \"postgres://a@h/d\"\npassword = {}\n", "targets.r.password (give exactly one of"},
		{"reference type", "[targets.r]\ndsn = \"postgres://a@h/d\"\npassword = { env = 1 }\n", "targets.r.password.env (expected a string, found an integer)"},
		{"driver", "[targets.r]\ndriver = \"oracle\"\ndsn = \"postgres://a@h/d\"\n", "targets.r.driver (the accepted engines are: postgres)"},
		{"name", "[sources.\"my app\"]\ndsn = \"postgres://a@h/d\"\n", `sources."my app" (a connection name uses only`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, msg := parse(t, tc.text, errcode.ConfigFileInvalid)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("message %q lacks %q", msg, tc.want)
			}
		})
	}
}

func TestLoadUnreadable(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.toml"))
	if !errcode.Is(err, errcode.ConfigFileUnreadable) || errcode.ExitStatus(err) != errcode.ExitUsage {
		t.Fatalf("got %v", err)
	}
}

func TestConnectionLookup(t *testing.T) {
	f, _ := parse(t, "[sources.app]\ndsn = \"postgres://a@h/d\"\n[sources.crm]\ndsn = \"postgres://a@h/crm\"\n", "")
	_, err := f.Connection(Sources, "ap")
	if !errcode.Is(err, errcode.ConfigConnectionUnknown) || !strings.Contains(err.Error(), "it defines @app, @crm") {
		t.Errorf("unknown source: %v", err)
	}
	if _, err := f.Connection(Targets, "app"); !errcode.Is(err, errcode.ConfigConnectionUnknown) || !strings.Contains(err.Error(), "it defines none") {
		t.Errorf("targets are not sources: %v", err)
	}
	var none *File
	if _, err := none.Connection(Sources, "app"); !errcode.Is(err, errcode.ConfigConnectionUnknown) || !strings.Contains(err.Error(), "no configuration file") {
		t.Errorf("no file: %v", err)
	}
}

// flags builds the flag set the starter gives a command that opens a store.
func flags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	var tc temporalcfg.Config
	tc.Bind(fs)
	fs.String("backup-endpoint", "", "")
	fs.String("backup-region", "", "")
	fs.Bool("backup-path-style", false, "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestPrecedence(t *testing.T) {
	file := &File{
		Temporal: Temporal{Address: "file:7233", Namespace: "file-ns"},
		Store:    Store{Region: "file-region", PathStyle: new(true)},
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		args  []string
		file  *File
		key   string
		value string
		from  Origin
	}{
		{"flag beats env and file", map[string]string{"TEMPORAL_ADDRESS": "env:7233"}, []string{"--temporal-address", "flag:7233"}, file, "temporal.address", "flag:7233", FromFlag},
		{"env beats file", map[string]string{"TEMPORAL_ADDRESS": "env:7233"}, nil, file, "temporal.address", "env:7233", FromEnv},
		{"empty env is unset", map[string]string{"TEMPORAL_ADDRESS": ""}, nil, file, "temporal.address", "file:7233", FromFile},
		{"file beats default", nil, nil, file, "temporal.namespace", "file-ns", FromFile},
		{"default when nothing sets it", nil, nil, file, "temporal.task_queue", temporalcfg.DefaultTaskQueue, FromDefault},
		{"default without a file", nil, nil, nil, "temporal.address", temporalcfg.DefaultAddress, FromDefault},
		{"store flag beats file", nil, []string{"--backup-region", "us-east-2"}, file, "store.region", "us-east-2", FromFlag},
		{"store file beats default", nil, nil, file, "store.region", "file-region", FromFile},
		{"bool from file", nil, nil, file, "store.path_style", "true", FromFile},
		{"bool flag beats file", nil, []string{"--backup-path-style=false"}, file, "store.path_style", "false", FromFlag},
		{"store default", nil, nil, file, "store.endpoint", "", FromDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "SLUICE_TASK_QUEUE"} {
				t.Setenv(k, tc.env[k])
			}
			fs := flags(t, tc.args...)
			settings, err := Apply(fs, tc.file, os.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			var got *Setting
			for i := range settings {
				if settings[i].Key == tc.key {
					got = &settings[i]
				}
			}
			if got == nil || got.Value != tc.value || got.Origin != tc.from {
				t.Fatalf("%s = %+v, want %q from %s", tc.key, got, tc.value, tc.from)
			}
			// The command reads the flag: it must hold the winning value.
			flag := map[string]string{
				"temporal.address": "temporal-address", "temporal.namespace": "namespace", "temporal.task_queue": "task-queue",
				"store.endpoint": "backup-endpoint", "store.region": "backup-region", "store.path_style": "backup-path-style",
			}[tc.key]
			if v := fs.Lookup(flag).Value.String(); v != tc.value {
				t.Errorf("--%s holds %q, want %q", flag, v, tc.value)
			}
		})
	}
}

// Settings whose flag a command lacks are still resolved, for validate-config.
func TestApplyWithoutTheFlag(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	settings, err := Apply(fs, &File{Store: Store{Endpoint: "https://s3"}}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	v := NewView(&File{Path: "x.toml"}, settings)
	if v.Store.Endpoint != "https://s3" || v.Origins["store.endpoint"] != FromFile || v.Temporal.Address != temporalcfg.DefaultAddress {
		t.Errorf("view: %+v", v)
	}
}

func TestViewShowsReferencesOnly(t *testing.T) {
	t.Setenv("APP_DB_PASSWORD", "hunter2-secret")
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, _ := parse(t, `
[sources.app]
dsn = "postgres://app@h/db"
password = { env = "APP_DB_PASSWORD" }
[targets.r]
dsn = "host=h user=app"
password = { file = "`+pwFile+`" }
[targets.gone]
dsn = "postgres://app@h/db"
password = { env = "SLUICE_TEST_UNSET_VARIABLE" }
[targets.plain]
dsn = "postgres://app@h/db"
`, "")
	settings, err := Apply(pflag.NewFlagSet("x", pflag.ContinueOnError), f, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(NewView(f, settings))
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, secret := range []string{"hunter2-secret", "file-secret"} {
		if strings.Contains(out, secret) {
			t.Fatalf("view leaks %q: %s", secret, out)
		}
	}
	for _, want := range []string{
		`"app":{"driver":"postgres","dsn":"postgres://app@h/db","password":{"env":"APP_DB_PASSWORD","resolves_here":true}}`,
		`"password":{"file":"` + pwFile + `","resolves_here":true}`,
		`"gone":{"driver":"postgres","dsn":"postgres://app@h/db","password":{"env":"SLUICE_TEST_UNSET_VARIABLE","resolves_here":false}}`,
		`"plain":{"driver":"postgres","dsn":"postgres://app@h/db"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %s:\n%s", want, out)
		}
	}
}
