package main

import (
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicehq/sluice/internal/health"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func heartbeat(t *testing.T, details map[string]any) *commonpb.Payloads {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(details)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestActivityFactsFromHeartbeat(t *testing.T) {
	th := health.Thresholds{PollStall: 3 * time.Second, DeliveryStall: 6 * time.Second, NotRunning: 20 * time.Second}
	facts := health.Facts{PolledAt: t0, DeliveredAt: t0.Add(-time.Minute), ReportedAt: t0, Pending: true}
	pa := &workflowpb.PendingActivityInfo{
		State:             enumspb.PENDING_ACTIVITY_STATE_STARTED,
		Attempt:           1,
		HeartbeatDetails:  heartbeat(t, map[string]any{"applied": 10, "health": facts, "thresholds": th}),
		LastHeartbeatTime: timestamppb.New(t0.Add(2 * time.Second)),
		LastStartedTime:   timestamppb.New(t0.Add(-time.Hour)),
	}
	f, gotTh, carried := activityFacts(pa, converter.GetDefaultDataConverter(), temporal.GetDefaultFailureConverter())
	if !carried || gotTh == nil || *gotTh != th {
		t.Fatalf("thresholds from the heartbeat: got %+v", gotTh)
	}
	if !f.PolledAt.Equal(t0) || !f.Pending || !f.ReportedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("facts from a started activity's heartbeat: %+v", f)
	}
	// Once the attempt timed out (the worker vanished), the heartbeat time
	// is no sign of life and a timeout is no cause: the ages speak.
	pa.State = enumspb.PENDING_ACTIVITY_STATE_SCHEDULED
	pa.Attempt = 2
	pa.LastFailure = &failurepb.Failure{Message: "activity Heartbeat timeout",
		FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: enumspb.TIMEOUT_TYPE_HEARTBEAT}}}
	pa.LastAttemptCompleteTime = timestamppb.New(t0.Add(30 * time.Second))
	f, _, _ = activityFacts(pa, converter.GetDefaultDataConverter(), temporal.GetDefaultFailureConverter())
	if !f.ReportedAt.Equal(t0) || f.FailCause != "" {
		t.Fatalf("a timed-out attempt reports nothing: %+v", f)
	}
	if v, c := health.Judge(f, t0.Add(10*time.Second), th); v != health.Stalled || c != health.CausePollLoopNotTurning {
		t.Fatalf("10s after the last poll: want stalled/poll_loop_not_turning, got %s/%s", v, c)
	}
	if v, _ := health.Judge(f, t0.Add(25*time.Second), th); v != health.NotRunning {
		t.Fatalf("25s after the last report: want not_running, got %s", v)
	}
}

func TestActivityFactsFromFailedAttempt(t *testing.T) {
	fc := temporal.GetDefaultFailureConverter()
	appErr := temporal.NewApplicationError("SLUICE-E-TARGET-UNREACHABLE: connect to target: refused", "SLUICE-E-TARGET-UNREACHABLE")
	pa := &workflowpb.PendingActivityInfo{
		State:                   enumspb.PENDING_ACTIVITY_STATE_SCHEDULED,
		Attempt:                 3,
		LastFailure:             fc.ErrorToFailure(appErr),
		LastAttemptCompleteTime: timestamppb.New(t0),
	}
	f, th, carried := activityFacts(pa, converter.GetDefaultDataConverter(), fc)
	if th != nil || carried {
		t.Fatalf("no heartbeat, no thresholds: %+v", th)
	}
	if f.FailCause != health.CauseTargetRefusing || !f.ReportedAt.Equal(t0) || f.FailError == "" {
		t.Fatalf("a failed attempt names its cause by its code: %+v", f)
	}
	// The workflow's older view merges under it; a later delivery clears it.
	wf := health.Facts{PolledAt: t0.Add(-time.Second), DeliveredAt: t0.Add(-time.Minute), ReportedAt: t0.Add(-time.Second)}
	if m := wf.Merge(f); m.FailCause != health.CauseTargetRefusing {
		t.Fatalf("merged: %+v", m)
	}
	wf.DeliveredAt, wf.ReportedAt = t0.Add(time.Second), t0.Add(time.Second)
	if m := wf.Merge(f); m.FailCause != "" {
		t.Fatalf("a delivery after the failure clears it: %+v", m)
	}
}

func TestHealthFlagsChecked(t *testing.T) {
	for _, tc := range []struct {
		th   health.Thresholds
		poll time.Duration
		ok   bool
	}{
		{health.Thresholds{PollStall: 3 * time.Second, DeliveryStall: 6 * time.Second, NotRunning: 20 * time.Second}, 500 * time.Millisecond, true},
		{health.Thresholds{PollStall: 15 * time.Second, DeliveryStall: time.Minute, NotRunning: time.Minute}, 10 * time.Second, false},
		{health.Thresholds{PollStall: 0, DeliveryStall: time.Minute, NotRunning: time.Minute}, time.Second, false},
		{health.Thresholds{PollStall: time.Minute, DeliveryStall: time.Second, NotRunning: time.Minute}, time.Second, false},
	} {
		h := healthFlags{th: tc.th}
		_, err := h.thresholds(tc.poll)
		if tc.ok != (err == nil) {
			t.Errorf("%+v every %s: got %v", tc.th, tc.poll, err)
		}
		if err != nil && !strings.Contains(err.Error(), "SLUICE-E-USAGE") {
			t.Errorf("a bad threshold is a usage error (exit 2), got %v", err)
		}
	}
}

// A restore's LoadTable heartbeat (no health facts) is a sign of life only.
func TestActivityWithoutFactsIsOnlyALifeSign(t *testing.T) {
	pa := &workflowpb.PendingActivityInfo{
		State:             enumspb.PENDING_ACTIVITY_STATE_STARTED,
		Attempt:           1,
		HeartbeatDetails:  heartbeat(t, map[string]any{"table": "public.t", "rows": 5}),
		LastHeartbeatTime: timestamppb.New(t0),
	}
	f, _, carried := activityFacts(pa, converter.GetDefaultDataConverter(), temporal.GetDefaultFailureConverter())
	if carried || !f.ReportedAt.Equal(t0) || f.Pending {
		t.Fatalf("got %+v carried=%t", f, carried)
	}
}
