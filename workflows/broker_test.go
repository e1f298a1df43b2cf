package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/errcode"
)

func brokerInput() BrokerInput {
	return BrokerInput{BrokerParams: activities.BrokerParams{Stream: "s"}, Concurrency: 1, PollInterval: time.Second}
}

func TestBrokerCancelledWhileWaitingEndsCleanly(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).After(time.Hour).Return(activities.WaitResult{}, nil).Maybe()
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	require.NoError(t, env.GetWorkflowError())
}

func TestBrokerCancelledInsideAnIncrementalIsPartial(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{
		Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}},
	}, nil).Once()
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Once()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, nil).Once()
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).After(time.Hour).Return(activities.BrokerApplyResult{}, nil).Maybe()
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	requireCode(t, env.GetWorkflowError(), errcode.BrokerIncrementalPartial)
}

func TestBrokerAppliesPendingLinksInOrderThenStops(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	// One incremental per tick: the second tick still finds i2.
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{
		Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}, {ID: "i2", ExpectedLast: "i1"}},
	}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{
		Pending: []activities.PendingLink{{ID: "i2", ExpectedLast: "i1"}},
	}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{Stop: true}, nil).Once()
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Twice()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, nil).Twice()
	var order []string
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.BrokerApplyParams) (activities.BrokerApplyResult, error) {
			order = append(order, p.Link.ID)
			return activities.BrokerApplyResult{Applied: 10}, nil
		}).Twice()
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"i1", "i2"}, order)
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "i2", res.Status.LastApplied)
	require.Equal(t, int64(20), res.Status.ChangesApplied)
	require.Equal(t, "stopped", res.Status.Phase)
}

func TestBrokerKeylessRefusalEndsTheRun(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{
		Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}},
	}, nil).Once()
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Once()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, refusal(errcode.BrokerKeylessTable)).Once()
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	requireCode(t, env.GetWorkflowError(), errcode.BrokerKeylessTable)
}
