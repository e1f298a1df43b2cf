package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/wftask"
)

// A run whose workflow task keeps failing answers no query and runs no
// activity: `status` says stalled (workflow_task_failing) with the failure,
// not not_running, and says why the query went unanswered.
func TestJudgeRunWithFailingWorkflowTask(t *testing.T) {
	c := newCLI(&strings.Builder{}, &strings.Builder{})
	const panicMsg = "runtime error: slice bounds out of range [:1] with capacity 0"
	queryErr := errors.New("Workflow Task in failed state")
	view := runView{queryErr: queryErr, task: taskState{failure: &wftask.Failure{
		Message: panicMsg, Cause: "WorkflowWorkerUnhandledFailure", Since: t0, Attempt: 7}}}
	v, err := c.judgeRun(view, health.Facts{}, health.Thresholds{}, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != health.Stalled || v.Cause != health.CauseWorkflowTaskFailing || v.StallError != panicMsg {
		t.Fatalf("want stalled/workflow_task_failing with the panic message, got %+v", v)
	}
	if !strings.Contains(v.QueryUnanswered, "workflow task failing") || !strings.Contains(v.QueryUnanswered, "attempt 7") ||
		strings.Contains(v.QueryUnanswered, "no worker answered") {
		t.Fatalf("the unanswered query is explained by the failing task: %q", v.QueryUnanswered)
	}

	// The same run with its task fine: nothing reported, so not_running.
	view.task = taskState{}
	if v, _ := c.judgeRun(view, health.Facts{}, health.Thresholds{}, t0.Add(time.Hour)); v.Verdict != health.NotRunning ||
		!strings.Contains(v.QueryUnanswered, "no worker answered") {
		t.Fatalf("without a failing task: want not_running and the query's own error, got %+v", v)
	}
}
