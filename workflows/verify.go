package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/verify"
)

// VerifyInput starts a VerifyWorkflow.
type VerifyInput struct {
	activities.VerifyParams
	// WaitBroker, when set, is a broker stream to wait for first: until it
	// applied the newest incremental of the chain at Store.
	WaitBroker  string               `json:"wait_broker,omitempty"`
	Store       *activities.StoreRef `json:"store,omitempty"`
	WaitTimeout dur.Duration         `json:"wait_timeout,omitempty"`
}

// VerifyResult is a comparison's outcome and, when it waited, where the
// broker stood.
type VerifyResult struct {
	verify.Outcome
	Broker *verify.BrokerAt `json:"broker,omitempty"`
}

// VerifyWorkflow compares a source with a target (`sluice verify`): it
// waits for a broker to reach its chain's tip when asked, then compares the
// two, each read in one snapshot. Differences are its result, not a failure.
func VerifyWorkflow(ctx workflow.Context, in VerifyInput) (VerifyResult, error) {
	var res VerifyResult
	if in.WaitBroker != "" && in.Store != nil {
		var at verify.BrokerAt
		wctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: in.WaitTimeout.D() + 5*time.Minute,
			HeartbeatTimeout:    HeartbeatTimeout,
			Summary:             "wait for broker " + in.WaitBroker + " to reach the chain's tip",
		})
		if err := workflow.ExecuteActivity(wctx, a.WaitBrokerAtTip, activities.WaitBrokerParams{
			Store: *in.Store, Target: in.Target, Stream: in.WaitBroker, Timeout: in.WaitTimeout,
		}).Get(ctx, &at); err != nil {
			return res, err
		}
		res.Broker = &at
	}
	err := workflow.ExecuteActivity(longActivity(ctx, "compare "+string(in.Depth)+": source and target, table by table", 3), a.VerifyTables, in.VerifyParams).Get(ctx, &res.Outcome)
	return res, err
}
