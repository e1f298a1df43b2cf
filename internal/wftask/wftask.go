// Package wftask tells whether a Temporal workflow run is stuck on a failing
// workflow task — its workflow code panics, or fails to replay its history
// (non-determinism after a bad deploy) — and why.
//
// Such a run is not ended and not visibly broken: under the SDK's default
// panic policy it waits, retrying the task, until a worker with fixed code
// picks it up. Nothing in it reports (no activity runs, no query is answered),
// so without this check it looks like a run nobody hosts.
//
// The check reads two things: the run's description (a pending workflow task
// on its second attempt or later) and, newest first, the workflow-task events
// of its history. Temporal records only the first failure of a series of
// failed attempts (later attempts are transient and leave no events), so the
// newest workflow-task outcome in the history is the one that names the
// failure. An outcome that is a timeout is a worker that vanished mid-task,
// not failing code, and is not reported here.
package wftask

import (
	"context"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
)

// MinAttempt is the workflow-task attempt from which a run counts as failing:
// the first attempt failed and the task is being retried.
const MinAttempt = 2

// pageSize is how many history events one reverse page holds; the outcome
// looked for is usually among the last few events.
const pageSize = 16

// maxEvents bounds how far back the history is read for the outcome.
const maxEvents = 256

// Service is the part of Temporal's WorkflowService the check calls;
// workflowservice.WorkflowServiceClient (a client's WorkflowService()) is one.
type Service interface {
	DescribeWorkflowExecution(ctx context.Context, in *workflowservice.DescribeWorkflowExecutionRequest, opts ...grpc.CallOption) (*workflowservice.DescribeWorkflowExecutionResponse, error)
	GetWorkflowExecutionHistoryReverse(ctx context.Context, in *workflowservice.GetWorkflowExecutionHistoryReverseRequest, opts ...grpc.CallOption) (*workflowservice.GetWorkflowExecutionHistoryReverseResponse, error)
}

// Failure describes a workflow task that keeps failing.
type Failure struct {
	// Message is the failure's message with its causes, as the worker
	// reported it (for a panic, the panic's value).
	Message string
	// Cause is Temporal's reason for the failure, e.g.
	// WorkflowWorkerUnhandledFailure (a panic) or NonDeterministicError
	// (the history does not replay).
	Cause string
	// Since is when the first failed attempt was recorded.
	Since time.Time
	// Attempt is the attempt the pending workflow task is on.
	Attempt int32
}

// String describes the failure in one line.
func (f *Failure) String() string {
	s := fmt.Sprintf("workflow task failing since %s (attempt %d", f.Since.UTC().Format(time.RFC3339), f.Attempt)
	if f.Cause != "" {
		s += ", " + f.Cause
	}
	return s + "): " + f.Message
}

// Check describes run runID of workflow workflowID (its latest run when runID
// is empty) and returns its workflow task's failure, or nil when the task is
// not failing (or the run is not running). dc decodes failure messages stored
// encrypted (the client's data converter; nil reads them as stored).
func Check(ctx context.Context, svc Service, dc converter.DataConverter, namespace, workflowID, runID string) (*Failure, error) {
	desc, err := svc.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID}})
	if err != nil {
		return nil, fmt.Errorf("describe workflow %s: %w", workflowID, err)
	}
	return Inspect(ctx, svc, dc, namespace, desc)
}

// Inspect is Check for a run already described: the history is read only
// when the description shows a retried workflow task.
func Inspect(ctx context.Context, svc Service, dc converter.DataConverter, namespace string, desc *workflowservice.DescribeWorkflowExecutionResponse) (*Failure, error) {
	if !Retrying(desc) {
		return nil, nil
	}
	exec := desc.GetWorkflowExecutionInfo().GetExecution()
	req := &workflowservice.GetWorkflowExecutionHistoryReverseRequest{
		Namespace: namespace, Execution: exec, MaximumPageSize: pageSize}
	for read := 0; read < maxEvents; {
		resp, err := svc.GetWorkflowExecutionHistoryReverse(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("read the history of workflow %s: %w", exec.GetWorkflowId(), err)
		}
		events := resp.GetHistory().GetEvents()
		if ev := NewestOutcome(events); ev != nil {
			return Decide(desc, ev, dc), nil
		}
		read += len(events)
		if len(resp.GetNextPageToken()) == 0 || len(events) == 0 {
			break
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
	return nil, nil
}

// Retrying says whether a described run is running with a pending workflow
// task on attempt MinAttempt or later.
func Retrying(desc *workflowservice.DescribeWorkflowExecutionResponse) bool {
	return desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING &&
		desc.GetPendingWorkflowTask().GetAttempt() >= MinAttempt
}

// NewestOutcome returns the first workflow-task outcome (completed, failed or
// timed out) among events ordered newest first, or nil when they hold none.
// Scheduled and started events are skipped: a retried task that new events
// turned into a normal one records them after its failure.
func NewestOutcome(events []*historypb.HistoryEvent) *historypb.HistoryEvent {
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			return ev
		}
	}
	return nil
}

// Decide judges a described run by its newest workflow-task outcome: the
// task is failing when the run's pending task is retried and that outcome is
// a failure. A timeout (the worker vanished) or a completion is not. dc
// decodes encrypted failure messages (nil: they are read as stored).
func Decide(desc *workflowservice.DescribeWorkflowExecutionResponse, outcome *historypb.HistoryEvent, dc converter.DataConverter) *Failure {
	if !Retrying(desc) || outcome.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
		return nil
	}
	attrs := outcome.GetWorkflowTaskFailedEventAttributes()
	f := &Failure{Message: message(attrs.GetFailure(), dc), Attempt: desc.GetPendingWorkflowTask().GetAttempt()}
	if f.Message == "" {
		f.Message = "the worker reported no failure message"
	}
	if c := attrs.GetCause(); c != enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNSPECIFIED {
		f.Cause = c.String()
	}
	if t := outcome.GetEventTime(); t != nil {
		f.Since = t.AsTime()
	}
	return f
}

// message renders a failure and its cause chain as "outer: inner: …"; dc,
// when given, decodes messages stored encrypted.
func message(fl *failurepb.Failure, dc converter.DataConverter) string {
	var parts []string
	for ; fl != nil; fl = fl.GetCause() {
		msg := fl.GetMessage()
		if dc != nil && fl.GetEncodedAttributes() != nil {
			decoded := &failurepb.Failure{Message: msg, EncodedAttributes: fl.GetEncodedAttributes()}
			converter.DecodeCommonFailureAttributes(dc, decoded)
			msg = decoded.GetMessage()
		}
		if msg != "" {
			parts = append(parts, msg)
		}
	}
	return strings.Join(parts, ": ")
}
