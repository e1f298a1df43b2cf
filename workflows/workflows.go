// Package workflows holds sluice's deterministic Temporal workflows. They pass
// IDs, positions and counts between activities and never see row data, never
// do I/O and never read a clock.
package workflows

import (
	"errors"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
)

// QueryStatus is the name of every sluice workflow's status query.
const QueryStatus = "status"

// Search attributes the workflows carry so the Temporal UI can filter runs.
var (
	SearchAttrChain  = temporal.NewSearchAttributeKeyKeyword("SluiceChain")
	SearchAttrRole   = temporal.NewSearchAttributeKeyKeyword("SluiceRole")
	SearchAttrStream = temporal.NewSearchAttributeKeyKeyword("SluiceStream")
)

// a is used only to name activity methods; workflows never call it directly.
var a *activities.Activities

// HeartbeatTimeout is how long Temporal waits for an activity's next
// heartbeat before it gives the attempt up and retries it. Every activity
// heartbeats each second while it runs, so this, plus the first retry's
// backoff (at most two seconds), bounds how long an attempt on a worker that
// died holds its run: the next attempt is scheduled within 12 s and starts
// as soon as a worker polls the task queue.
const HeartbeatTimeout = 10 * time.Second

// longActivity returns options for an activity that runs as long as the data
// needs and heartbeats while it does.
func longActivity(ctx workflow.Context, summary string, attempts int32) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 48 * time.Hour,
		HeartbeatTimeout:    HeartbeatTimeout,
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    attempts,
		},
	})
}

// shortActivity returns options for a metadata activity: usually quick, but
// reading a long chain or judging a large incremental can take minutes, so it
// heartbeats like the others and a dead worker's attempt is retried after
// HeartbeatTimeout; StartToCloseTimeout only bounds an attempt that hangs.
func shortActivity(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    HeartbeatTimeout,
		Summary:             summary,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    5,
		},
	})
}

// isRefusal reports whether an activity's or child's failure is a refusal:
// a non-retryable application error, which ends the run.
func isRefusal(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable()
}

// errorCode returns the SLUICE-E code an activity's failure carries (its
// application error type), or "".
func errorCode(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && strings.HasPrefix(app.Type(), "SLUICE-E-") {
		return app.Type()
	}
	return ""
}

// latestOf returns the latest of ts.
func latestOf(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}
