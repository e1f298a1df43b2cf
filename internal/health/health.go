// Package health tracks the runs a worker hosts (producers and brokers) and
// gives each a verdict from the ages of its last poll and its last delivered
// change: healthy, idle (connected, nothing new — never alertable), stalled
// with a cause, or not_running. Activities report events; the worker reads
// verdicts for /status and metrics and logs each transition once.
package health

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Verdicts. There are exactly these four.
const (
	Healthy    = "healthy"
	Idle       = "idle"
	Stalled    = "stalled"
	NotRunning = "not_running"
)

// Verdicts lists every verdict, in a fixed order (one-hot gauges use it).
var Verdicts = []string{Healthy, Idle, Stalled, NotRunning}

// Stall causes.
const (
	// CauseSourcePositionLost: PostgreSQL invalidated or lost the chain's slot.
	CauseSourcePositionLost = "source_position_lost"
	// CauseUnconfirmedPosition: the slot position could not be confirmed.
	CauseUnconfirmedPosition = "unconfirmed_source_position"
	// CausePollLoopNotTurning: the run has not polled for longer than PollStall.
	CausePollLoopNotTurning = "poll_loop_not_turning"
	// CauseTargetRefusing: the target keeps refusing the apply.
	CauseTargetRefusing = "target_refusing_apply"
	// CauseChainNotAdvancing: links are pending but none was delivered for DeliveryStall.
	CauseChainNotAdvancing = "chain_not_advancing"
	// CauseStoreUnreachable: the backup store kept failing or not answering.
	CauseStoreUnreachable = "store_unreachable"
	// CauseKeyServiceUnreachable: the key service (AWS KMS) that unwraps
	// the chain's data keys kept failing or not answering.
	CauseKeyServiceUnreachable = "key_service_unreachable"
	// CauseFailing: the run's last attempt failed for another reason.
	CauseFailing = "failing"
	// CauseWorkflowTaskFailing: the run's workflow task keeps failing (a
	// workflow panic, non-determinism); it waits for a fixed worker.
	CauseWorkflowTaskFailing = "workflow_task_failing"
)

// Default thresholds of the verdicts (see Thresholds).
const (
	// DefaultPollStall: a run that polled longer ago than this is stalled
	// (its loop polls every few seconds at most).
	DefaultPollStall = 2 * time.Minute
	// DefaultDeliveryStall: pending work with no delivery for this long is a stall.
	DefaultDeliveryStall = 10 * time.Minute
	// DefaultNotRunning: a run nothing reported on for this long is not running.
	DefaultNotRunning = 10 * time.Minute
)

// ForgetAfter is how long a run stays listed as not_running before the
// worker forgets it (its series disappear from /metrics).
const ForgetAfter = time.Hour

// Thresholds are the ages at which a run's verdict changes. They travel with
// the run (its workflow input and every activity's parameters), so the worker's
// metrics and the CLI's status judge a run by the same numbers. A zero field
// takes its default.
type Thresholds struct {
	// PollStall: a poll older than this is a stall (poll_loop_not_turning);
	// a delivery younger than this makes the run healthy.
	PollStall time.Duration `json:"poll_stall,omitempty"`
	// DeliveryStall: work pending with no delivery for this long is a stall
	// (chain_not_advancing).
	DeliveryStall time.Duration `json:"delivery_stall,omitempty"`
	// NotRunning: no poll, delivery, heartbeat or failure reported for this
	// long means no worker is running the run.
	NotRunning time.Duration `json:"not_running,omitempty"`
}

// thresholdsJSON is Thresholds as its JSON holds it: durations as text
// ("2m0s"), as workflow inputs show them; numbers of nanoseconds, the form
// recorded before, still decode.
type thresholdsJSON struct {
	PollStall     dur.Duration `json:"poll_stall,omitempty"`
	DeliveryStall dur.Duration `json:"delivery_stall,omitempty"`
	NotRunning    dur.Duration `json:"not_running,omitempty"`
}

// MarshalJSON encodes the thresholds with their durations as text.
func (t Thresholds) MarshalJSON() ([]byte, error) {
	return json.Marshal(thresholdsJSON{PollStall: dur.Duration(t.PollStall), DeliveryStall: dur.Duration(t.DeliveryStall), NotRunning: dur.Duration(t.NotRunning)})
}

