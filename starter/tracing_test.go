package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

func TestOTLPEndpointFlag(t *testing.T) {
	cleanEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	path := writeConfig(t, validConfig+"\n[worker]\notlp_endpoint = \"http://127.0.0.1:4318\"\n")

	// The file's worker.otlp_endpoint turns tracing on for the CLI too, and
	// the interceptor reaches the Temporal client options.
	var stdout, stderr bytes.Buffer
	c := newCLI(&stdout, &stderr)
	if code := c.run(context.Background(), []string{"--config", path, "validate-config"}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !c.tracing.Enabled() || c.tracing.Endpoint() != "http://127.0.0.1:4318/v1/traces" || len(c.temporal.Interceptors) != 1 {
		t.Errorf("tracing from the file: enabled=%t endpoint=%q interceptors=%d", c.tracing.Enabled(), c.tracing.Endpoint(), len(c.temporal.Interceptors))
	}

	// An empty flag turns it off again.
	c = newCLI(&stdout, &stderr)
	if code := c.run(context.Background(), []string{"--config", path, "--otlp-endpoint", "", "validate-config"}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if c.tracing.Enabled() || len(c.temporal.Interceptors) != 0 {
		t.Error("--otlp-endpoint '' must turn tracing off")
	}

	code, _, errOut := runCLI(t, "--otlp-endpoint", "grpc://collector:4317", "validate-config", "--config", path)
	if code != errcode.ExitUsage || !strings.Contains(errOut, string(errcode.ConfigInvalid)) || !strings.Contains(errOut, "--otlp-endpoint grpc://collector:4317") {
		t.Errorf("a grpc:// endpoint: exit %d\n%s", code, errOut)
	}
}
