package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/source"
)

// identityReporter returns what a capture window calls with each check of
// the tables its publication publishes without a usable replica identity: it
// tells the health tracker (the run's gauge and /status) and logs one WARN
// per table per run, with the statement that fixes it.
func (a *Activities) identityReporter(ctx context.Context, k health.Key, store string) func([]source.TableIssue) {
	return func(gaps []source.TableIssue) {
		names := make([]string, len(gaps))
		byName := make(map[string]source.TableIssue, len(gaps))
		for i, g := range gaps {
			names[i] = g.Table
			byName[g.Table] = g
		}
		for _, name := range a.Health.ReplicaIdentityGaps(k, names) {
			g := byName[name]
			activity.GetLogger(ctx).Warn("SOURCE-REPLICA-IDENTITY: a table the chain's publication publishes has no usable replica identity, so the application's UPDATE and DELETE on it fail on the source; run the fix",
				"store", store, "table", g.Table, "why", g.Why, "fix", g.Fix)
		}
	}
}
