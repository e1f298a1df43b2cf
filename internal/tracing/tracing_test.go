package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/errcode"
)

func TestSetupOffWhenEmpty(t *testing.T) {
	for _, ep := range []string{"", "  "} {
		tr, err := Setup(context.Background(), Options{Endpoint: ep, ServiceName: "test"})
		if err != nil {
			t.Fatalf("Setup(%q): %v", ep, err)
		}
		if tr.Enabled() || tr.Interceptor() != nil || tr.ClientInterceptors() != nil || tr.Endpoint() != "" {
			t.Errorf("Setup(%q) is not off: %+v", ep, tr)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown when off: %v", err)
		}
	}
	var nilTracing *Tracing
	if nilTracing.Enabled() || nilTracing.Interceptor() != nil || nilTracing.Shutdown(context.Background()) != nil {
		t.Error("a nil *Tracing must behave as tracing off")
	}
}

func TestSetupRefusesBadEndpoints(t *testing.T) {
	for _, tc := range []struct{ endpoint, want string }{
		{"127.0.0.1:4318", "not a URL"},
		{"localhost:4318", "scheme must be http or https"},
		{"grpc://collector:4317", "scheme must be http or https"},
		{"http://", "no host"},
		{"http://:4318", "no host"},
		{"http://collector:4318/v1/traces?x=1", "query or fragment"},
		{"https://user:Hunter2-secret@collector:4318", "credentials in the URL"},
		{"http://[::1", "not a URL"},
	} {
		tr, err := Setup(context.Background(), Options{Endpoint: tc.endpoint})
		if err == nil {
			_ = tr.Shutdown(context.Background())
			t.Errorf("Setup(%q) accepted it", tc.endpoint)
			continue
		}
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.ConfigInvalid || errcode.ExitStatus(err) != errcode.ExitUsage {
			t.Errorf("Setup(%q): want %s exit 2, got %v", tc.endpoint, errcode.ConfigInvalid, err)
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--otlp-endpoint") {
			t.Errorf("Setup(%q): %q lacks %q or the flag", tc.endpoint, err, tc.want)
		}
		if strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("Setup(%q) echoes the password: %v", tc.endpoint, err)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":               "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":              "http://127.0.0.1:4318/v1/traces",
		" https://otel.example/v1/traces ":    "https://otel.example/v1/traces",
		"https://gw.example/otlp/v1/traces":   "https://gw.example/otlp/v1/traces",
		"http://[::1]:4318":                   "http://[::1]:4318/v1/traces",
		"https://collector.example:443/spans": "https://collector.example:443/spans",
	} {
		got, err := EndpointURL(in)
		if err != nil || got != want {
			t.Errorf("EndpointURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestEndpointFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, ""},
		{map[string]string{EnvEndpoint: "http://c:4318"}, "http://c:4318/v1/traces"},
		{map[string]string{EnvEndpoint: "http://gw/otlp/"}, "http://gw/otlp/v1/traces"},
		{map[string]string{EnvTracesEndpoint: "http://t:4318/custom", EnvEndpoint: "http://c:4318"}, "http://t:4318/custom"},
		{map[string]string{EnvEndpoint: "nonsense"}, "nonsense"},
	} {
		if got := EndpointFromEnv(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("EndpointFromEnv(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

func TestBindFlagDefaultsFromEnv(t *testing.T) {
	t.Setenv(EnvTracesEndpoint, "")
	t.Setenv(EnvEndpoint, "http://from-env:4318")
	var ep string
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlag(fs, &ep)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if ep != "http://from-env:4318/v1/traces" {
		t.Errorf("default %q", ep)
	}
}

// TestSetupExports checks the plumbing end to end against an HTTP server:
// a span of the provider reaches POST /v1/traces when Shutdown flushes.
func TestSetupExports(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPost && r.URL.Path == TracesPath {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	var handled []error
	tr, err := Setup(context.Background(), Options{Endpoint: srv.URL, ServiceName: "test", OnError: func(err error) { handled = append(handled, err) }})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() || tr.Interceptor() == nil || len(tr.ClientInterceptors()) != 1 || tr.Endpoint() != srv.URL+TracesPath {
		t.Fatalf("Setup(%q) is not on: %+v", srv.URL, tr)
	}
	_, span := tr.provider.Tracer("t").Start(context.Background(), "probe")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Errorf("no POST %s reached the collector (errors: %v)", TracesPath, handled)
	}
}
