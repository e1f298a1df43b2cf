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
	// MetricRunChanges counts the changes a run delivered through this worker
	// (captured by a producer, applied by a broker).
	MetricRunChanges = "sluice_run_changes_total"
	// MetricBrokerLinksBehind and MetricBrokerSecondsBehind say how far a
	// broker is behind its chain.
	MetricBrokerLinksBehind   = "sluice_broker_links_behind"
	MetricBrokerSecondsBehind = "sluice_broker_seconds_behind"
	// MetricSlotRetained is the WAL a producer's chain slot retains.
	MetricSlotRetained = "sluice_slot_retained_bytes"
	// MetricSlotWalStatus is one-hot over the slot's wal_status (reserved,
	// extended, unreserved, lost).
	MetricSlotWalStatus = "sluice_slot_wal_status"
	// MetricRefusals counts the refusals (exit 2 and 3) this worker's
	// activities returned, by code.
	MetricRefusals = "sluice_refusals_total"
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
				if s.PollAgeSeconds < 0 {
					continue
				}
				o.Observe(s.PollAgeSeconds, metric.WithAttributes(attribute.String("role", s.Role), attribute.String("name", s.Name)))
			}
			return nil
		}))
	if err != nil {
		return err
	}
	if err := t.trackRunProgress(); err != nil {
		return err
	}
	_, err = t.meter.Float64ObservableGauge(MetricRunDeliveryAge,
		metric.WithDescription("Seconds since the run last delivered work."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			for _, s := range t.RunStatuses() {
				if s.DeliveryAgeSecs >= 0 {
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

func runAttrs(s health.Status) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("role", s.Role), attribute.String("name", s.Name))
}

// trackRunProgress registers the progress series of the tracked runs.
func (t *Telemetry) trackRunProgress() error {
	if _, err := t.meter.Int64ObservableCounter("sluice_refusals",
		metric.WithDescription("Refusals (exit 2 and 3) this worker's activities returned, by code."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			if tr := t.runs.Load(); tr != nil {
				for code, n := range tr.Refusals() {
					o.Observe(n, metric.WithAttributes(attribute.String("code", code)))
				}
			}
			return nil
		})); err != nil {
		return err
	}
	_, err := t.meter.Int64ObservableCounter("sluice_run_changes",
		metric.WithDescription("Changes a run delivered through this worker (captured or applied)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, s := range t.RunStatuses() {
				o.Observe(s.Changes, runAttrs(s))
			}
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = t.meter.Int64ObservableGauge(MetricBrokerLinksBehind,
		metric.WithDescription("Incrementals the chain holds beyond a broker's position."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, s := range t.RunStatuses() {
				if s.Role == "broker" {
					o.Observe(int64(s.LinksBehind), runAttrs(s))
				}
			}
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = t.meter.Float64ObservableGauge(MetricBrokerSecondsBehind,
		metric.WithDescription("Age of the oldest incremental a broker has not applied yet (0 when caught up)."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			for _, s := range t.RunStatuses() {
				if s.Role == "broker" {
					o.Observe(s.SecondsBehind, runAttrs(s))
				}
			}
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = t.meter.Int64ObservableGauge(MetricSlotRetained,
		metric.WithDescription("WAL the producer's chain slot retains on the source."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, s := range t.RunStatuses() {
				if s.Role == "producer" && s.SlotWalStatus != "" {
					o.Observe(s.SlotRetainedBytes, runAttrs(s))
				}
			}
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = t.meter.Int64ObservableGauge(MetricSlotWalStatus,
		metric.WithDescription("One-hot wal_status of the producer's chain slot."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, s := range t.RunStatuses() {
				if s.Role != "producer" || s.SlotWalStatus == "" {
					continue
				}
				for _, w := range health.WalStatuses {
					n := int64(0)
					if w == s.SlotWalStatus {
						n = 1
					}
					o.Observe(n, metric.WithAttributes(attribute.String("role", s.Role), attribute.String("name", s.Name), attribute.String("status", w)))
				}
			}
			return nil
		}))
	return err
}
