package health

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newTest() (*Tracker, *clock, *bytes.Buffer) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var buf bytes.Buffer
	return NewTracker(slog.New(slog.NewTextHandler(&buf, nil)), c.now), c, &buf
}

func verdictOf(t *testing.T, tr *Tracker, k Key) Status {
	t.Helper()
	for _, s := range tr.Statuses() {
		if s.Key == k {
			return s
		}
	}
	t.Fatalf("no status for %v", k)
	return Status{}
}

func TestVerdicts(t *testing.T) {
	tr, c, _ := newTest()
	k := Key{Role: "broker", Name: "s"}

	tr.Polled(k, false)
	if s := verdictOf(t, tr, k); s.Verdict != Idle {
		t.Fatalf("polling with nothing new is idle, got %+v", s)
	}
	tr.Delivered(k)
	if s := verdictOf(t, tr, k); s.Verdict != Healthy {
		t.Fatalf("a fresh delivery is healthy, got %+v", s)
	}
	// Quiet for an hour while still polling: idle, never stalled.
	for i := 0; i < 60; i++ {
		c.add(time.Minute)
		tr.Polled(k, false)
	}
	if s := verdictOf(t, tr, k); s.Verdict != Idle {
		t.Fatalf("a quiet chain is idle, got %+v", s)
	}
	// Work pending but nothing delivered for longer than DeliveryStall.
	for i := 0; i < 11; i++ {
		c.add(time.Minute)
		tr.Polled(k, true)
	}
	if s := verdictOf(t, tr, k); s.Verdict != Stalled || s.Cause != CauseChainNotAdvancing {
		t.Fatalf("pending work not delivered is a stall, got %+v", s)
	}
	tr.Delivered(k)
	// The poll loop stops turning.
	c.add(DefaultPollStall + time.Second)
	tr.mu.Lock()
	tr.runs[k].facts.ReportedAt = c.now() // something else reported (e.g. a heartbeat)
	tr.mu.Unlock()
	if s := verdictOf(t, tr, k); s.Verdict != Stalled || s.Cause != CausePollLoopNotTurning {
		t.Fatalf("want poll_loop_not_turning, got %+v", s)
	}
	// A failure names its cause until a delivery clears it.
	tr.Failed(k, CauseTargetRefusing, "connection refused")
	if s := verdictOf(t, tr, k); s.Verdict != Stalled || s.Cause != CauseTargetRefusing || s.LastError == "" {
		t.Fatalf("want target_refusing_apply, got %+v", s)
	}
	tr.Delivered(k)
	if s := verdictOf(t, tr, k); s.Verdict != Healthy {
		t.Fatalf("a delivery clears the failure, got %+v", s)
	}
	// Nothing reported for longer than DefaultNotRunning.
	c.add(DefaultNotRunning + time.Second)
	if s := verdictOf(t, tr, k); s.Verdict != NotRunning {
		t.Fatalf("want not_running, got %+v", s)
	}
	c.add(ForgetAfter)
	if st := tr.Statuses(); len(st) != 0 {
		t.Fatalf("a run silent past ForgetAfter is forgotten, got %+v", st)
	}
}

func TestTransitionsLogOnce(t *testing.T) {
	tr, c, buf := newTest()
	k := Key{Role: "producer", Name: "file:///c"}
	tr.Delivered(k)
	tr.Failed(k, CauseSourcePositionLost, "slot lost")
	for i := 0; i < 3; i++ {
		tr.Statuses()
		c.add(time.Second)
	}
	if n := strings.Count(buf.String(), "degraded to stalled"); n != 1 {
		t.Fatalf("want one WARN on entering the stall, got %d:\n%s", n, buf)
	}
	tr.Failed(k, CauseUnconfirmedPosition, "confirm failed")
	tr.Statuses()
	if n := strings.Count(buf.String(), "degraded to stalled"); n != 2 {
		t.Fatalf("a new cause logs again, got %d", n)
	}
	tr.Delivered(k)
	tr.Statuses()
	tr.Statuses()
	if n := strings.Count(buf.String(), "recovered from stall"); n != 1 {
		t.Fatalf("want one INFO on recovery, got %d:\n%s", n, buf)
	}
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "cause=source_position_lost") {
		t.Fatalf("the WARN carries the cause:\n%s", buf)
	}
}

func TestNilTrackerIgnoresReports(t *testing.T) {
	var tr *Tracker
	tr.Polled(Key{}, true)
	tr.Delivered(Key{})
	tr.Failed(Key{}, CauseFailing, "x")
	if tr.Statuses() != nil {
		t.Fatal("a nil tracker has no runs")
	}
}

