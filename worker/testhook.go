package main

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// panicWorkflowsEnv names the workflow IDs whose workflow code the worker
// makes panic, comma-separated. It is for tests only: it lets a test see how
// a run whose workflow task keeps failing is reported, without a broken
// workflow in the product. Read once at start; unset, nothing is installed.
const panicWorkflowsEnv = "SLUICE_TEST_PANIC_WORKFLOWS"

// testPanicMessage starts the message of the hook's panics.
const testPanicMessage = "sluice test hook: deliberate workflow panic"

// testHookInterceptors returns the worker interceptors the test hooks in
// value (panicWorkflowsEnv's value) ask for: none when it is empty.
func testHookInterceptors(value string) []interceptor.WorkerInterceptor {
	ids := map[string]bool{}
	for _, id := range strings.Split(value, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids[id] = true
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return []interceptor.WorkerInterceptor{&panicWorkflows{ids: ids}}
}

// panicWorkflows makes the workflow code of the named workflow IDs panic.
type panicWorkflows struct {
	interceptor.WorkerInterceptorBase
	ids map[string]bool
}

// InterceptWorkflow wraps every workflow's inbound calls.
func (p *panicWorkflows) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &panicInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, ids: p.ids}
}

type panicInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	ids map[string]bool
}

// ExecuteWorkflow panics, as broken workflow code would, for a named
// workflow ID, and runs the workflow otherwise.
func (p *panicInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if id := workflow.GetInfo(ctx).WorkflowExecution.ID; p.ids[id] {
		panic(fmt.Sprintf("%s in %s (%s)", testPanicMessage, id, panicWorkflowsEnv))
	}
	return p.Next.ExecuteWorkflow(ctx, in)
}
