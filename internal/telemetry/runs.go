package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/internal/health"
)

// Run series, as Prometheus sees them. Their labels are role (producer,
// broker), name (the chain's store URL or the broker's stream ID — set by the
// operator, never holding a credential), and verdict or cause from fixed sets.
const (
	// MetricRunHealth is one-hot: for each run exactly one of the four
	// verdict series (healthy, idle, stalled, not_running) is 1.
	MetricRunHealth = "sluice_run_health"
	// MetricRunStallCause is 1 for the cause of a stalled run, and absent
	// while the run is not stalled: presence is the condition.
	MetricRunStallCause = "sluice_run_stall_cause"
	// MetricRunPollAge is the seconds since the run last looked for work.
	MetricRunPollAge = "sluice_run_poll_age_seconds"
	// MetricRunDeliveryAge is the seconds since the run last delivered work
	// (absent before its first delivery).
	MetricRunDeliveryAge = "sluice_run_delivery_age_seconds"
)

// TrackRuns exposes the verdicts of the runs tr follows as the sluice_run_*
// series and through RunStatuses.
func (t *Telemetry) TrackRuns(tr *health.Tracker) error {
	t.runs.Store(tr)
	_, err := t.meter.Int64ObservableGauge(MetricRunHealth,
		metric.WithDescription("One-hot health verdict of each run this worker hosts."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, s := range t.RunStatuses() {
				for _, v := range health.Verdicts {
					n := int64(0)
					if v == s.Verdict {
						n = 1
					}
					o.Observe(n, metric.WithAttributes(attribute.String("role", s.Role), attribute.String("name", s.Name), attribute.String("verdict", v)))
				}
			}
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = t.meter.Int64ObservableGauge(MetricRunStallCause,
		metric.WithDescription("1 for the cause of a stalled run; absent while the run is not stalled."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, s := range t.RunStatuses() {
				if s.Verdict == health.Stalled {
					o.Observe(1, metric.WithAttributes(attribute.String("role", s.Role), attribute.String("name", s.Name), attribute.String("cause", s.Cause)))
				}
			}
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = t.meter.Float64ObservableGauge(MetricRunPollAge,
		metric.WithDescription("Seconds since the run last looked for work."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			for _, s := range t.RunStatuses() {
				o.Observe(s.PollAgeSeconds, metric.WithAttributes(attribute.String("role", s.Role), attribute.String("name", s.Name)))
			}
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = t.meter.Float64ObservableGauge(MetricRunDeliveryAge,
		metric.WithDescription("Seconds since the run last delivered work."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			for _, s := range t.RunStatuses() {
				if s.DeliveryAgeSecs > 0 {
					o.Observe(s.DeliveryAgeSecs, metric.WithAttributes(attribute.String("role", s.Role), attribute.String("name", s.Name)))
				}
			}
			return nil
		}))
	return err
}

// RunStatuses returns the verdicts of the tracked runs (none before TrackRuns).
func (t *Telemetry) RunStatuses() []health.Status {
	tr := t.runs.Load()
	if tr == nil {
		return nil
	}
	return tr.Statuses()
}
