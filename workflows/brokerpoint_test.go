package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/pitr"
)

// A broker with --until applies the incremental up to the point, keeps its
// position inside it, and ends cleanly saying it reached the point.
func TestBrokerUntilStopsInsideAnIncrementalAndEnds(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.MatchedBy(func(p activities.BrokerStartParams) bool {
		return p.Point.Until == "2026-12-05T14:03:00Z"
	})).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{
		Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}, {ID: "i2", ExpectedLast: "i1"}},
	}, nil).Once()
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Once()
	next := &pitr.Transaction{Identity: "tx 9", Link: "i1"}
	env.OnActivity(acts.PlanBrokerCut, mock.Anything, mock.Anything).Return(activities.BrokerCut{
		Records: 12, Digest: "d1", Reached: true, Last: &pitr.Transaction{Identity: "tx 8", Link: "i1"}, Next: next,
	}, nil).Once()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, nil).Once()
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.BrokerApplyParams) (activities.BrokerApplyResult, error) {
			require.Equal(t, "i1", p.Link.ID)
			require.Equal(t, int64(12), p.StopAt)
			require.Equal(t, "d1", p.StopDigest)
			return activities.BrokerApplyResult{Applied: 4, Stopped: true}, nil
		}).Once()
	in := brokerInput()
	in.Point = activities.BrokerPoint{Until: "2026-12-05T14:03:00Z"}
	env.ExecuteWorkflow(BrokerWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.True(t, res.Status.Reached)
	require.Equal(t, "reached the point", res.Status.Phase)
	require.Equal(t, "f", res.Status.LastApplied, "the position stays before the incremental it stopped inside")
	require.Equal(t, int64(4), res.Status.ChangesApplied)
	require.Equal(t, "tx 8", res.Status.LastTransaction.Identity)
	require.Equal(t, next, res.Status.NextTransaction)
}

// An until point that falls before an incremental's first transaction
// applies nothing of it and ends.
func TestBrokerUntilBeforeTheNextIncrementalAppliesNothing(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "i1"}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{
		Pending: []activities.PendingLink{{ID: "i2", ExpectedLast: "i1"}},
	}, nil).Once()
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Once()
	env.OnActivity(acts.PlanBrokerCut, mock.Anything, mock.Anything).Return(activities.BrokerCut{Records: 0, Reached: true, Next: &pitr.Transaction{Identity: "tx 20"}}, nil).Once()
	in := brokerInput()
	in.Point = activities.BrokerPoint{UntilPosition: "0/16B3748"}
	env.ExecuteWorkflow(BrokerWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.True(t, res.Status.Reached)
	require.Equal(t, "i1", res.Status.LastApplied)
	require.Equal(t, "0/16B3748", res.Status.Until)
}

// With --apply-delay the broker applies what is old enough, keeps its
// position inside the incremental, and the next wait holds the links until
// the next transaction comes due; links taken whole advance the position.
func TestBrokerApplyDelayHoldsTheRestUntilItIsDue(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	due := time.Date(2026, 12, 5, 15, 0, 0, 0, time.UTC)
	pending := activities.WaitResult{Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}}}
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.MatchedBy(func(p activities.WaitParams) bool { return p.HeldUntil.IsZero() })).Return(pending, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.MatchedBy(func(p activities.WaitParams) bool { return p.HeldUntil.Equal(due) })).Return(pending, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{Stop: true}, nil).Once()
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Twice()
	env.OnActivity(acts.PlanBrokerCut, mock.Anything, mock.Anything).Return(activities.BrokerCut{
		Records: 3, Digest: "d1", HeldUntil: due, Next: &pitr.Transaction{Identity: "tx 2"},
	}, nil).Once()
	env.OnActivity(acts.PlanBrokerCut, mock.Anything, mock.Anything).Return(activities.BrokerCut{Records: -1}, nil).Once()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, nil).Twice()
	var stops []int64
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.BrokerApplyParams) (activities.BrokerApplyResult, error) {
			stops = append(stops, p.StopAt)
			return activities.BrokerApplyResult{Applied: 1, Stopped: p.StopAt > 0}, nil
		}).Twice()
	in := brokerInput()
	in.Point = activities.BrokerPoint{ApplyDelay: dur.Duration(time.Hour)}
	env.ExecuteWorkflow(BrokerWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []int64{3, 0}, stops, "the first apply stops at the delay's cut, the second takes the rest")
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "i1", res.Status.LastApplied)
	require.Empty(t, res.Status.Inside)
	require.True(t, res.Status.HeldUntil.IsZero())
	require.Equal(t, 3600.0, res.Status.ApplyDelaySeconds)
}

// Links held back by the delay are not due: the run's own facts say
// nothing is pending, so a delayed replica reads idle, never stalled.
func TestDelayedLinksAreNotPending(t *testing.T) {
	st := BrokerStatus{LinksBehind: 2, HeldUntil: time.Now().Add(time.Hour), Phase: "delaying"}
	require.False(t, st.Facts().Pending)
	st.HeldUntil = time.Time{}
	require.True(t, st.Facts().Pending)
}
