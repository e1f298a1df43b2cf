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
	// MetricBrokerApplyDelay is a delayed broker's --apply-delay, and
	// MetricBrokerAppliedCommitAge the age of the newest source commit it
	// let through: the delay it holds (never below the delay).
	MetricBrokerApplyDelay       = "sluice_broker_apply_delay_seconds"
	MetricBrokerAppliedCommitAge = "sluice_broker_applied_commit_age_seconds"
	// MetricSlotRetained is the WAL a producer's chain slot retains.
	MetricSlotRetained = "sluice_slot_retained_bytes"
	// MetricSlotWalStatus is one-hot over the slot's wal_status (reserved,
	// extended, unreserved, lost).
	MetricSlotWalStatus = "sluice_slot_wal_status"
	// MetricTablesWithoutIdentity is how many tables a producer's
	// publication publishes without a usable replica identity: the
	// application's UPDATE and DELETE on each fail on the source.
	MetricTablesWithoutIdentity = "sluice_source_tables_without_replica_identity"
	// MetricRefusals counts the refusals (exit 2 and 3) this worker's
	// activities returned, by code.
	MetricRefusals = "sluice_refusals_total"
)

// TrackRuns exposes the verdicts of the runs tr follows as the sluice_run_*
// series and through RunStatuses. Every scrape judges the runs once and
// reports all series from that one snapshot, so the one-hot verdict, the
// stall cause and the ages always agree.
func (t *Telemetry) TrackRuns(tr *health.Tracker) error {
	t.runs.Store(tr)
	m := t.meter
	healthGauge, err := m.Int64ObservableGauge(MetricRunHealth,
		metric.WithDescription("One-hot health verdict of each run this worker hosts."))
	if err != nil {
		return err
	}
	cause, err := m.Int64ObservableGauge(MetricRunStallCause,
		metric.WithDescription("1 for the cause of a stalled run; absent while the run is not stalled."))
	if err != nil {
		return err
	}
	pollAge, err := m.Float64ObservableGauge(MetricRunPollAge,
		metric.WithDescription("Seconds since the run last looked for work."))
	if err != nil {
		return err
	}
	deliveryAge, err := m.Float64ObservableGauge(MetricRunDeliveryAge,
		metric.WithDescription("Seconds since the run last delivered work."))
	if err != nil {
		return err
	}
	changes, err := m.Int64ObservableCounter("sluice_run_changes",
		metric.WithDescription("Changes a run delivered through this worker (captured or applied)."))
	if err != nil {
		return err
	}
	linksBehind, err := m.Int64ObservableGauge(MetricBrokerLinksBehind,
		metric.WithDescription("Incrementals the chain holds beyond a broker's position."))
	if err != nil {
		return err
	}
	secondsBehind, err := m.Float64ObservableGauge(MetricBrokerSecondsBehind,
		metric.WithDescription("Age of the oldest incremental a broker has not applied yet (0 when caught up)."))
	if err != nil {
		return err
	}
	applyDelay, err := m.Float64ObservableGauge(MetricBrokerApplyDelay,
		metric.WithDescription("The --apply-delay a delayed broker keeps (absent without one)."))
	if err != nil {
		return err
	}
	commitAge, err := m.Float64ObservableGauge(MetricBrokerAppliedCommitAge,
		metric.WithDescription("Age of the newest source commit a delayed broker let through: the delay it holds."))
	if err != nil {
		return err
	}
	slotRetained, err := m.Int64ObservableGauge(MetricSlotRetained,
		metric.WithDescription("WAL the producer's chain slot retains on the source."))
	if err != nil {
		return err
	}
	walStatus, err := m.Int64ObservableGauge(MetricSlotWalStatus,
		metric.WithDescription("One-hot wal_status of the producer's chain slot."))
	if err != nil {
		return err
	}
	noIdentity, err := m.Int64ObservableGauge(MetricTablesWithoutIdentity,
		metric.WithDescription("Tables the producer's publication publishes without a usable replica identity (their UPDATE and DELETE fail on the source)."))
	if err != nil {
		return err
	}
	refusals, err := m.Int64ObservableCounter("sluice_refusals",
		metric.WithDescription("Refusals (exit 2 and 3) this worker's activities returned, by code."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, s := range t.RunStatuses() {
			role, name := attribute.String("role", s.Role), attribute.String("name", s.Name)
			run := metric.WithAttributes(role, name)
			for _, v := range health.Verdicts {
				o.ObserveInt64(healthGauge, oneHot(v == s.Verdict), metric.WithAttributes(role, name, attribute.String("verdict", v)))
			}
			if s.Verdict == health.Stalled {
				o.ObserveInt64(cause, 1, metric.WithAttributes(role, name, attribute.String("cause", s.Cause)))
			}
			if s.PollAgeSeconds >= 0 {
				o.ObserveFloat64(pollAge, s.PollAgeSeconds, run)
			}
			if s.DeliveryAgeSecs >= 0 {
				o.ObserveFloat64(deliveryAge, s.DeliveryAgeSecs, run)
			}
			o.ObserveInt64(changes, s.Changes, run)
			if s.Role == "broker" {
				o.ObserveInt64(linksBehind, int64(s.LinksBehind), run)
				o.ObserveFloat64(secondsBehind, s.SecondsBehind, run)
			}
			if s.Role == "broker" && s.ApplyDelaySeconds > 0 {
				o.ObserveFloat64(applyDelay, s.ApplyDelaySeconds, run)
				if s.AppliedCommitAgeSeconds >= 0 {
					o.ObserveFloat64(commitAge, s.AppliedCommitAgeSeconds, run)
				}
			}
			if s.Role == "producer" {
				o.ObserveInt64(noIdentity, int64(len(s.TablesWithoutReplicaIdentity)), run)
			}
			if s.Role == "producer" && s.SlotWalStatus != "" {
				o.ObserveInt64(slotRetained, s.SlotRetainedBytes, run)
				for _, w := range health.WalStatuses {
					o.ObserveInt64(walStatus, oneHot(w == s.SlotWalStatus), metric.WithAttributes(role, name, attribute.String("status", w)))
				}
			}
		}
		if tr := t.runs.Load(); tr != nil {
			for code, n := range tr.Refusals() {
				o.ObserveInt64(refusals, n, metric.WithAttributes(attribute.String("code", code)))
			}
		}
		return nil
	}, healthGauge, cause, pollAge, deliveryAge, changes, linksBehind, secondsBehind, applyDelay, commitAge, slotRetained, walStatus, noIdentity, refusals)
	return err
}

func oneHot(on bool) int64 {
	if on {
		return 1
	}
	return 0
}

// RunStatuses returns the verdicts of the tracked runs (none before TrackRuns).
func (t *Telemetry) RunStatuses() []health.Status {
	tr := t.runs.Load()
	if tr == nil {
		return nil
	}
	return tr.Statuses()
}
