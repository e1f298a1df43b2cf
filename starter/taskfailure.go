package main

import (
	"context"
	"fmt"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/wftask"
)

// taskState is what `status` learned of a running run's workflow task: its
// failure while it keeps failing (a workflow panic, non-determinism after a
// deploy), nil while it does not.
type taskState struct {
	failure *wftask.Failure
}

// checkTask looks at the workflow task of the described run. A check that
// cannot be made is warned about and changes nothing: the verdict is then
// judged as if the task were fine.
func (c *cli) checkTask(ctx context.Context, cl client.Client, desc *workflowservice.DescribeWorkflowExecutionResponse) taskState {
	dc, _, err := c.temporal.Converters()
	if err == nil {
		var f *wftask.Failure
		if f, err = wftask.Inspect(ctx, cl.WorkflowService(), dc, c.temporal.Namespace, desc); err == nil {
			return taskState{failure: f}
		}
	}
	fmt.Fprintf(c.stderr, "warning: could not check whether the workflow task of %s is failing: %v\n",
		desc.GetWorkflowExecutionInfo().GetExecution().GetWorkflowId(), err)
	return taskState{}
}

// facts adds the task's failure to the facts a verdict is judged from: a
// failing task makes the run stalled (workflow_task_failing).
func (t taskState) facts(f health.Facts) health.Facts {
	if t.failure != nil {
		f.TaskFailure = t.failure.Message
	}
	return f
}

// unanswered says why the status query went unanswered: while the workflow
// task fails no worker can answer it, and the failure is the reason;
// otherwise the reason given stands.
func (t taskState) unanswered(answered bool, given string) string {
	if answered || t.failure == nil {
		return given
	}
	return fmt.Sprintf("the status query cannot be answered: the run's %s. The verdict comes from the workflow task and the pending activities", t.failure)
}
