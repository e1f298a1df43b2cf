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
	c.add(PollStall + time.Second)
	tr.mu.Lock()
	tr.runs[k].lastReport = c.now() // something else reported (e.g. a heartbeat)
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
	// Nothing reported for longer than Gone.
	c.add(Gone + time.Second)
	if s := verdictOf(t, tr, k); s.Verdict != NotRunning {
		t.Fatalf("want not_running, got %+v", s)
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
