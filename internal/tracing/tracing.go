// Package tracing exports OpenTelemetry spans of sluice's Temporal calls over
// OTLP/HTTP. With no endpoint configured it does nothing: no exporter, no
// provider, no interceptor.
//
// Spans come from the Temporal SDK's tracing interceptor
// (go.temporal.io/sdk/contrib/opentelemetry): the client's StartWorkflow and
// SignalWorkflow, and in the worker RunWorkflow, StartActivity and
// RunActivity. The trace context travels in Temporal headers, so a span the
// sluice CLI opens when it starts a workflow is the parent of the worker's
// spans for that run. Query tracing is off: the CLI polls a status query
// every two seconds while it follows a run.
package tracing

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// The environment variables that give --otlp-endpoint its default, in the
// order they are consulted. They are the OpenTelemetry SDKs' own: the first
// is a complete URL, the second a base URL that TracesPath is appended to.
const (
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
)

// TracesPath is the path an OTLP/HTTP collector receives traces on. An
// endpoint given with no path is sent there.
const TracesPath = "/v1/traces"

// FlagName is the flag, without its dashes, that both binaries take.
const FlagName = "otlp-endpoint"

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/sluicehq/sluice"

// EndpointFromEnv returns the endpoint the environment configures, or ""
// when it configures none: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is,
// else OTEL_EXPORTER_OTLP_ENDPOINT with TracesPath appended to its path, as
// the OpenTelemetry specification reads the two.
func EndpointFromEnv(getenv func(string) string) string {
	if v := strings.TrimSpace(getenv(EnvTracesEndpoint)); v != "" {
		return v
	}
	v := strings.TrimSpace(getenv(EnvEndpoint))
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		// Left for EndpointURL to refuse with a message that names it.
		return v
	}
	u.Path = strings.TrimRight(u.Path, "/") + TracesPath
	return u.String()
}

// BindFlag registers --otlp-endpoint on fs, defaulting to EndpointFromEnv.
func BindFlag(fs *pflag.FlagSet, dst *string) {
	fs.StringVar(dst, FlagName, EndpointFromEnv(os.Getenv),
		"OTLP/HTTP collector to export trace spans to, e.g. http://127.0.0.1:4318 (a URL with no path posts to "+TracesPath+
			"); empty: no tracing (env "+EnvTracesEndpoint+", else "+EnvEndpoint+" + "+TracesPath+")")
}

// EndpointURL checks an endpoint and returns the URL spans are posted to:
// http or https, a host, no credentials, query or fragment; an empty path
// becomes TracesPath. A refusal is SLUICE-E-CONFIG-INVALID (exit 2) naming
// the flag, and never quotes a password the URL may carry.
func EndpointURL(endpoint string) (string, error) {
	u, err := CheckEndpoint(endpoint)
	if err != nil {
		shown := ""
		if p, perr := url.Parse(strings.TrimSpace(endpoint)); perr == nil {
			shown = " " + p.Redacted()
		}
		return "", errcode.New(errcode.ConfigInvalid, "--%s%s (the flag, %s, %s or [worker] otlp_endpoint): %v",
			FlagName, shown, EnvTracesEndpoint, EnvEndpoint, err)
	}
	return u, nil
}

// CheckEndpoint is EndpointURL with a plain error that quotes nothing of
// the endpoint, for callers that name the setting themselves.
func CheckEndpoint(endpoint string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil {
		// url.Parse's message quotes the whole input.
		return "", errors.New("not a URL; give scheme://host:port, e.g. http://127.0.0.1:4318")
	}
	switch {
	case u.User != nil:
		return "", errors.New("credentials in the URL are not accepted; give the collector's headers in OTEL_EXPORTER_OTLP_HEADERS")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("the scheme must be http or https (sluice exports OTLP over HTTP, e.g. http://127.0.0.1:4318)")
	case u.Hostname() == "":
		return "", errors.New("no host")
	case u.RawQuery != "" || u.Fragment != "":
		return "", errors.New("a query or fragment is not sent to the collector; remove it")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = TracesPath
	}
	return u.String(), nil
}

// Options configure Setup.
type Options struct {
	// Endpoint is the OTLP/HTTP collector URL (see EndpointURL); empty turns
	// tracing off.
	Endpoint string
	// ServiceName is the service.name of the spans' resource, e.g.
	// "sluice-worker". OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the resource's attributes.
	ServiceName string
	// OnError, when set, receives the errors of the export (a collector
	// that does not answer, a refused batch). Setting it replaces
	// OpenTelemetry's process-wide error handler; nil keeps the default,
	// which logs through the standard library's log package.
	OnError func(error)
}

// Tracing is the tracer provider and the Temporal interceptor built on it.
// The zero value and nil are tracing turned off; every method works on them.
type Tracing struct {
	endpoint    string
	provider    *sdktrace.TracerProvider
	interceptor interceptor.Interceptor
}

// Setup builds tracing as o describes. With an empty endpoint it returns
// tracing turned off and starts nothing. Otherwise it checks the endpoint
// (see EndpointURL) and builds a tracer provider that batches spans to an
// OTLP/HTTP exporter; nothing connects until the first batch is sent.
// The exporter also reads the OTEL_EXPORTER_OTLP_* variables of the
// OpenTelemetry SDK for what the endpoint does not say (headers, timeout,
// compression, certificates).
func Setup(ctx context.Context, o Options) (*Tracing, error) {
	if strings.TrimSpace(o.Endpoint) == "" {
		return &Tracing{}, nil
	}
	endpoint, err := EndpointURL(o.Endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "--%s: OTLP exporter", FlagName)
	}
	name := o.ServiceName
	if name == "" {
		name = "sluice"
	}
	// No process detector: it would record the command line, and the
	// CLI's command line holds DSNs.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(name), semconv.ServiceVersion(telemetry.Version())),
		resource.WithHost(),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		// A detector that failed leaves the others' attributes in res.
		if o.OnError != nil {
			o.OnError(err)
		}
		if res == nil {
			res = resource.NewSchemaless(semconv.ServiceName(name), semconv.ServiceVersion(telemetry.Version()))
		}
	}
	if o.OnError != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(o.OnError))
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	ic, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:              provider.Tracer(ScopeName, trace.WithInstrumentationVersion(telemetry.Version())),
		DisableQueryTracing: true,
	})
	if err != nil {
		_ = provider.Shutdown(ctx)
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "--%s: Temporal tracing interceptor", FlagName)
	}
	return &Tracing{endpoint: endpoint, provider: provider, interceptor: ic}, nil
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// Endpoint returns the URL spans are posted to, or "" when tracing is off.
func (t *Tracing) Endpoint() string {
	if t == nil {
		return ""
	}
	return t.endpoint
}

// Interceptor returns the Temporal tracing interceptor, or nil when tracing
// is off. Set on client options, it traces the client's calls and, being a
// worker interceptor too, the workflows and activities of every worker
// built on that client.
func (t *Tracing) Interceptor() interceptor.Interceptor {
	if t == nil {
		return nil
	}
	return t.interceptor
}

// ClientInterceptors returns the interceptor as the list client.Options
// takes: empty when tracing is off.
func (t *Tracing) ClientInterceptors() []interceptor.ClientInterceptor {
	if !t.Enabled() {
		return nil
	}
	return []interceptor.ClientInterceptor{t.interceptor}
}

// Shutdown sends the spans still buffered and stops the exporter; ctx bounds
// how long it waits for the collector. It returns nil when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Close is Shutdown waiting at most timeout, for a process on its way out.
func (t *Tracing) Close(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return t.Shutdown(ctx)
}
