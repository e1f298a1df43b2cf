package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/target"
)

// A stream with a subset hands it to every step: the cold start's restore
// (plan, prepare, finish, incrementals), the position it writes, the
// judgment and the apply; its status shows it.
func TestBrokerSubsetReachesEveryStep(t *testing.T) {
	env, acts := newEnv(t)
	env.RegisterWorkflow(RestoreWorkflow)
	subset := target.Subset{IncludeTables: []string{"orders"}, ExcludeTables: []string{"audit*"}}
	in := brokerInput()
	in.Subset = subset
	var seen []string
	check := func(step string, got target.Subset) {
		require.True(t, got.Equal(subset), "%s got subset %s", step, got)
		seen = append(seen, step)
	}
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.BrokerStartParams) (activities.BrokerStart, error) {
			check("prepare", p.Subset)
			return activities.BrokerStart{Mode: activities.ModeReset, ChainID: "c", Tail: "i1"}, nil
		}).Once()
	env.OnActivity(acts.PlanRestore, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.PlanRestoreParams) (activities.RestorePlan, error) {
			check("plan", p.Subset)
			return activities.RestorePlan{ChainID: "c", FullID: "f", Through: "i1", Incrementals: []string{"i1"}, Excluded: []string{"public.audit_log"}}, nil
		}).Once()
	env.OnActivity(acts.PrepareTarget, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.TargetParams) error {
			check("prepare target", p.Subset)
			return nil
		}).Once()
	env.OnActivity(acts.FinishTarget, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.TargetParams) error { check("finish", p.Subset); return nil }).Once()
	env.OnActivity(acts.EndRestore, mock.Anything, mock.Anything).Return(nil).Once()
	env.OnActivity(acts.CreateObjects, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.CreateObjectsParams) (activities.ObjectsReport, error) {
			check("schema objects", p.Subset)
			return activities.ObjectsReport{}, nil
		}).Once()
	env.OnActivity(acts.ApplyIncremental, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.ApplyIncrementalParams) (int64, error) {
			check("restore incremental", p.Subset)
			return 1, nil
		}).Once()
	env.OnActivity(acts.InitBrokerPosition, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.InitPositionParams) error {
			check("position", p.Subset)
			return nil
		}).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{
		Pending: []activities.PendingLink{{ID: "i2", ExpectedLast: "i1"}},
	}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{Stop: true}, nil).Once()
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Once()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.BrokerApplyParams) (activities.JudgeResult, error) {
			check("judge", p.Subset)
			return activities.JudgeResult{}, nil
		}).Once()
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.BrokerApplyParams) (activities.BrokerApplyResult, error) {
			check("apply", p.Subset)
			return activities.BrokerApplyResult{Applied: 2, Excluded: 5}, nil
		}).Once()
	env.ExecuteWorkflow(BrokerWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"prepare", "plan", "prepare target", "finish", "restore incremental", "schema objects", "position", "judge", "apply"}, seen)
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "include orders; exclude audit*", res.Status.Subset)
	require.Equal(t, "i2", res.Status.LastApplied)
}

// A restore with a subset reports the tables it left out.
func TestRestoreReportsTheTablesLeftOut(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PlanRestore, mock.Anything, mock.Anything).Return(
		activities.RestorePlan{ChainID: "c", FullID: "f", Through: "f", Excluded: []string{"public.a", "public.b"}}, nil).Once()
	env.OnActivity(acts.PrepareTarget, mock.Anything, mock.Anything).Return(nil).Once()
	env.OnActivity(acts.CreateObjects, mock.Anything, mock.Anything).Return(activities.ObjectsReport{}, nil).Once()
	env.OnActivity(acts.FinishTarget, mock.Anything, mock.Anything).Return(nil).Once()
	env.ExecuteWorkflow(RestoreWorkflow, RestoreInput{Subset: target.Subset{ExcludeTables: []string{"a", "b"}}})
	require.NoError(t, env.GetWorkflowError())
	var res RestoreResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, []string{"public.a", "public.b"}, res.Excluded)
}