func TestRunThresholdsApply(t *testing.T) {
	tr, c, _ := newTest()
	k := Key{Role: "broker", Name: "fast"}
	tr.Configure(k, Thresholds{PollStall: 4 * time.Second, DeliveryStall: 8 * time.Second, NotRunning: 12 * time.Second})
	tr.Polled(k, true)
	c.add(5 * time.Second)
	tr.Behind(k, 1, 5) // a report that is not a poll
	if s := verdictOf(t, tr, k); s.Verdict != Stalled || s.Cause != CausePollLoopNotTurning || s.Thresholds.PollStall != 4*time.Second {
		t.Fatalf("a 4s poll threshold stalls after 5s, got %+v", s)
	}
	tr.Polled(k, true)
	c.add(3 * time.Second)
	tr.Polled(k, true)
	c.add(3 * time.Second)
	tr.Polled(k, true)
	c.add(3 * time.Second)
	tr.Polled(k, true)
	if s := verdictOf(t, tr, k); s.Verdict != Stalled || s.Cause != CauseChainNotAdvancing {
		t.Fatalf("pending for 14s with an 8s delivery threshold, got %+v", s)
	}
	c.add(13 * time.Second)
	if s := verdictOf(t, tr, k); s.Verdict != NotRunning {
		t.Fatalf("silent for 13s with a 12s not-running threshold, got %+v", s)
	}
	other := Key{Role: "broker", Name: "default"}
	tr.Polled(other, false)
	if s := verdictOf(t, tr, other); s.Thresholds != (Thresholds{}).WithDefaults() {
		t.Fatalf("an unconfigured run takes the defaults, got %+v", s.Thresholds)
	}
}

func TestThresholdsCheck(t *testing.T) {
	for _, tc := range []struct {
		th   Thresholds
		poll time.Duration
		bad  string
	}{
		{Thresholds{}, 10 * time.Second, ""},
		{Thresholds{PollStall: 15 * time.Second}, 10 * time.Second, "twice the poll interval"},
		{Thresholds{PollStall: 20 * time.Second, DeliveryStall: 10 * time.Second}, 10 * time.Second, "delivery-stall"},
		{Thresholds{PollStall: 20 * time.Second, NotRunning: 10 * time.Second}, 10 * time.Second, "not-running"},
	} {
		err := tc.th.Check(tc.poll)
		if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("%+v every %s: got %v, want %q", tc.th, tc.poll, err, tc.bad)
		}
	}
}

func TestMergeTakesNewestFacts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	wf := Facts{PolledAt: t0, DeliveredAt: t0, ReportedAt: t0, FailCause: CauseFailing, FailError: "old"}
	act := Facts{PolledAt: t0.Add(time.Minute), ReportedAt: t0.Add(time.Minute), Pending: true}
	m := wf.Merge(act)
	if !m.PolledAt.Equal(act.PolledAt) || !m.DeliveredAt.Equal(t0) || !m.Pending || m.FailCause != "" {
		t.Fatalf("the newer report wins: %+v", m)
	}
	failing := Facts{ReportedAt: t0.Add(2 * time.Minute), FailCause: CauseTargetRefusing, FailError: "refused"}
	if m := wf.Merge(failing); m.FailCause != CauseTargetRefusing || !m.PolledAt.Equal(t0) {
		t.Fatalf("a newer failure is the cause: %+v", m)
	}
	if m := failing.Merge(Facts{}); m.FailCause != CauseTargetRefusing {
		t.Fatalf("merging nothing keeps the failure: %+v", m)
	}
}

func TestCauseOfCodes(t *testing.T) {
	for code, want := range map[string]string{
		"SLUICE-E-SOURCE-LOG-LOST":       CauseSourcePositionLost,
		"SLUICE-E-SOURCE-ANCHOR-MISSING": CauseSourcePositionLost,
		"SLUICE-E-SLOT-INVALIDATED":      CauseSourcePositionLost,
		"SLUICE-E-SLOT-MISSING":          CauseSourcePositionLost,
		"SLUICE-E-SLOT-UNCONFIRMED":      CauseUnconfirmedPosition,
		"SLUICE-E-TARGET-UNREACHABLE":    CauseTargetRefusing,
		"SLUICE-E-TARGET-PRIVILEGES":     CauseTargetRefusing,
		"SLUICE-E-STORE-UNREACHABLE":     CauseStoreUnreachable,
		"SLUICE-E-CHUNK-CORRUPT":         CauseFailing,
		"":                               CauseFailing,
	} {
		if got := CauseOf(code); got != want {
			t.Errorf("CauseOf(%q) = %q, want %q", code, got, want)
		}
	}
}

