package health

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A run paused on purpose reads idle however old its last poll and
// however long nothing reported on it; a failing workflow task still
// reads stalled.
func TestPausedRunIsIdle(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	old := now.Add(-3 * time.Hour)
	f := Facts{PolledAt: old, ReportedAt: old, Pending: true, Paused: true}
	if v, c := Judge(f, now, Thresholds{}); v != Idle || c != "" {
		t.Fatalf("paused: %s %s, want idle", v, c)
	}
	f.Paused = false
	if v, _ := Judge(f, now, Thresholds{}); v != NotRunning {
		t.Fatalf("not paused: %s, want not_running", v)
	}
	f.Paused, f.TaskFailure = true, "panic"
	if v, c := Judge(f, now, Thresholds{}); v != Stalled || c != CauseWorkflowTaskFailing {
		t.Fatalf("paused with a failing task: %s %s", v, c)
	}
}

// Thresholds travel in workflow inputs as duration text, and decode from
// the numbers of nanoseconds recorded before.
func TestThresholdsJSON(t *testing.T) {
	b, err := json.Marshal(Thresholds{PollStall: 2 * time.Minute, NotRunning: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `{"poll_stall":"2m0s","not_running":"1h0m0s"}` {
		t.Fatalf("encoded %s", got)
	}
	var th Thresholds
	if err := json.Unmarshal([]byte(`{"poll_stall":120000000000,"delivery_stall":"10m","not_running":600000000000}`), &th); err != nil {
		t.Fatal(err)
	}
	if th != (Thresholds{PollStall: 2 * time.Minute, DeliveryStall: 10 * time.Minute, NotRunning: 10 * time.Minute}) {
		t.Fatalf("decoded %+v", th)
	}
	if err := json.Unmarshal([]byte(`{"poll_stall":"soon"}`), &th); err == nil || !strings.Contains(err.Error(), "soon") {
		t.Fatalf("a bad duration: %v", err)
	}
}