// UnmarshalJSON decodes thresholds whose durations are text or numbers of
// nanoseconds.
func (t *Thresholds) UnmarshalJSON(b []byte) error {
	var v thresholdsJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = Thresholds{PollStall: v.PollStall.D(), DeliveryStall: v.DeliveryStall.D(), NotRunning: v.NotRunning.D()}
	return nil
}

// WithDefaults fills zero fields with the defaults.
func (t Thresholds) WithDefaults() Thresholds {
	if t.PollStall <= 0 {
		t.PollStall = DefaultPollStall
	}
	if t.DeliveryStall <= 0 {
		t.DeliveryStall = DefaultDeliveryStall
	}
	if t.NotRunning <= 0 {
		t.NotRunning = DefaultNotRunning
	}
	return t
}

// Check says what is wrong with thresholds an operator set for a run that
// polls every pollEvery: the poll threshold must leave room for two polls,
// and neither later threshold may be shorter than it.
func (t Thresholds) Check(pollEvery time.Duration) error {
	t = t.WithDefaults()
	switch {
	case t.PollStall < 2*pollEvery:
		return fmt.Errorf("the poll-stall threshold %s must be at least twice the poll interval %s, or every quiet run would look stalled", t.PollStall, pollEvery)
	case t.DeliveryStall < t.PollStall:
		return fmt.Errorf("the delivery-stall threshold %s must not be shorter than the poll-stall threshold %s", t.DeliveryStall, t.PollStall)
	case t.NotRunning < t.PollStall:
		return fmt.Errorf("the not-running threshold %s must not be shorter than the poll-stall threshold %s", t.NotRunning, t.PollStall)
	}
	return nil
}

