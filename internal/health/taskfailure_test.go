package health

import (
	"strings"
	"testing"
	"time"
)

func TestJudgeFailingTaskIsStalledThoughNothingReports(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, f := range map[string]Facts{
		"never reported":               {TaskFailure: "panic"},
		"reported before not_running":  {TaskFailure: "panic", ReportedAt: now.Add(-time.Hour), PolledAt: now.Add(-time.Hour)},
		"another failure reported too": {TaskFailure: "panic", ReportedAt: now, PolledAt: now, FailCause: CauseStoreUnreachable},
	} {
		if v, c := Judge(f, now, Thresholds{}); v != Stalled || c != CauseWorkflowTaskFailing {
			t.Errorf("%s: want stalled %s, got %s %s", name, CauseWorkflowTaskFailing, v, c)
		}
	}
	if v, _ := Judge(Facts{}, now, Thresholds{}); v != NotRunning {
		t.Errorf("without a task failure nothing reported is not_running, got %s", v)
	}
}

func TestMergeKeepsTheTaskFailure(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	wf := Facts{TaskFailure: "panic"}
	act := Facts{ReportedAt: now, DeliveredAt: now, PolledAt: now}
	for _, f := range []Facts{wf.Merge(act), act.Merge(wf)} {
		if f.TaskFailure != "panic" || f.StallError() != "panic" {
			t.Fatalf("a merge (even with a later delivery) keeps the task failure, got %+v", f)
		}
	}
}

func TestTrackerFailingTask(t *testing.T) {
	tr, c, logs := newTest()
	k := Key{Role: "broker", Name: "s"}
	const msg = "runtime error: slice bounds out of range [:1] with capacity 0"

	// A fresh worker that never ran an activity of the run learns of it
	// from Temporal alone, and keeps saying so on every look.
	for i := 0; i < 5; i++ {
		tr.TaskFailing(k, msg)
		if s := verdictOf(t, tr, k); s.Verdict != Stalled || s.Cause != CauseWorkflowTaskFailing || s.LastError != msg {
			t.Fatalf("want stalled %s with the failure, got %+v", CauseWorkflowTaskFailing, s)
		}
		c.add(15 * time.Second)
	}
	// Long after the not-running threshold, with no more looks, it is
	// still stalled: we know it exists and why it is stuck.
	c.add(2 * DefaultNotRunning)
	if s := verdictOf(t, tr, k); s.Verdict != Stalled || s.Cause != CauseWorkflowTaskFailing {
		t.Fatalf("a known failing task stays stalled, got %+v", s)
	}
	// Its deliveries (an activity the server retried) do not clear it.
	tr.Delivered(k)
	if s := verdictOf(t, tr, k); s.Cause != CauseWorkflowTaskFailing {
		t.Fatalf("a delivery does not fix a workflow task, got %+v", s)
	}
	if n := strings.Count(logs.String(), "run health degraded to stalled"); n != 1 {
		t.Fatalf("want one WARN for the stall, got %d:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "cause="+CauseWorkflowTaskFailing) || !strings.Contains(logs.String(), "slice bounds out of range") {
		t.Fatalf("the WARN names the cause and the failure:\n%s", logs)
	}

	// Fixed: only that cause clears, the run is judged by its reports again.
	tr.TaskRecovered(k)
	if s := verdictOf(t, tr, k); s.Verdict != Healthy {
		t.Fatalf("after the fix the fresh delivery counts, got %+v", s)
	}
	if !strings.Contains(logs.String(), "run recovered from stall") {
		t.Fatalf("want the recovery logged:\n%s", logs)
	}
}

func TestTaskRecoveredClearsOnlyItsCause(t *testing.T) {
	tr, _, _ := newTest()
	k := Key{Role: "producer", Name: "file:///chain"}
	tr.Polled(k, false)
	tr.Failed(k, CauseStoreUnreachable, "store down")
	tr.TaskFailing(k, "nondeterministic workflow")
	if s := verdictOf(t, tr, k); s.Cause != CauseWorkflowTaskFailing || s.LastError != "nondeterministic workflow" {
		t.Fatalf("the failing task comes first, got %+v", s)
	}
	tr.TaskRecovered(k)
	if s := verdictOf(t, tr, k); s.Cause != CauseStoreUnreachable || s.LastError != "store down" {
		t.Fatalf("the other failure stands, got %+v", s)
	}
	// Recovering a run nobody knows is nothing.
	tr.TaskRecovered(Key{Role: "broker", Name: "unknown"})
	if n := len(tr.Statuses()); n != 1 {
		t.Fatalf("want one run, got %d", n)
	}
	var none *Tracker
	none.TaskFailing(k, "x")
	none.TaskRecovered(k)
}
