package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/errcode"
)

func newEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *activities.Activities) {
	env, acts, _ := newLoggedEnv(t)
	return env, acts
}

func refusal(code errcode.Code) error {
	return temporal.NewNonRetryableApplicationError(string(code)+": refused for the test", string(code), nil, "the hint")
}

func requireCode(t *testing.T, err error, code errcode.Code) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an application error, got %v", err)
	require.Equal(t, string(code), app.Type())
}

func TestFullBackupSucceeds(t *testing.T) {
	env, acts := newEnv(t)
	want := activities.FullBackupResult{ChainID: "c1", FullID: "c1", Tables: 3, Rows: 42}
	env.OnActivity(acts.FullBackup, mock.Anything, mock.Anything).Return(want, nil).Once()
	env.ExecuteWorkflow(FullBackupWorkflow, FullBackupInput{Store: activities.StoreRef{URL: "file:///x"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var got activities.FullBackupResult
	require.NoError(t, env.GetWorkflowResult(&got))
	require.Equal(t, want, got)

	v, err := env.QueryWorkflow(QueryStatus)
	require.NoError(t, err)
	var st FullBackupStatus
	require.NoError(t, v.Get(&st))
	require.Equal(t, "done", st.Phase)
}

func TestFullBackupRefusalIsNotRetried(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.FullBackup, mock.Anything, mock.Anything).Return(activities.FullBackupResult{}, refusal(errcode.SourcePrivileges)).Once()
	env.ExecuteWorkflow(FullBackupWorkflow, FullBackupInput{})
	requireCode(t, env.GetWorkflowError(), errcode.SourcePrivileges)
}

func TestFullBackupRetriesTransientFailure(t *testing.T) {
	env, acts := newEnv(t)
	calls := 0
	env.OnActivity(acts.FullBackup, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.FullBackupParams) (activities.FullBackupResult, error) {
			calls++
			if calls < 3 {
				return activities.FullBackupResult{}, errors.New("connection reset")
			}
			return activities.FullBackupResult{FullID: "f"}, nil
		}).Times(3)
	env.ExecuteWorkflow(FullBackupWorkflow, FullBackupInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 3, calls)
}

func TestFullBackupGivesUpAfterAttempts(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.FullBackup, mock.Anything, mock.Anything).Return(activities.FullBackupResult{}, errors.New("disk full")).Times(3)
	env.ExecuteWorkflow(FullBackupWorkflow, FullBackupInput{})
	require.ErrorContains(t, env.GetWorkflowError(), "disk full")
}

func TestFullBackupCancelled(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.FullBackup, mock.Anything, mock.Anything).After(time.Hour).Return(activities.FullBackupResult{}, nil).Maybe()
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(FullBackupWorkflow, FullBackupInput{})
	var canceled *temporal.CanceledError
	require.True(t, errors.As(env.GetWorkflowError(), &canceled), "got %v", env.GetWorkflowError())
}

func restorePlan() activities.RestorePlan {
	return activities.RestorePlan{ChainID: "c", FullID: "f", Rows: 60, Tables: []activities.RestoreTable{
		{Name: "public.a", Rows: 10}, {Name: "public.b", Rows: 20}, {Name: "public.c", Rows: 30},
	}}
}

func TestRestoreLoadsEveryTableThenFinishes(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PlanRestore, mock.Anything, mock.Anything).Return(restorePlan(), nil).Once()
	env.OnActivity(acts.PrepareTarget, mock.Anything, mock.Anything).Return(nil).Once()
	loaded := map[string]bool{}
	var mu sync.Mutex // the test environment runs the loads in parallel
	env.OnActivity(acts.LoadTable, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.LoadTableParams) (int64, error) {
			require.Equal(t, "f", p.FullID)
			mu.Lock()
			loaded[p.Table] = true
			mu.Unlock()
			for _, tb := range restorePlan().Tables {
				if tb.Name == p.Table {
					return tb.Rows, nil
				}
			}
			return 0, errors.New("unknown table")
		}).Times(3)
	finished := false
	env.OnActivity(acts.CreateObjects, mock.Anything, mock.Anything).Return(activities.ObjectsReport{}, nil).Once()
	env.OnActivity(acts.FinishTarget, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.TargetParams) error {
			require.Len(t, loaded, 3, "foreign keys must wait for every table")
			finished = true
			return nil
		}).Once()
	env.ExecuteWorkflow(RestoreWorkflow, RestoreInput{Parallel: 2})
	require.NoError(t, env.GetWorkflowError())
	var res RestoreResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, RestoreResult{ChainID: "c", FullID: "f", Tables: 3, Rows: 60, Objects: &activities.ObjectsReport{}}, res)
	require.True(t, finished)
}

func TestRestoreTableRefusalStopsBeforeFinish(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PlanRestore, mock.Anything, mock.Anything).Return(restorePlan(), nil).Once()
	env.OnActivity(acts.PrepareTarget, mock.Anything, mock.Anything).Return(nil).Once()
	env.OnActivity(acts.LoadTable, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.LoadTableParams) (int64, error) {
			if p.Table == "public.b" {
				return 0, refusal(errcode.ChunkCorrupt)
			}
			return 1, nil
		}).Maybe()
	env.ExecuteWorkflow(RestoreWorkflow, RestoreInput{Parallel: 1})
	requireCode(t, env.GetWorkflowError(), errcode.ChunkCorrupt)
}

func TestRestoreTargetNotEmptyRefusesBeforeLoading(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PlanRestore, mock.Anything, mock.Anything).Return(restorePlan(), nil).Once()
	env.OnActivity(acts.PrepareTarget, mock.Anything, mock.Anything).Return(refusal(errcode.TargetNotEmpty)).Once()
	env.ExecuteWorkflow(RestoreWorkflow, RestoreInput{})
	requireCode(t, env.GetWorkflowError(), errcode.TargetNotEmpty)
}

func TestRestoreCancelled(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PlanRestore, mock.Anything, mock.Anything).Return(restorePlan(), nil).Once()
	env.OnActivity(acts.PrepareTarget, mock.Anything, mock.Anything).Return(nil).Once()
	env.OnActivity(acts.LoadTable, mock.Anything, mock.Anything).After(time.Hour).Return(int64(1), nil).Maybe()
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	env.ExecuteWorkflow(RestoreWorkflow, RestoreInput{})
	var canceled *temporal.CanceledError
	require.True(t, errors.As(env.GetWorkflowError(), &canceled), "got %v", env.GetWorkflowError())
}
