package wftask

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var failedAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func described(status enumspb.WorkflowExecutionStatus, attempt int32) *workflowservice.DescribeWorkflowExecutionResponse {
	d := &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: "broker/s", RunId: "r1"}, Status: status}}
	if attempt > 0 {
		d.PendingWorkflowTask = &workflowpb.PendingWorkflowTaskInfo{Attempt: attempt}
	}
	return d
}

func event(t enumspb.EventType) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: t, EventTime: timestamppb.New(failedAt)}
}

// panicked is the event the Go SDK records for a workflow panic.
func panicked() *historypb.HistoryEvent {
	ev := event(enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED)
	ev.Attributes = &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{
		Cause: enumspb.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE,
		Failure: &failurepb.Failure{Message: "workflow task failed", Cause: &failurepb.Failure{
			Message: "runtime error: slice bounds out of range [:1] with capacity 0", StackTrace: "goroutine 1 …"}},
	}}
	return ev
}

func TestDecide(t *testing.T) {
	running := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	for _, tc := range []struct {
		name    string
		desc    *workflowservice.DescribeWorkflowExecutionResponse
		outcome *historypb.HistoryEvent
		failing bool
	}{
		{"retried after a failure", described(running, 2), panicked(), true},
		{"many attempts later", described(running, 40), panicked(), true},
		{"first attempt is not yet a series", described(running, 1), panicked(), false},
		{"no pending task", described(running, 0), panicked(), false},
		{"retried after a timeout: a worker vanished", described(running, 3), event(enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT), false},
		{"last task completed", described(running, 2), event(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), false},
		{"run ended", described(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, 5), panicked(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Decide(tc.desc, tc.outcome, nil)
			if (f != nil) != tc.failing {
				t.Fatalf("failing: want %v, got %+v", tc.failing, f)
			}
			if f == nil {
				return
			}
			if want := "workflow task failed: runtime error: slice bounds out of range [:1] with capacity 0"; f.Message != want {
				t.Fatalf("message: want %q (the failure and its cause), got %q", want, f.Message)
			}
			if f.Cause != "WorkflowWorkerUnhandledFailure" || !f.Since.Equal(failedAt) || f.Attempt != tc.desc.GetPendingWorkflowTask().GetAttempt() {
				t.Fatalf("want cause, time and attempt of the failure, got %+v", f)
			}
			if s := f.String(); !strings.Contains(s, "since 2026-01-02T03:04:05Z") || !strings.Contains(s, "slice bounds out of range") {
				t.Fatalf("String() lacks the time or message: %s", s)
			}
		})
	}
}

func TestNewestOutcomeSkipsScheduledAndStarted(t *testing.T) {
	// Newest first: a signal turned the retried task into a normal one,
	// whose scheduled and started events follow the failure.
	events := []*historypb.HistoryEvent{
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
		event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED),
		panicked(),
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED),
		event(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
	}
	if ev := NewestOutcome(events); ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
		t.Fatalf("want the failure, got %v", ev.GetEventType())
	}
	if ev := NewestOutcome(events[:3]); ev != nil {
		t.Fatalf("no outcome among scheduled, started and a signal, got %v", ev.GetEventType())
	}
}

func TestDecideDecodesEncryptedMessages(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	enc, err := dc.ToPayload(map[string]string{"message": "secret panic", "stack_trace": ""})
	if err != nil {
		t.Fatal(err)
	}
	ev := panicked()
	ev.GetWorkflowTaskFailedEventAttributes().Failure = &failurepb.Failure{Message: "Encoded failure", EncodedAttributes: enc}
	if f := Decide(described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, 2), ev, dc); f == nil || f.Message != "secret panic" {
		t.Fatalf("want the decoded message, got %+v", f)
	}
	if f := Decide(described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, 2), ev, nil); f == nil || f.Message != "Encoded failure" {
		t.Fatalf("without a converter the stored message stands, got %+v", f)
	}
}

// service answers Describe with desc and the reverse history in pages.
type service struct {
	desc  *workflowservice.DescribeWorkflowExecutionResponse
	pages [][]*historypb.HistoryEvent
	reads int
	fail  error
}

func (s *service) DescribeWorkflowExecution(context.Context, *workflowservice.DescribeWorkflowExecutionRequest, ...grpc.CallOption) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return s.desc, s.fail
}

func (s *service) GetWorkflowExecutionHistoryReverse(_ context.Context, in *workflowservice.GetWorkflowExecutionHistoryReverseRequest, _ ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryReverseResponse, error) {
	if in.GetMaximumPageSize() <= 0 || in.GetExecution().GetRunId() != "r1" {
		return nil, errors.New("want a bounded page of the described run")
	}
	i := s.reads
	s.reads++
	resp := &workflowservice.GetWorkflowExecutionHistoryReverseResponse{History: &historypb.History{Events: s.pages[i]}}
	if i+1 < len(s.pages) {
		resp.NextPageToken = []byte{byte(i + 1)}
	}
	return resp, nil
}

func TestCheckReadsPagesUntilTheOutcome(t *testing.T) {
	signals := make([]*historypb.HistoryEvent, pageSize)
	for i := range signals {
		signals[i] = event(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
	}
	svc := &service{desc: described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, 3),
		pages: [][]*historypb.HistoryEvent{signals, {panicked()}, {event(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)}}}
	f, err := Check(context.Background(), svc, nil, "default", "broker/s", "")
	if err != nil || f == nil || svc.reads != 2 {
		t.Fatalf("want the failure on the second page (and no third read), got %+v, %v after %d reads", f, err, svc.reads)
	}

	healthy := &service{desc: described(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, 1)}
	if f, err := Check(context.Background(), healthy, nil, "default", "broker/s", ""); f != nil || err != nil || healthy.reads != 0 {
		t.Fatalf("a first attempt needs no history read: %+v, %v, %d reads", f, err, healthy.reads)
	}

	down := &service{fail: errors.New("unavailable")}
	if _, err := Check(context.Background(), down, nil, "default", "broker/s", ""); err == nil || !strings.Contains(err.Error(), "describe workflow broker/s") {
		t.Fatalf("want the describe error with context, got %v", err)
	}
}
