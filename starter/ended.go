package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/internal/errcode"
)

// How a run ended, as `status` shows it. The values of endedView.Ended.
const (
	endedFailed         = "failed"
	endedTerminated     = "terminated"
	endedTimedOut       = "timed_out"
	endedCancelled      = "cancelled"
	endedCompleted      = "completed"
	endedContinuedAsNew = "continued_as_new"
)

// endedView is how the latest run of a workflow ended: what `status` prints
// for a run that is no longer running.
type endedView struct {
	Workflow string    `json:"workflow"`
	RunID    string    `json:"run_id"`
	Ended    string    `json:"ended"`
	EndedAt  time.Time `json:"ended_at,omitzero"`
	// ErrorCode is the SLUICE-E code of the run's failure, when it has one.
	ErrorCode string `json:"error_code,omitempty"`
	Error     string `json:"error,omitempty"`
	// Hint says what to do: the code's hint, or one for how the run ended.
	Hint string `json:"hint,omitempty"`
	// Reason and Identity say why and by whom a run was terminated.
	Reason   string `json:"reason,omitempty"`
	Identity string `json:"identity,omitempty"`
}

// terminatedHint is what to do about a run someone terminated.
const terminatedHint = "The run was ended by hand (reason and identity say why and by whom); start it again with `run` if it should be running."

// runEnded is `status`'s SLUICE-E-NOT-RUNNING refusal for a workflow whose
// latest run ended; it carries how, so the command prints that first.
type runEnded struct {
	refusal *errcode.Error
	view    endedView
}

func (e *runEnded) Error() string { return e.refusal.Error() }

// Unwrap returns the refusal, so the CLI reports its code, hint and exit status.
func (e *runEnded) Unwrap() error { return e.refusal }

// ended reads how the latest run of workflow id (described by info) ended,
// from its close event, and returns it as a SLUICE-E-NOT-RUNNING refusal.
// When the history cannot be read, the description alone says how and when.
func (c *cli) ended(ctx context.Context, cl client.Client, id string, info *workflowpb.WorkflowExecutionInfo) error {
	runID := info.GetExecution().GetRunId()
	view := endedView{Workflow: id, RunID: runID, Ended: endedOfStatus(info.GetStatus())}
	if t := info.GetCloseTime(); t != nil {
		view.EndedAt = t.AsTime().UTC()
	}
	ev, err := closeEvent(ctx, cl, c.temporal.Namespace, id, runID)
	if err == nil {
		var fc converter.FailureConverter
		if _, fc, err = c.temporal.Converters(); err == nil {
			view = c.endedFromEvent(view, ev, fc)
		}
	}
	if err != nil {
		view.Error = fmt.Sprintf("how the run ended could not be read: %v", err)
	}
	return endedError(view)
}

// closeEvent returns the last event of a run's history: its close event
// once the run has ended.
func closeEvent(ctx context.Context, cl client.Client, namespace, id, runID string) (*historypb.HistoryEvent, error) {
	res, err := cl.WorkflowService().GetWorkflowExecutionHistoryReverse(ctx, &workflowservice.GetWorkflowExecutionHistoryReverseRequest{
		Namespace:       namespace,
		Execution:       &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		MaximumPageSize: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("read the close event of %s (run %s): %w", id, runID, err)
	}
	events := res.GetHistory().GetEvents()
	if len(events) == 0 {
		return nil, fmt.Errorf("read the close event of %s (run %s): the history is empty", id, runID)
	}
	return events[0], nil
}

// endedFromEvent fills view from a run's close event: when it ended and,
// through the CLI's failure mapping, the code, message and hint of a failed,
// timed-out or cancelled run; a terminated run's reason and identity.
func (c *cli) endedFromEvent(view endedView, ev *historypb.HistoryEvent, fc converter.FailureConverter) endedView {
	if t := ev.GetEventTime(); t != nil {
		view.EndedAt = t.AsTime().UTC()
	}
	var err error
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
		view.Ended = endedFailed
		err = fc.FailureToError(ev.GetWorkflowExecutionFailedEventAttributes().GetFailure())
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
		view.Ended = endedTimedOut
		err = fc.FailureToError(&failurepb.Failure{
			Message:     "the run reached its workflow timeout",
			FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: enumspb.TIMEOUT_TYPE_START_TO_CLOSE}},
		})
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
		view.Ended = endedCancelled
		err = temporal.NewCanceledError()
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
		a := ev.GetWorkflowExecutionTerminatedEventAttributes()
		view.Ended, view.Reason, view.Identity = endedTerminated, a.GetReason(), a.GetIdentity()
		view.Error, view.Hint = "the run was terminated", terminatedHint
		if view.Identity != "" {
			view.Error += " by " + view.Identity
		}
		if view.Reason != "" {
			view.Error += ": " + view.Reason
		}
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		view.Ended = endedCompleted
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
		view.Ended = endedContinuedAsNew
	}
	if err != nil {
		var wf *workflowFailure
		if errors.As(c.failure(err), &wf) {
			view.ErrorCode, view.Error, view.Hint = wf.code, wf.message, wf.hint
		}
	}
	return view
}

// endedOfStatus names how a run ended from its execution status alone.
func endedOfStatus(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return endedFailed
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return endedTerminated
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return endedTimedOut
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return endedCancelled
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return endedCompleted
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return endedContinuedAsNew
	}
	return s.String()
}

// endedPhrases says how a run ended, in the refusal's message.
var endedPhrases = map[string]string{
	endedFailed:         "failed",
	endedTerminated:     "was terminated",
	endedTimedOut:       "timed out",
	endedCancelled:      "was cancelled",
	endedCompleted:      "completed",
	endedContinuedAsNew: "continued as new",
}

// endedError is the SLUICE-E-NOT-RUNNING refusal naming how and when the
// run in view ended.
func endedError(view endedView) *runEnded {
	how, ok := endedPhrases[view.Ended]
	if !ok {
		how = "ended " + view.Ended
	}
	msg := fmt.Sprintf("workflow %s is not running: its last run %s", view.Workflow, how)
	if !view.EndedAt.IsZero() {
		msg += " at " + view.EndedAt.Format(time.RFC3339)
	}
	if view.ErrorCode != "" {
		msg += " with " + view.ErrorCode
	}
	e := errcode.New(errcode.NotRunning, "%s", msg)
	e.Hint = "Nothing restarts an ended run: start it again with `run`"
	if view.Error != "" {
		e.Hint += " once what its error says is dealt with (error and hint above)"
	}
	e.Hint += "."
	return &runEnded{refusal: e, view: view}
}

// printEnded prints how the run ended when err is a status command's refusal
// of an ended run: on stdout, as text or, with the command's --json, as JSON.
func (c *cli) printEnded(cmd *cobra.Command, err error) {
	var e *runEnded
	if cmd == nil || !errors.As(err, &e) {
		return
	}
	asJSON, _ := cmd.Flags().GetBool("json")
	if perr := c.printStatus(e.view, asJSON); perr != nil {
		fmt.Fprintf(c.stderr, "warning: %v\n", perr)
	}
}
