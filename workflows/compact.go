package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/compact"
)

// CompactWorkflow compacts a chain's capped segments (`sluice backup
// compact`) in one heartbeating activity; each segment commits on its own,
// so a retried attempt goes on where the last one stopped.
func CompactWorkflow(ctx workflow.Context, p activities.CompactParams) (compact.Result, error) {
	var res compact.Result
	summary := "merge the chunks of capped segments"
	if p.Smart {
		summary = "fold changes per key and merge the chunks of capped segments"
	}
	err := workflow.ExecuteActivity(longActivity(ctx, summary, 3), a.CompactChain, p).Get(ctx, &res)
	return res, err
}
