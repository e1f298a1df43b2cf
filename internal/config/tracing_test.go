package config

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/errcode"
)

func TestWorkerOTLPEndpoint(t *testing.T) {
	f, err := Load(writeFile(t, "[worker]\notlp_endpoint = \"http://collector:4318\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(env map[string]string, args ...string) (string, Origin) {
		t.Helper()
		fs := pflag.NewFlagSet("w", pflag.ContinueOnError)
		ep := fs.String("otlp-endpoint", "", "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		settings, err := Apply(fs, f, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range settings {
			if s.Key == "worker.otlp_endpoint" {
				if s.Value != *ep {
					t.Errorf("setting %q but flag %q", s.Value, *ep)
				}
				return *ep, s.Origin
			}
		}
		t.Fatal("no worker.otlp_endpoint setting")
		return "", ""
	}
	if ep, o := resolve(nil); ep != "http://collector:4318" || o != FromFile {
		t.Errorf("file: %q from %s", ep, o)
	}
	if ep, o := resolve(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318"}); ep != "http://base:4318/v1/traces" || o != FromEnv {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %q from %s", ep, o)
	}
	if ep, o := resolve(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/x"}); ep != "http://t:4318/x" || o != FromEnv {
		t.Errorf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: %q from %s", ep, o)
	}
	if ep, o := resolve(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318"}, "--otlp-endpoint", ""); ep != "" || o != FromFlag {
		t.Errorf("an empty flag must turn tracing off: %q from %s", ep, o)
	}

	_, err = Load(writeFile(t, "[worker]\notlp_endpoint = \"https://u:Pw-in-url-99@collector:4318\"\n"))
	if err == nil || !strings.Contains(err.Error(), "worker.otlp_endpoint") || strings.Contains(err.Error(), "Pw-in-url-99") {
		t.Fatalf("an endpoint with credentials must be refused by path without echoing them: %v", err)
	}
	if errcode.ExitStatus(err) != errcode.ExitUsage {
		t.Errorf("exit %d, want 2", errcode.ExitStatus(err))
	}
	if _, err := Load(writeFile(t, "[worker]\notlp_endpoint = \"grpc://collector:4317\"\n")); err == nil || !strings.Contains(err.Error(), "http or https") {
		t.Errorf("a grpc:// endpoint must be refused: %v", err)
	}
}