// A run whose attempt is still executing on the worker is reported however
// long its current call blocks: stalled, never not_running; once the attempt
// ends its silence counts again.
func TestRunningAttemptIsReported(t *testing.T) {
	tr, c, _ := newTest()
	k := Key{Role: "broker", Name: "blocked"}
	tr.Configure(k, Thresholds{PollStall: 4 * time.Second, DeliveryStall: 8 * time.Second, NotRunning: 12 * time.Second})
	done := tr.Running(k)
	tr.Polled(k, false)
	c.add(time.Minute)
	if s := verdictOf(t, tr, k); s.Verdict != Stalled || s.Cause != CausePollLoopNotTurning || s.LastReportAgeSec != 0 {
		t.Fatalf("an attempt blocked for a minute is stalled, not gone; got %+v", s)
	}
	if f := tr.Facts(k); !f.ReportedAt.Equal(c.now()) {
		t.Fatalf("heartbeat facts of a live attempt carry a fresh report time, got %v", f.ReportedAt)
	}
	done()
	done() // a second call changes nothing
	c.add(13 * time.Second)
	if s := verdictOf(t, tr, k); s.Verdict != NotRunning {
		t.Fatalf("13s after its last attempt ended, with a 12s threshold: want not_running, got %+v", s)
	}
	// An attempt of a run that ended meanwhile does not count down the
	// attempts of the run that began again.
	old := tr.Running(k)
	tr.Ended(k)
	again := tr.Running(k)
	old()
	c.add(time.Minute)
	if s := verdictOf(t, tr, k); s.Verdict == NotRunning {
		t.Fatalf("the new run's attempt still executes; got %+v", s)
	}
	again()
}

// A broker that applied the links it was behind by reads nothing behind
// before its next poll.
func TestAppliedLinkCountsDown(t *testing.T) {
	tr, _, _ := newTest()
	k := Key{Role: "broker", Name: "lag"}
	tr.Behind(k, 2, 30)
	tr.AppliedLink(k)
	if s := verdictOf(t, tr, k); s.LinksBehind != 1 || s.SecondsBehind != 30 {
		t.Fatalf("one of two applied: want 1 behind (age as last measured), got %+v", s)
	}
	tr.AppliedLink(k)
	tr.AppliedLink(k)
	if s := verdictOf(t, tr, k); s.LinksBehind != 0 || s.SecondsBehind != 0 {
		t.Fatalf("all applied: want nothing behind, got %+v", s)
	}
}

// A failure holds through the retries' polls, and clears on the first poll
// that ends well with nothing to deliver: a quiet chain recovers without
// waiting for the next change.
func TestSucceededPollClearsAFailure(t *testing.T) {
	tr, c, _ := newTest()
	k := Key{Role: "broker", Name: "quiet"}
	tr.Polled(k, false)
	tr.Failed(k, CauseStoreUnreachable, "store down")
	c.add(time.Second)
	tr.Polled(k, true) // a retry's poll
	if s := verdictOf(t, tr, k); s.Verdict != Stalled || s.Cause != CauseStoreUnreachable {
		t.Fatalf("a failure holds through polls, got %+v", s)
	}
	tr.Succeeded(k)
	if s := verdictOf(t, tr, k); s.Verdict != Idle || s.LastError != "" {
		t.Fatalf("a good poll with nothing pending clears it, got %+v", s)
	}
}

// A delayed broker reports its delay and the age of the newest commit it
// let through, which grows with the clock and never goes back to an older
// commit.
func TestDelayedReportsTheDelayHeld(t *testing.T) {
	tr, c, _ := newTest()
	k := Key{Role: "broker", Name: "delayed"}
	tr.Delayed(k, time.Minute, time.Time{})
	if s := verdictOf(t, tr, k); s.ApplyDelaySeconds != 60 || s.AppliedCommitAgeSeconds != -1 {
		t.Fatalf("nothing let through yet: got %+v", s)
	}
	commit := c.now().Add(-90 * time.Second)
	tr.Delayed(k, time.Minute, commit)
	tr.Delayed(k, time.Minute, commit.Add(-time.Hour))
	c.add(10 * time.Second)
	if s := verdictOf(t, tr, k); s.AppliedCommitAgeSeconds != 100 {
		t.Fatalf("want the newest commit's age 100 s, got %+v", s)
	}
}
