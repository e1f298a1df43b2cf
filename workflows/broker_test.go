package workflows

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
)

func brokerInput() BrokerInput {
	return BrokerInput{BrokerParams: activities.BrokerParams{Stream: "s"}, Concurrency: 1, PollInterval: dur.Duration(time.Second)}
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

// An incremental with changes that carry no apply identity is logged once,
// when it is applied, however often a failed apply made the broker judge it
// again.
func TestBrokerWarnsUnidentifiedChangesOnce(t *testing.T) {
	env, acts, logs := newLoggedEnv(t)

	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	pending := activities.WaitResult{Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}}}
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(pending, nil).Twice()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{Stop: true}, nil).Once()
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Twice()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{Unidentified: 3}, nil).Twice()
	// The first tick's apply fails on every attempt (the target is down);
	// the second tick judges i1 again and applies it.
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).Return(activities.BrokerApplyResult{},
		temporal.NewApplicationError("target down", string(errcode.TargetUnreachable))).Times(5)
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).Return(activities.BrokerApplyResult{Applied: 3}, nil).Once()
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	require.NoError(t, env.GetWorkflowError())
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "i1", res.Status.LastApplied)
	require.Equal(t, int64(3), res.Status.Unidentified)
	warns := linesWith(logs, "BROKER-UNIDENTIFIED-CHANGES")
	require.Len(t, warns, 1, logs.String())
	require.Contains(t, warns[0], "level=WARN")
	require.Contains(t, warns[0], "incremental=i1")
	require.Contains(t, warns[0], "count=3")
}

// A severed transaction on a link already applied is logged once per run:
// the next check is told it was, and the log comes from the workflow.
func TestBrokerWarnsAppliedSeveredOnce(t *testing.T) {
	env, acts, logs := newLoggedEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "i1"}, nil).Once()
	pending := activities.WaitResult{Pending: []activities.PendingLink{{ID: "i2", ExpectedLast: "i1"}}}
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(pending, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{Pending: []activities.PendingLink{{ID: "i3", ExpectedLast: "i2"}}}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{Stop: true}, nil).Once()
	finding := activities.AppliedFinding{Key: "A i0,i1", Links: []string{"i0", "i1"}, Shape: "A"}
	var told [][]string
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.CheckChainParams) (activities.CheckChainResult, error) {
			told = append(told, p.Warned)
			if len(p.Warned) == 0 {
				return activities.CheckChainResult{Applied: []activities.AppliedFinding{finding}}, nil
			}
			return activities.CheckChainResult{}, nil
		}).Twice()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, nil).Twice()
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).Return(activities.BrokerApplyResult{Applied: 1}, nil).Twice()
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, [][]string{nil, {finding.Key}}, told)
	warns := linesWith(logs, "CHAIN-APPLIED-SEVERED-TRANSACTION")
	require.Len(t, warns, 1, logs.String())
	require.Contains(t, warns[0], "level=WARN")
	require.Contains(t, warns[0], "links=i0,i1")
}

// newLoggedEnv is newEnv with the workflows' log lines kept for the test.
func newLoggedEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *activities.Activities, *bytes.Buffer) {
	logs := &bytes.Buffer{}
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(logs, nil))))
	env := s.NewTestWorkflowEnvironment()
	acts := &activities.Activities{}
	env.RegisterActivity(acts)
	recordSchedules(env)
	t.Cleanup(func() { env.AssertExpectations(t) })
	return env, acts, logs
}

// linesWith returns the lines of logs that contain marker.
func linesWith(logs *bytes.Buffer, marker string) []string {
	var out []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, marker) {
			out = append(out, l)
		}
	}
	return out
}
