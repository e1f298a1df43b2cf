package config

import (
	"strconv"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/temporalcfg"
	"github.com/sluicehq/sluice/internal/tracing"
)

// Origin says which layer gave a setting its value.
type Origin string

// The layers, strongest first.
const (
	FromFlag    Origin = "flag"
	FromEnv     Origin = "env"
	FromFile    Origin = "file"
	FromDefault Origin = "default"
)

// Setting is one resolved setting.
type Setting struct {
	// Key is the setting's path in the file, e.g. "temporal.address".
	Key string
	// Value is the value in effect.
	Value string
	// Origin is the layer it came from.
	Origin Origin
}

// binding ties a key of the file to the flag, and the environment variable
// if any, that set the same thing.
type binding struct {
	key, flag, env, def string
	file                func(*File) (string, bool)
}

// envReaders read the environment of the settings that several variables
// give, in place of their binding's env.
var envReaders = map[string]func(getenv func(string) string) string{
	"worker.otlp_endpoint": tracing.EndpointFromEnv,
}

func (b binding) envValue(getenv func(string) string) string {
	if read, ok := envReaders[b.key]; ok {
		return read(getenv)
	}
	if b.env == "" {
		return ""
	}
	return getenv(b.env)
}

func set(s string) (string, bool) { return s, s != "" }

func boolSet(b *bool) (string, bool) {
	if b == nil {
		return "", false
	}
	return strconv.FormatBool(*b), true
}

var bindings = []binding{
	{"temporal.address", "temporal-address", "TEMPORAL_ADDRESS", temporalcfg.DefaultAddress,
		func(f *File) (string, bool) { return set(f.Temporal.Address) }},
	{"temporal.namespace", "namespace", "TEMPORAL_NAMESPACE", temporalcfg.DefaultNamespace,
		func(f *File) (string, bool) { return set(f.Temporal.Namespace) }},
	{"temporal.task_queue", "task-queue", "SLUICE_TASK_QUEUE", temporalcfg.DefaultTaskQueue,
		func(f *File) (string, bool) { return set(f.Temporal.TaskQueue) }},
	{"temporal.tls", "temporal-tls", temporalcfg.EnvTLS, "false",
		func(f *File) (string, bool) { return boolSet(f.Temporal.TLS) }},
	{"temporal.tls_ca", "temporal-tls-ca", temporalcfg.EnvTLSCA, "",
		func(f *File) (string, bool) { return set(f.Temporal.TLSCA) }},
	{"temporal.tls_cert", "temporal-tls-cert", temporalcfg.EnvTLSCert, "",
		func(f *File) (string, bool) { return set(f.Temporal.TLSCert) }},
	{"temporal.tls_key", "temporal-tls-key", temporalcfg.EnvTLSKey, "",
		func(f *File) (string, bool) { return set(f.Temporal.TLSKey) }},
	{"temporal.tls_server_name", "temporal-tls-server-name", temporalcfg.EnvTLSServerName, "",
		func(f *File) (string, bool) { return set(f.Temporal.TLSServerName) }},
	{"temporal.api_key_env", "temporal-api-key-env", temporalcfg.EnvAPIKeyEnv, "",
		func(f *File) (string, bool) { return set(f.Temporal.APIKeyEnv) }},
	{"temporal.payload_key_env", "payload-key-env", temporalcfg.EnvPayloadKeyEnv, "",
		func(f *File) (string, bool) { return set(f.Temporal.PayloadKeyEnv) }},
	{"store.endpoint", "backup-endpoint", "", "",
		func(f *File) (string, bool) { return set(f.Store.Endpoint) }},
	{"store.region", "backup-region", "", "",
		func(f *File) (string, bool) { return set(f.Store.Region) }},
	{"store.path_style", "backup-path-style", "", "false",
		func(f *File) (string, bool) { return boolSet(f.Store.PathStyle) }},
	{"worker.admin_addr", "admin-addr", "SLUICE_ADMIN_ADDR", "127.0.0.1:9464",
		func(f *File) (string, bool) { return set(f.Worker.AdminAddr) }},
	{"worker.admin_token_env", "admin-token-env", "SLUICE_ADMIN_TOKEN_ENV", "",
		func(f *File) (string, bool) { return set(f.Worker.AdminTokenEnv) }},
	{"worker.admin_token_file", "admin-token-file", "SLUICE_ADMIN_TOKEN_FILE", "",
		func(f *File) (string, bool) { return set(f.Worker.AdminTokenFile) }},
	{"worker.admin_tls_cert", "admin-tls-cert", "SLUICE_ADMIN_TLS_CERT", "",
		func(f *File) (string, bool) { return set(f.Worker.AdminTLSCert) }},
	{"worker.admin_tls_key", "admin-tls-key", "SLUICE_ADMIN_TLS_KEY", "",
		func(f *File) (string, bool) { return set(f.Worker.AdminTLSKey) }},
	{"worker.otlp_endpoint", tracing.FlagName, tracing.EnvTracesEndpoint, "",
		func(f *File) (string, bool) { return set(f.Worker.OTLPEndpoint) }},
	{"worker.roles", "roles", "SLUICE_WORKER_ROLES", DefaultRoles,
		func(f *File) (string, bool) { return set(f.Worker.Roles) }},
}

// Apply resolves every setting the file can hold, strongest layer first: a
// flag given on the command line, then its environment variable, then the
// file, then the built-in default. Flags of fs that the command line did not
// set receive the winning value, so the command reads one place. f may be nil
// (no file); getenv is os.Getenv outside tests, and an empty variable counts
// as unset. Settings whose flag fs lacks are still resolved, for display.
func Apply(fs *pflag.FlagSet, f *File, getenv func(string) string) ([]Setting, error) {
	out := make([]Setting, 0, len(bindings))
	for _, b := range bindings {
		fl := fs.Lookup(b.flag)
		s := Setting{Key: b.key, Origin: FromDefault, Value: b.def}
		fileValue, inFile := "", false
		if f != nil {
			fileValue, inFile = b.file(f)
		}
		switch {
		case fl != nil && fl.Changed:
			s.Value, s.Origin = fl.Value.String(), FromFlag
		case b.envValue(getenv) != "":
			s.Value, s.Origin = b.envValue(getenv), FromEnv
		case inFile:
			s.Value, s.Origin = fileValue, FromFile
		}
		if fl != nil && s.Origin != FromFlag {
			if s.Origin == FromDefault {
				s.Value = fl.Value.String()
			} else if err := fl.Value.Set(s.Value); err != nil {
				return nil, errcode.Wrap(errcode.ConfigFileInvalid, err, "%s (from the %s) for --%s", b.key, s.Origin, b.flag)
			}
		}
		out = append(out, s)
	}
	return out, nil
}