// Facts are what a verdict is judged from: when the run last polled, last
// delivered, last reported anything at all, whether work is pending, and
// the cause of its last failure if no delivery came after it.
type Facts struct {
	PolledAt    time.Time `json:"polled_at,omitzero"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
	ReportedAt  time.Time `json:"reported_at,omitzero"`
	Pending     bool      `json:"pending,omitempty"`
	FailCause   string    `json:"fail_cause,omitempty"`
	FailError   string    `json:"fail_error,omitempty"`
	// Paused says the run was paused on purpose (signal pause): it schedules
	// no work until resumed, so it reads idle however old its last poll.
	Paused bool `json:"paused,omitempty"`
	// TaskFailure is the failure of the run's workflow task while it keeps
	// failing: seen in Temporal by whoever judges, never carried in heartbeats.
	TaskFailure string `json:"-"`
}

// Merge combines two views of one run (the workflow's and its current
// activity's): the newest of each time, and pending and the failure from the
// view that reported last, unless a delivery came after that report.
func (f Facts) Merge(o Facts) Facts {
	out := f
	if out.TaskFailure == "" {
		out.TaskFailure = o.TaskFailure
	}
	if o.ReportedAt.After(f.ReportedAt) {
		out.Pending, out.FailCause, out.FailError = o.Pending, o.FailCause, o.FailError
		out.ReportedAt = o.ReportedAt
	}
	out.PolledAt = latest(f.PolledAt, o.PolledAt)
	out.DeliveredAt = latest(f.DeliveredAt, o.DeliveredAt)
	if out.DeliveredAt.After(out.ReportedAt) {
		out.ReportedAt = out.DeliveredAt
		out.FailCause, out.FailError = "", ""
	}
	return out
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Judge computes a run's verdict and, when stalled, its cause.
func Judge(f Facts, now time.Time, th Thresholds) (verdict, cause string) {
	th = th.WithDefaults()
	switch {
	case f.TaskFailure != "":
		// Known to exist and why it is stuck, though nothing reports on it.
		return Stalled, CauseWorkflowTaskFailing
	case f.Paused:
		// Whoever says so answered for the run (its workflow's status
		// query): it is alive and waits for resume on purpose.
		return Idle, ""
	case f.ReportedAt.IsZero() || now.Sub(f.ReportedAt) > th.NotRunning:
		return NotRunning, ""
	case f.FailCause != "":
		return Stalled, f.FailCause
	case f.PolledAt.IsZero() || now.Sub(f.PolledAt) > th.PollStall:
		return Stalled, CausePollLoopNotTurning
	case !f.DeliveredAt.IsZero() && now.Sub(f.DeliveredAt) <= th.PollStall:
		return Healthy, ""
	case f.Pending && (f.DeliveredAt.IsZero() || now.Sub(f.DeliveredAt) > th.DeliveryStall):
		return Stalled, CauseChainNotAdvancing
	case f.Pending:
		return Healthy, ""
	default:
		return Idle, ""
	}
}

// CauseOf names the stall cause a failure with the given error code stands
// for: a lost or unconfirmed slot, a target that refuses the apply, a store
// that does not answer, or a generic failure.
func CauseOf(code string) string {
	// An earlier release's code (an alias) stands for its concept code.
	spec, _ := errcode.Lookup(errcode.Code(code))
	switch spec.Code {
	case errcode.SourceAnchorMissing, errcode.SourceLogLost:
		return CauseSourcePositionLost
	case errcode.SlotUnconfirmed:
		return CauseUnconfirmedPosition
	case errcode.TargetUnreachable, errcode.TargetPrivileges, errcode.ApplyMarksUnavailable:
		return CauseTargetRefusing
	case errcode.StoreUnreachable:
		return CauseStoreUnreachable
	case errcode.KeyUnavailable:
		return CauseKeyServiceUnreachable
	}
	return CauseFailing
}

// Key names a run: its role ("producer", "broker") and its name (the chain
// URL or the stream ID).
type Key struct {
	Role string `json:"role"`
	Name string `json:"name"`
}

// run is what the tracker knows about one run.
type run struct {
	facts         Facts
	th            Thresholds
	verdict       string
	cause         string
	changes       int64
	linksBehind   int
	secondsBehind float64
	applyDelay    time.Duration
	appliedCommit time.Time
	slotRetained  int64
	walStatus     string
	identity      identityState
	// attempts counts this run's activity attempts executing on this
	// worker; while one is, the run is reported (alive), however long the
	// attempt's current call blocks.
	attempts int
}

// alive refreshes a run's report time while one of its attempts executes.
func (r *run) alive(now time.Time) {
	if r.attempts > 0 {
		r.facts.ReportedAt = now
	}
}

// Status is one run's verdict and the measurements behind it.
type Status struct {
	Key
	Verdict          string  `json:"verdict"`
	Cause            string  `json:"cause,omitempty"`
	PollAgeSeconds   float64 `json:"poll_age_seconds"`
	DeliveryAgeSecs  float64 `json:"delivery_age_seconds"`
	Pending          bool    `json:"pending"`
	LastError        string  `json:"last_error,omitempty"`
	LastReportAgeSec float64 `json:"last_report_age_seconds"`
	// Thresholds are the run's own (defaults filled in).
	Thresholds Thresholds `json:"thresholds"`
	// Changes counts the changes the run delivered through this worker.
	Changes int64 `json:"changes"`
	// LinksBehind and SecondsBehind (brokers): incrementals not applied yet
	// and the age of the oldest of them.
	LinksBehind   int     `json:"links_behind,omitempty"`
	SecondsBehind float64 `json:"seconds_behind,omitempty"`
	// ApplyDelaySeconds (brokers with --apply-delay): the delay the run
	// keeps; AppliedCommitAgeSeconds the age of the newest source commit
	// it let through, which stays at or above the delay (-1: none yet).
	ApplyDelaySeconds       float64 `json:"apply_delay_seconds,omitempty"`
	AppliedCommitAgeSeconds float64 `json:"applied_commit_age_seconds,omitempty"`
	// SlotRetainedBytes and SlotWalStatus (producers): the chain slot's
	// retained WAL and pg_replication_slots.wal_status.
	SlotRetainedBytes int64  `json:"slot_retained_bytes,omitempty"`
	SlotWalStatus     string `json:"slot_wal_status,omitempty"`
	// TablesWithoutReplicaIdentity (producers): the published tables whose
	// updates and deletes fail on the source for want of a replica identity.
	TablesWithoutReplicaIdentity []string `json:"tables_without_replica_identity,omitempty"`
}

// WalStatuses lists the words a source reports for its log position's
// state: pg_replication_slots.wal_status on PostgreSQL (reserved, extended,
// unreserved, lost), and a MySQL-family source's binlog (retained; oldest,
// the next purge takes it; purged).
var WalStatuses = []string{"reserved", "extended", "unreserved", "lost", "retained", "oldest", "purged"}

// Tracker holds the runs of one worker. Safe for concurrent use; a nil
// Tracker ignores every report.
type Tracker struct {
	mu       sync.Mutex
	runs     map[Key]*run
	refusals map[string]int64
	now      func() time.Time
	log      *slog.Logger
}

// NewTracker returns a tracker logging transitions to log (nil: no logs).
func NewTracker(log *slog.Logger, now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{runs: map[Key]*run{}, refusals: map[string]int64{}, now: now, log: log}
}

func (t *Tracker) get(k Key) *run {
	r := t.runs[k]
	if r == nil {
		r = &run{}
		t.runs[k] = r
	}
	r.facts.ReportedAt = t.now()
	return r
}

// update applies f to run k under the lock; a nil Tracker does nothing.
func (t *Tracker) update(k Key, f func(r *run, now time.Time)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t.get(k), t.now())
}

// Configure sets the thresholds run k is judged by.
func (t *Tracker) Configure(k Key, th Thresholds) {
	t.update(k, func(r *run, _ time.Time) { r.th = th })
}

// Polled records that the run looked for new work; pending says whether it
// found some it has not delivered yet.
func (t *Tracker) Polled(k Key, pending bool) {
	t.update(k, func(r *run, now time.Time) { r.facts.PolledAt, r.facts.Pending = now, pending })
}

// Succeeded records a poll that ended well with nothing to deliver (an idle
// window, a look at the chain that found nothing pending): a failure
// reported before it no longer holds, though nothing was delivered since.
func (t *Tracker) Succeeded(k Key) {
	t.update(k, func(r *run, now time.Time) {
		r.facts.PolledAt, r.facts.Pending = now, false
		r.facts.FailCause, r.facts.FailError = "", ""
	})
}

// Delivered records delivered work (a committed window, applied changes).
// A delivery clears a failure.
func (t *Tracker) Delivered(k Key) {
	t.update(k, func(r *run, now time.Time) {
		r.facts.DeliveredAt, r.facts.PolledAt = now, now
		r.facts.FailCause, r.facts.FailError = "", ""
	})
}

// Counted adds delivered changes to the run's count.
func (t *Tracker) Counted(k Key, changes int64) {
	t.update(k, func(r *run, _ time.Time) { r.changes += changes })
}

// Running records that an attempt of run k executes on this worker until the
// returned done is called. While one does, the run counts as reported: a
// poll blocked on an unreachable store is a stalled run, not one nobody runs.
func (t *Tracker) Running(k Key) (done func()) {
	if t == nil {
		return func() {}
	}
	t.mu.Lock()
	r := t.get(k)
	r.attempts++
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			// A run that ended (and perhaps began again) since is not
			// this attempt's to count down.
			if t.runs[k] == r {
				r.attempts--
				r.facts.ReportedAt = t.now()
			}
		})
	}
}

// AppliedLink records that a broker applied one of the links it was behind
// by, so its lag reads right before its next poll measures it again.
func (t *Tracker) AppliedLink(k Key) {
	t.update(k, func(r *run, _ time.Time) {
		if r.linksBehind > 0 {
			r.linksBehind--
		}
		if r.linksBehind == 0 {
			r.secondsBehind = 0
		}
	})
}

// Behind records how far a broker is behind the chain.
func (t *Tracker) Behind(k Key, links int, seconds float64) {
	t.update(k, func(r *run, _ time.Time) { r.linksBehind, r.secondsBehind = links, seconds })
}

// Delayed records a broker's --apply-delay and the commit time of the
// newest source transaction it let through (zero: none yet).
func (t *Tracker) Delayed(k Key, delay time.Duration, commit time.Time) {
	t.update(k, func(r *run, _ time.Time) {
		r.applyDelay = delay
		if commit.After(r.appliedCommit) {
			r.appliedCommit = commit
		}
	})
}

// Slot records the health of a producer's chain slot.
func (t *Tracker) Slot(k Key, retained int64, walStatus string) {
	t.update(k, func(r *run, _ time.Time) { r.slotRetained, r.walStatus = retained, walStatus })
}

// Failed records a failed attempt with its cause.
func (t *Tracker) Failed(k Key, cause, msg string) {
	t.update(k, func(r *run, _ time.Time) { r.facts.FailCause, r.facts.FailError = cause, msg })
}

// Facts returns what the tracker knows of run k, for an activity to carry in
// its heartbeats (so a status query elsewhere judges by the same facts).
func (t *Tracker) Facts(k Key) Facts {
	if t == nil {
		return Facts{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.runs[k]; r != nil {
		r.alive(t.now())
		return r.facts
	}
	return Facts{}
}

// Ended forgets a run that ended on purpose (stopped, finished).
func (t *Tracker) Ended(k Key) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.runs, k)
}

// Statuses returns every run's verdict, sorted by role and name, and logs
// each transition: one WARN on entering a stall (and again when its cause
// changes), one INFO on leaving it.
func (t *Tracker) Statuses() []Status {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	out := make([]Status, 0, len(t.runs))
	for k, r := range t.runs {
		r.alive(now)
		if now.Sub(r.facts.ReportedAt) > r.th.WithDefaults().NotRunning+ForgetAfter {
			// Gone for good (moved to another worker, or ended by a
			// refusal): its series leave this worker's metrics.
			delete(t.runs, k)
			continue
		}
		v, c := Judge(r.facts, now, r.th)
		if v != r.verdict || c != r.cause {
			t.transition(k, r, v, c, now)
			r.verdict, r.cause = v, c
		}
		f := r.facts
		s := Status{Key: k, Verdict: v, Cause: c, Pending: f.Pending, LastError: f.StallError(),
			LastReportAgeSec: now.Sub(f.ReportedAt).Seconds(), Thresholds: r.th.WithDefaults(), Changes: r.changes,
			LinksBehind: r.linksBehind, SecondsBehind: r.secondsBehind,
			SlotRetainedBytes: r.slotRetained, SlotWalStatus: r.walStatus, TablesWithoutReplicaIdentity: r.identity.tables}
		s.PollAgeSeconds, s.DeliveryAgeSecs = f.Ages(now)
		if r.applyDelay > 0 {
			s.ApplyDelaySeconds, s.AppliedCommitAgeSeconds = r.applyDelay.Seconds(), -1
			if !r.appliedCommit.IsZero() {
				s.AppliedCommitAgeSeconds = now.Sub(r.appliedCommit).Seconds()
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role < out[j].Role
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Ages returns the ages of the last poll and the last delivery at now, in
// seconds; -1 for one that never happened.
func (f Facts) Ages(now time.Time) (poll, delivery float64) {
	poll, delivery = -1, -1
	if !f.PolledAt.IsZero() {
		poll = now.Sub(f.PolledAt).Seconds()
	}
	if !f.DeliveredAt.IsZero() {
		delivery = now.Sub(f.DeliveredAt).Seconds()
	}
	return poll, delivery
}

func (t *Tracker) transition(k Key, r *run, v, c string, now time.Time) {
	if t.log == nil {
		return
	}
	pollAge, deliveryAge := r.facts.Ages(now)
	switch {
	case v == Stalled:
		t.log.Warn("run health degraded to stalled", "role", k.Role, "name", k.Name, "cause", c,
			"poll_age_s", pollAge, "delivery_age_s", deliveryAge, "last_error", r.facts.StallError())
	case r.verdict == Stalled:
		t.log.Info("run recovered from stall", "role", k.Role, "name", k.Name, "verdict", v, "previous_cause", r.cause)
	}
}

// Refused counts a refusal (a coded error with exit 2 or 3) by its code.
func (t *Tracker) Refused(code string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refusals[code]++
}

// Refusals returns the refusals counted so far, by code.
func (t *Tracker) Refusals() map[string]int64 {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.refusals))
	for k, v := range t.refusals {
		out[k] = v
	}
	return out
}
