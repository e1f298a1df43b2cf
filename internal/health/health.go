// Package health tracks the runs a worker hosts (producers and brokers) and
// gives each a verdict from the ages of its last poll and its last delivered
// change: healthy, idle (connected, nothing new — never alertable), stalled
// with a cause, or not_running. Activities report events; the worker reads
// verdicts for /status and metrics and logs each transition once.
package health

import (
	"log/slog"
	"sort"
	"sync"
	"time"
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
	// CauseFailing: the run's last attempt failed for another reason.
	CauseFailing = "failing"
)

// Thresholds of the verdicts.
const (
	// PollStall: a run that polled longer ago than this is stalled (its
	// loop polls every few seconds at most, heartbeating).
	PollStall = 2 * time.Minute
	// DeliveryRecent: a delivery younger than this makes a run healthy.
	DeliveryRecent = 2 * time.Minute
	// DeliveryStall: pending work with no delivery for this long is a stall.
	DeliveryStall = 10 * time.Minute
	// Gone: a run that reported nothing for this long is not running.
	Gone = 10 * time.Minute
)

// Key names a run: its role ("producer", "broker") and its name (the chain
// URL or the stream ID).
type Key struct {
	Role string `json:"role"`
	Name string `json:"name"`
}

// run is what the tracker knows about one run.
type run struct {
	lastPoll, lastDelivery, lastReport time.Time
	pending                            bool
	failCause, failMsg                 string
	failedAt                           time.Time
	verdict, cause                     string
	changes                            int64
	linksBehind                        int
	secondsBehind                      float64
	slotRetained                       int64
	walStatus                          string
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
	// Changes counts the changes the run delivered through this worker.
	Changes int64 `json:"changes"`
	// LinksBehind and SecondsBehind (brokers): incrementals not applied yet
	// and the age of the oldest of them.
	LinksBehind   int     `json:"links_behind,omitempty"`
	SecondsBehind float64 `json:"seconds_behind,omitempty"`
	// SlotRetainedBytes and SlotWalStatus (producers): the chain slot's
	// retained WAL and pg_replication_slots.wal_status.
	SlotRetainedBytes int64  `json:"slot_retained_bytes,omitempty"`
	SlotWalStatus     string `json:"slot_wal_status,omitempty"`
}

// WalStatuses lists the values of pg_replication_slots.wal_status.
var WalStatuses = []string{"reserved", "extended", "unreserved", "lost"}

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
		r = &run{verdict: ""}
		t.runs[k] = r
	}
	r.lastReport = t.now()
	return r
}

// Polled records that the run looked for new work; pending says whether it
// found some it has not delivered yet.
func (t *Tracker) Polled(k Key, pending bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.get(k)
	r.lastPoll, r.pending = t.now(), pending
}

// Delivered records delivered work (a committed window, applied changes).
// A delivery clears a failure.
func (t *Tracker) Delivered(k Key) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.get(k)
	r.lastDelivery, r.lastPoll = t.now(), t.now()
	r.failCause, r.failMsg = "", ""
}

// Counted adds delivered changes to the run's count.
func (t *Tracker) Counted(k Key, changes int64) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(k).changes += changes
}

// Behind records how far a broker is behind the chain.
func (t *Tracker) Behind(k Key, links int, seconds float64) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.get(k)
	r.linksBehind, r.secondsBehind = links, seconds
}

// Slot records the health of a producer's chain slot.
func (t *Tracker) Slot(k Key, retained int64, walStatus string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.get(k)
	r.slotRetained, r.walStatus = retained, walStatus
}

// Failed records a failed attempt with its cause.
func (t *Tracker) Failed(k Key, cause, msg string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.get(k)
	r.failCause, r.failMsg, r.failedAt = cause, msg, t.now()
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

// judge computes a run's verdict at now.
func judge(r *run, now time.Time) (verdict, cause string) {
	switch {
	case now.Sub(r.lastReport) > Gone:
		return NotRunning, ""
	case r.failCause != "":
		return Stalled, r.failCause
	case r.lastPoll.IsZero() || now.Sub(r.lastPoll) > PollStall:
		return Stalled, CausePollLoopNotTurning
	case !r.lastDelivery.IsZero() && now.Sub(r.lastDelivery) <= DeliveryRecent:
		return Healthy, ""
	case r.pending && (r.lastDelivery.IsZero() || now.Sub(r.lastDelivery) > DeliveryStall):
		return Stalled, CauseChainNotAdvancing
	case r.pending:
		return Healthy, ""
	default:
		return Idle, ""
	}
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
		v, c := judge(r, now)
		if v != r.verdict || c != r.cause {
			t.transition(k, r, v, c, now)
			r.verdict, r.cause = v, c
		}
		s := Status{Key: k, Verdict: v, Cause: c, Pending: r.pending, LastError: r.failMsg,
			LastReportAgeSec: now.Sub(r.lastReport).Seconds(), Changes: r.changes,
			LinksBehind: r.linksBehind, SecondsBehind: r.secondsBehind,
			SlotRetainedBytes: r.slotRetained, SlotWalStatus: r.walStatus}
		if !r.lastPoll.IsZero() {
			s.PollAgeSeconds = now.Sub(r.lastPoll).Seconds()
		}
		if !r.lastDelivery.IsZero() {
			s.DeliveryAgeSecs = now.Sub(r.lastDelivery).Seconds()
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

func (t *Tracker) transition(k Key, r *run, v, c string, now time.Time) {
	if t.log == nil {
		return
	}
	pollAge, deliveryAge := -1.0, -1.0
	if !r.lastPoll.IsZero() {
		pollAge = now.Sub(r.lastPoll).Seconds()
	}
	if !r.lastDelivery.IsZero() {
		deliveryAge = now.Sub(r.lastDelivery).Seconds()
	}
	switch {
	case v == Stalled:
		t.log.Warn("run health degraded to stalled", "role", k.Role, "name", k.Name, "cause", c,
			"poll_age_s", pollAge, "delivery_age_s", deliveryAge, "last_error", r.failMsg)
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
