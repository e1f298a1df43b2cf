package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/temporalcfg"
)

func TestTemporalSecretsInClearRefused(t *testing.T) {
	_, msg := parse(t, "[temporal]\napi_key = \"k-123\"\npayload_key = \"abc\"\n", errcode.ConfigFileLiteralSecret)
	for _, want := range []string{"temporal.api_key", "temporal.payload_key"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not name %s", msg, want)
		}
	}
	if strings.Contains(msg, "k-123") || strings.Contains(msg, "abc") {
		t.Errorf("message quotes the secret: %q", msg)
	}
	parse(t, "[temporal]\ntls = \"yes\"\n", errcode.ConfigFileInvalid)
}

// The file's [temporal] transport keys fill the flags the command line and
// the environment left unset, and the view shows them.
func TestTemporalTransportKeysApply(t *testing.T) {
	f, _ := parse(t, "[temporal]\ntls_server_name = \"t.internal\"\napi_key_env = \"FILE_KEY\"\npayload_key_env = \"FILE_PK\"\n", "")
	var c temporalcfg.Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.Bind(fs)
	if err := fs.Parse([]string{"--payload-key-env", "FLAG_PK"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{temporalcfg.EnvTLS: "true"}
	settings, err := Apply(fs, f, func(n string) string { return env[n] })
	if err != nil {
		t.Fatal(err)
	}
	if !c.TLS || c.TLSServerName != "t.internal" || c.APIKeyEnv != "FILE_KEY" || c.PayloadKeyEnv != "FLAG_PK" {
		t.Errorf("config after Apply: %+v", c)
	}
	v := NewView(f, settings)
	if !v.Temporal.TLS || v.Temporal.APIKeyEnv != "FILE_KEY" || v.Temporal.PayloadKeyEnv != "FLAG_PK" ||
		v.Origins["temporal.tls"] != FromEnv || v.Origins["temporal.payload_key_env"] != FromFlag || v.Origins["temporal.api_key_env"] != FromFile {
		t.Errorf("view: %+v", v)
	}
}
