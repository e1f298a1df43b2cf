// Package telemetry holds sluice's metrics: one OpenTelemetry MeterProvider
// whose only reader is a Prometheus exporter on a registry of its own, the
// Temporal SDK's metrics routed into that provider, and the handler that
// serves the registry on /metrics. names.go lists every series sluice adds.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"github.com/sluicehq/sluice/internal/health"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// meterName is the instrumentation scope of sluice's own instruments.
const meterName = "github.com/sluicehq/sluice"

// secondsBuckets are the histogram bounds of every instrument measured in
// seconds (Temporal's latencies among them). OpenTelemetry's default bounds
// suit milliseconds and would put every sub-second latency in one bucket.
var secondsBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Options configures New.
type Options struct {
	// Version labels sluice_worker_info; empty means Version().
	Version string
	// Logger receives instrument errors; nil discards them.
	Logger *slog.Logger
}

// Telemetry owns the worker's metrics pipeline. Its methods are safe for
// concurrent use.
type Telemetry struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	meter    metric.Meter
	logger   *slog.Logger

	adminRequests metric.Int64Counter
	adminClients  atomic.Pointer[func() int]

	temporalHandler client.MetricsHandler
	// runs is the health tracker of the runs this worker hosts, once set.
	runs atomic.Pointer[health.Tracker]

	traffic traffic
}

// New builds the registry, the exporter and the provider, and registers
// sluice's own instruments.
func New(opts Options) (*Telemetry, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	version := opts.Version
	if version == "" {
		version = Version()
	}

	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		// sluice_worker_info says what target_info would, with fewer labels;
		// scope labels on every series would only add noise.
		otelprom.WithoutTargetInfo(),
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return nil, err
	}
	provider := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exp),
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: secondsBuckets}},
		)),
	)
	t := &Telemetry{registry: reg, provider: provider, meter: provider.Meter(meterName), logger: logger}
	t.temporalHandler = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                provider.Meter("go.temporal.io/sdk"),
		UseMonotonicCounters: true,
		// The contrib panics on an instrument error by default; a metric
		// must never take the worker down.
		OnError: func(err error) { logger.Warn("temporal metric dropped", "err", err) },
	})
	err = t.registerInstruments(version)
	if err == nil {
		err = t.registerTraffic()
	}
	if err != nil {
		_ = provider.Shutdown(context.Background())
		return nil, err
	}
	return t, nil
}

func (t *Telemetry) registerInstruments(version string) error {
	var err error
	t.adminRequests, err = t.meter.Int64Counter(instAdminRequests,
		metric.WithDescription("Requests to the worker's admin endpoint, by path and HTTP status."))
	if err != nil {
		return err
	}
	info := attribute.NewSet(attribute.String("version", version), attribute.String("go_version", runtime.Version()))
	_, err = t.meter.Int64ObservableGauge(instWorkerInfo,
		metric.WithDescription("Always 1; the labels describe the running sluice worker."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(1, metric.WithAttributeSet(info))
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = t.meter.Int64ObservableGauge(instAdminRateLimitCli,
		metric.WithDescription("Client addresses the admin endpoint's rate limiter currently tracks."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			if fn := t.adminClients.Load(); fn != nil {
				o.Observe(int64((*fn)()))
			}
			return nil
		}))
	return err
}

// Meter returns the meter sluice's own instruments are created on.
func (t *Telemetry) Meter() metric.Meter { return t.meter }

// Handler serves the registry in the Prometheus text (or OpenMetrics) format.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      promLogger{t.logger},
	})
}

// TemporalMetricsHandler returns the handler to put in
// client.Options.MetricsHandler, so the SDK's own series (temporal_*) land on
// the same registry. Counters are exported as monotonic counters.
func (t *Telemetry) TemporalMetricsHandler() client.MetricsHandler {
	return t.temporalHandler
}

// AdminRequest counts one admin endpoint request. path must come from a
// fixed set (the endpoint's routes, or "other").
func (t *Telemetry) AdminRequest(path string, code int) {
	t.adminRequests.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("path", path), attribute.String("code", strconv.Itoa(code))))
}

// ObserveAdminClients makes sluice_admin_ratelimit_clients report fn().
func (t *Telemetry) ObserveAdminClients(fn func() int) {
	t.adminClients.Store(&fn)
}

// Shutdown stops the provider; the handler serves nothing new afterwards.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	err := t.provider.Shutdown(ctx)
	if errors.Is(err, sdkmetric.ErrReaderShutdown) {
		return nil
	}
	return err
}

// promLogger adapts slog to promhttp's error log.
type promLogger struct{ l *slog.Logger }

func (p promLogger) Println(v ...any) {
	p.l.Warn("metrics collection error", "detail", fmt.Sprint(v...))
}
