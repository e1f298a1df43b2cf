package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluicehq/sluice/internal/errcode"
)

// noPositionClose is the close event of a broker run its first activity
// refused: the workflow failed with the activity's failure, whose cause is
// the application error named by the code, with the hint as its detail.
func noPositionClose(t *testing.T) *historypb.HistoryEvent {
	t.Helper()
	fc := temporal.GetDefaultFailureConverter()
	refusal := errcode.New(errcode.BrokerNoPosition, "the target holds no position for stream %q", "s1")
	app := fc.ErrorToFailure(temporal.NewApplicationErrorWithOptions(refusal.Error(), string(refusal.Code),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{refusal.HintText()}}))
	return &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
		EventTime: timestamppb.New(t0),
		Attributes: &historypb.HistoryEvent_WorkflowExecutionFailedEventAttributes{WorkflowExecutionFailedEventAttributes: &historypb.WorkflowExecutionFailedEventAttributes{
			Failure: &failurepb.Failure{
				Message:     "activity error",
				FailureInfo: &failurepb.Failure_ActivityFailureInfo{ActivityFailureInfo: &failurepb.ActivityFailureInfo{}},
				Cause:       app,
			},
		}},
	}
}

func endedOf(t *testing.T, ev *historypb.HistoryEvent) endedView {
	t.Helper()
	c := newCLI(&bytes.Buffer{}, &bytes.Buffer{})
	c.temporal.TaskQueue = "sluice"
	return c.endedFromEvent(endedView{Workflow: "broker/s1", RunID: "r1"}, ev, temporal.GetDefaultFailureConverter())
}

// TestEndedFailedRun: a refused run's status says how and when it ended,
// its code, its message and the code's hint, as text lines and as JSON;
// the command still ends with SLUICE-E-NOT-RUNNING, naming how and when.
func TestEndedFailedRun(t *testing.T) {
	view := endedOf(t, noPositionClose(t))
	hint, _ := errcode.Lookup(errcode.BrokerNoPosition)
	want := strings.Join([]string{
		"ended:                 failed",
		"ended_at:              2026-11-29T10:00:00Z",
		`error:                 SLUICE-E-BROKER-NO-POSITION: the target holds no position for stream "s1"`,
		"error_code:            SLUICE-E-BROKER-NO-POSITION",
		"hint:                  " + hint.Hint,
		"run_id:                r1",
		"workflow:              broker/s1",
	}, "\n") + "\n"
	if got := printed(t, view, false); got != want {
		t.Fatalf("text:\n%s\nwant:\n%s", got, want)
	}

	var m map[string]any
	if err := json.Unmarshal([]byte(printed(t, view, true)), &m); err != nil {
		t.Fatal(err)
	}
	if m["ended"] != "failed" || m["ended_at"] != "2026-11-29T10:00:00Z" || m["error_code"] != "SLUICE-E-BROKER-NO-POSITION" || m["hint"] != hint.Hint {
		t.Fatalf("JSON: %v", m)
	}

	var stderr bytes.Buffer
	c := newCLI(&bytes.Buffer{}, &stderr)
	if exit := c.report(endedError(view)); exit != errcode.ExitRefused {
		t.Fatalf("exit %d, want %d (SLUICE-E-NOT-RUNNING)", exit, errcode.ExitRefused)
	}
	if want := "sluice: SLUICE-E-NOT-RUNNING: workflow broker/s1 is not running: its last run failed at 2026-11-29T10:00:00Z with SLUICE-E-BROKER-NO-POSITION\n"; !strings.HasPrefix(stderr.String(), want) {
		t.Fatalf("stderr:\n%s\nwant it to begin:\n%s", stderr.String(), want)
	}
}

// TestEndedOtherwise: terminated, timed-out and cancelled runs each say
// what ended them and what to do.
func TestEndedOtherwise(t *testing.T) {
	terminated := endedOf(t, &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
		EventTime: timestamppb.New(t0),
		Attributes: &historypb.HistoryEvent_WorkflowExecutionTerminatedEventAttributes{WorkflowExecutionTerminatedEventAttributes: &historypb.WorkflowExecutionTerminatedEventAttributes{
			Reason: "moving to the new cluster", Identity: "ops@bastion",
		}},
	})
	if terminated.Ended != endedTerminated || terminated.Reason != "moving to the new cluster" || terminated.Identity != "ops@bastion" ||
		terminated.Error != "the run was terminated by ops@bastion: moving to the new cluster" || terminated.Hint == "" || terminated.ErrorCode != "" {
		t.Errorf("terminated: %+v", terminated)
	}

	timedOut := endedOf(t, &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
		EventTime: timestamppb.New(t0),
		Attributes: &historypb.HistoryEvent_WorkflowExecutionTimedOutEventAttributes{WorkflowExecutionTimedOutEventAttributes: &historypb.WorkflowExecutionTimedOutEventAttributes{
			RetryState: enumspb.RETRY_STATE_TIMEOUT,
		}},
	})
	if timedOut.Ended != endedTimedOut || !strings.Contains(timedOut.Error, "timed out") || !strings.Contains(timedOut.Hint, "task queue sluice") {
		t.Errorf("timed out: %+v", timedOut)
	}

	cancelled := endedOf(t, &historypb.HistoryEvent{
		EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
		EventTime: timestamppb.New(t0),
	})
	if cancelled.Ended != endedCancelled || cancelled.ErrorCode != string(errcode.Canceled) || cancelled.Hint == "" {
		t.Errorf("cancelled: %+v", cancelled)
	}
	if got := endedError(cancelled).Error(); got != "SLUICE-E-NOT-RUNNING: workflow broker/s1 is not running: its last run was cancelled at 2026-11-29T10:00:00Z with SLUICE-E-CANCELED" {
		t.Errorf("cancelled refusal: %s", got)
	}

	completed := endedOf(t, &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, EventTime: timestamppb.New(t0)})
	if completed.Ended != endedCompleted || completed.Error != "" || completed.ErrorCode != "" {
		t.Errorf("completed: %+v", completed)
	}
}

// TestPrintEndedFollowsJSONFlag: the ended run prints in the command's
// format, and nothing prints for any other error.
func TestPrintEndedFollowsJSONFlag(t *testing.T) {
	view := endedOf(t, noPositionClose(t))
	for _, asJSON := range []bool{false, true} {
		var out bytes.Buffer
		c := newCLI(&out, &bytes.Buffer{})
		cmd := &cobra.Command{Use: "status"}
		cmd.Flags().Bool("json", asJSON, "")
		c.printEnded(cmd, endedError(view))
		if got := out.String(); asJSON != strings.HasPrefix(got, "{") || !strings.Contains(got, "SLUICE-E-BROKER-NO-POSITION") {
			t.Errorf("--json=%t printed:\n%s", asJSON, got)
		}
		out.Reset()
		c.printEnded(cmd, errcode.New(errcode.NotRunning, "no workflow broker/s1"))
		if out.Len() != 0 {
			t.Errorf("a workflow that never ran printed %q", out.String())
		}
	}
}
