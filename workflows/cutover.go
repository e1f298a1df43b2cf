package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
)

// CutoverWorkflow moves a stream's target's sequences a margin past the
// source's (`sluice sync from-backup cutover`), in one activity run by a
// broker worker (it holds the target's credentials). The CLI has waited
// for the broker to apply the chain's tip and stopped it first; the
// activity refuses unless the target's position holds that tip. Retries
// are safe: a sequence is only ever raised.
func CutoverWorkflow(ctx workflow.Context, p activities.CutoverParams) (activities.CutoverResult, error) {
	var res activities.CutoverResult
	summary := fmt.Sprintf("raise the target's sequences of stream %s to the source's plus %d", p.Stream, p.Margin)
	err := workflow.ExecuteActivity(shortActivity(ctx, summary), a.RaiseCutoverSequences, p).Get(ctx, &res)
	return res, err
}
