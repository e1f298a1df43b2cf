package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/health"
)

// fakeTemporal lists running workflows and answers for each whether its
// workflow task is failing (failing[id] is the panic message, "" when fine).
type fakeTemporal struct {
	running []string
	failing map[string]string
	listErr error
	queries []string
}

func (f *fakeTemporal) ListWorkflowExecutions(_ context.Context, in *workflowservice.ListWorkflowExecutionsRequest, _ ...grpc.CallOption) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.queries = append(f.queries, in.GetQuery())
	if f.listErr != nil {
		return nil, f.listErr
	}
	// One execution per page, to go through the page tokens.
	i := 0
	if len(in.GetNextPageToken()) > 0 {
		i = int(in.GetNextPageToken()[0])
	}
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	if i < len(f.running) {
		resp.Executions = []*workflowpb.WorkflowExecutionInfo{{Execution: &commonpb.WorkflowExecution{WorkflowId: f.running[i], RunId: "run-" + f.running[i]}}}
	}
	if i+1 < len(f.running) {
		resp.NextPageToken = []byte{byte(i + 1)}
	}
	return resp, nil
}

func (f *fakeTemporal) DescribeWorkflowExecution(_ context.Context, in *workflowservice.DescribeWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	id := in.GetExecution().GetWorkflowId()
	if in.GetExecution().GetRunId() != "run-"+id {
		return nil, errors.New("want the listed run described")
	}
	attempt := int32(1)
	if f.failing[id] != "" {
		attempt = 4
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Execution: in.GetExecution(), Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
		PendingWorkflowTask:   &workflowpb.PendingWorkflowTaskInfo{Attempt: attempt},
	}, nil
}

func (f *fakeTemporal) GetWorkflowExecutionHistoryReverse(_ context.Context, in *workflowservice.GetWorkflowExecutionHistoryReverseRequest, _ ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryReverseResponse, error) {
	msg := f.failing[in.GetExecution().GetWorkflowId()]
	ev := &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{
			Failure: &failurepb.Failure{Message: msg}}}}
	return &workflowservice.GetWorkflowExecutionHistoryReverseResponse{History: &historypb.History{Events: []*historypb.HistoryEvent{ev}}}, nil
}

func statusOf(tr *health.Tracker, k health.Key) *health.Status {
	for _, s := range tr.Statuses() {
		if s.Key == k {
			return &s
		}
	}
	return nil
}

func TestTaskWatch(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	tr := health.NewTracker(log, nil)
	const chainURL = "file:///chains/app"
	broker, producer := health.Key{Role: "broker", Name: "s1"}, health.Key{Role: "producer", Name: chainURL}
	fake := &fakeTemporal{running: []string{"backup-full/x", "broker/s1", "producer/" + chainURL},
		failing: map[string]string{"broker/s1": "runtime error: slice bounds out of range", "backup-full/x": "not a run with a verdict"}}
	w := newTaskWatch(fake, "default", "sluice-q", nil, tr, log)
	ctx := context.Background()

	// A fresh worker that never ran an activity of the stuck broker.
	w.once(ctx)
	if want := "TaskQueue = 'sluice-q' AND ExecutionStatus = 'Running' AND WorkflowType IN ('BrokerWorkflow', 'ProducerWorkflow')"; fake.queries[0] != want {
		t.Fatalf("query: want %s, got %s", want, fake.queries[0])
	}
	s := statusOf(tr, broker)
	if s == nil || s.Verdict != health.Stalled || s.Cause != health.CauseWorkflowTaskFailing || s.LastError != "runtime error: slice bounds out of range" {
		t.Fatalf("want the broker stalled with its task's failure, got %+v", s)
	}
	if s := statusOf(tr, producer); s != nil {
		t.Fatalf("a producer whose task is fine is not reported by the watch, got %+v", s)
	}
	if n := len(tr.Statuses()); n != 1 {
		t.Fatalf("only producers and brokers are judged, got %d runs", n)
	}

	// Listing fails for a while: logged once, nothing cleared.
	fake.listErr = errors.New("visibility unavailable")
	w.once(ctx)
	w.once(ctx)
	if n := strings.Count(logs.String(), "cannot list the task queue's runs"); n != 1 {
		t.Fatalf("want one warning for a lasting listing error, got %d:\n%s", n, logs.String())
	}
	if s := statusOf(tr, broker); s == nil || s.Cause != health.CauseWorkflowTaskFailing {
		t.Fatalf("a failed listing clears nothing, got %+v", s)
	}
	fake.listErr = nil

	// A fixed worker took the task: the cause clears.
	delete(fake.failing, "broker/s1")
	tr.Polled(broker, false)
	w.once(ctx)
	if s := statusOf(tr, broker); s == nil || s.Verdict != health.Idle {
		t.Fatalf("want the broker judged by its polls again, got %+v", s)
	}

	// Failing again, then terminated by an operator: forgotten.
	fake.failing["broker/s1"] = "nondeterministic workflow"
	w.once(ctx)
	if s := statusOf(tr, broker); s == nil || s.LastError != "nondeterministic workflow" {
		t.Fatalf("want the new failure, got %+v", s)
	}
	fake.running = fake.running[:1]
	w.once(ctx)
	if s := statusOf(tr, broker); s != nil {
		t.Fatalf("a run no longer running is forgotten, got %+v", s)
	}
}

func TestKeyOf(t *testing.T) {
	for id, want := range map[string]health.Key{
		"broker/demo":                {Role: "broker", Name: "demo"},
		"producer/s3://bucket/chain": {Role: "producer", Name: "s3://bucket/chain"},
		"producer/file:///tmp/chain": {Role: "producer", Name: "file:///tmp/chain"},
	} {
		if got, ok := keyOf(id); !ok || got != want {
			t.Errorf("%s: want %+v, got %+v %v", id, want, got, ok)
		}
	}
	for _, id := range []string{"broker/", "backup-full/file:///c", "restore/x", "brokers/x"} {
		if _, ok := keyOf(id); ok {
			t.Errorf("%s is no producer or broker", id)
		}
	}
}
