package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/producer"
)

// A quiet chain: every wait runs out with nothing pending. The broker must
// sit through any number of such idle ticks without checking or applying
// anything, then apply the link that finally arrives.
func TestBrokerIdlesThroughEmptyWaitsThenApplies(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	var waits []activities.WaitParams
	const idleTicks = 12
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.WaitParams) (activities.WaitResult, error) {
			waits = append(waits, p)
			switch {
			case len(waits) <= idleTicks:
				return activities.WaitResult{}, nil
			case len(waits) == idleTicks+1:
				return activities.WaitResult{Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}}}, nil
			}
			return activities.WaitResult{Stop: true}, nil
		}).Times(idleTicks + 2)
	// The chain is checked, and the link judged and applied, once: idle
	// ticks do no work beyond their wait.
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Once()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, nil).Once()
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).Return(activities.BrokerApplyResult{Applied: 7}, nil).Once()
	in := brokerInput()
	in.MaxWait = dur.Duration(3 * time.Second)
	env.ExecuteWorkflow(BrokerWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "stopped", res.Status.Phase)
	require.Equal(t, "i1", res.Status.LastApplied)
	require.Equal(t, int64(7), res.Status.ChangesApplied)
	require.Zero(t, res.Status.LinksBehind)
	require.False(t, res.Status.LastPollAt.IsZero())
	for i, w := range waits {
		require.Equal(t, 3*time.Second, w.MaxWait.D(), "wait %d carries the run's bound", i)
		want := "f"
		if i > idleTicks {
			want = "i1"
		}
		require.Equal(t, want, w.After, "wait %d", i)
	}
}

// A run started without a bound waits DefaultBrokerMaxWait at a time.
func TestBrokerMaxWaitDefaults(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	var got []time.Duration
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.WaitParams) (activities.WaitResult, error) {
			got = append(got, p.MaxWait.D())
			return activities.WaitResult{Stop: len(got) == 3}, nil
		}).Times(3)
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []time.Duration{DefaultBrokerMaxWait, DefaultBrokerMaxWait, DefaultBrokerMaxWait}, got)
}

// An idle broker whose history grows continues as new with its position,
// its counters and its bound, and the new run goes on waiting from there.
func TestBrokerContinuesAsNewWhileIdle(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "i9"}, nil).Once()
	waits := 0
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).After(time.Second).Return(
		func(_ context.Context, p activities.WaitParams) (activities.WaitResult, error) {
			waits++
			if waits == 5 {
				env.SetContinueAsNewSuggested(true)
			}
			return activities.WaitResult{}, nil
		}).Times(5)
	in := brokerInput()
	in.MaxWait = dur.Duration(time.Second)
	env.ExecuteWorkflow(BrokerWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	var next BrokerInput
	require.NoError(t, decodeInput(can, &next))
	require.NotNil(t, next.State)
	require.Equal(t, "i9", next.State.LastApplied)
	require.Equal(t, "waiting", next.State.Phase)
	require.Equal(t, time.Second, next.MaxWait.D())
	require.False(t, next.Reset)

	// The next run starts from the carried state: no start-mode decision,
	// straight back to waiting after i9.
	env2, acts2 := newEnv(t)
	var after []string
	env2.OnActivity(acts2.WaitForLinks, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.WaitParams) (activities.WaitResult, error) {
			after = append(after, p.After)
			return activities.WaitResult{Stop: len(after) == 4}, nil
		}).Times(4)
	env2.ExecuteWorkflow(BrokerWorkflow, next)
	require.NoError(t, env2.GetWorkflowError())
	require.Equal(t, []string{"i9", "i9", "i9", "i9"}, after)
}

// A quiet source: window after window captures nothing. The producer keeps
// turning, counts the windows, commits nothing and never rotates for them;
// a rotation that found nothing new leaves a segment of no incrementals,
// which does not rotate again.
func TestProducerIdlesThroughEmptyWindows(t *testing.T) {
	env, acts := newEnv(t)
	env.RegisterWorkflow(RotateWorkflow)
	var windows []activities.WindowParams
	const idle = 10
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.WindowParams) (activities.WindowResult, error) {
			windows = append(windows, p)
			n := len(windows)
			switch {
			case n == 1:
				// The window that fills the segment: a rotation follows.
				return activities.WindowResult{Result: producer.Result{Committed: true, LinkID: "i2", Transactions: 1, Changes: 3, SegmentLength: 2, Links: 3}}, nil
			case n <= 1+idle:
				// After the rotation the tip segment holds no incremental.
				return activities.WindowResult{Result: producer.Result{SegmentLength: 0, Links: 4}}, nil
			}
			return activities.WindowResult{Stopped: true}, nil
		}).Times(idle + 2)
	// The rotation's full found nothing new to close the old segment with.
	env.OnActivity(acts.RotateSegment, mock.Anything, mock.Anything).Return(producer.Result{Committed: true, LinkID: "f2", SegmentLength: 0, Links: 4}, nil).Once()
	in := ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}}, Rollover: dur.Duration(time.Second), RotateAt: 2, Idle: dur.Duration(2 * time.Second)}
	env.ExecuteWorkflow(ProducerWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ProducerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "stopped", res.Status.Phase)
	require.Equal(t, int64(1), res.Status.Rotations)
	require.Equal(t, "f2", res.Status.LastLink)
	require.Equal(t, int64(1), res.Status.Transactions)
	require.Equal(t, int64(idle+3), res.Status.Windows, "every window and the rotation are counted")
	for i, w := range windows {
		require.Equal(t, 2*time.Second, w.Idle.D(), "window %d carries the run's idle bound", i)
	}
}

// A producer started without an idle bound uses DefaultIdleWindow.
func TestProducerIdleWindowDefaults(t *testing.T) {
	env, acts := newEnv(t)
	var got []time.Duration
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.WindowParams) (activities.WindowResult, error) {
			got = append(got, p.Idle.D())
			return activities.WindowResult{Stopped: len(got) == 2}, nil
		}).Times(2)
	env.ExecuteWorkflow(ProducerWorkflow, ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}}, Rollover: dur.Duration(time.Second)})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []time.Duration{DefaultIdleWindow, DefaultIdleWindow}, got)
}

// An idle producer continues as new with its counters.
func TestProducerContinuesAsNewWhileIdle(t *testing.T) {
	env, acts := newEnv(t)
	n := 0
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).After(time.Second).Return(
		func(_ context.Context, p activities.WindowParams) (activities.WindowResult, error) {
			n++
			if n == 6 {
				env.SetContinueAsNewSuggested(true)
			}
			return activities.WindowResult{}, nil
		}).Times(6)
	env.ExecuteWorkflow(ProducerWorkflow, ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}}, Rollover: dur.Duration(time.Second), Idle: dur.Duration(time.Second)})
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	var next ProducerInput
	require.NoError(t, decodeInput(can, &next))
	require.Equal(t, int64(6), next.State.Windows)
	require.Equal(t, int64(1), next.State.ContinuedAsNewAt)
	require.Equal(t, time.Second, next.Idle.D())
	require.NotEmpty(t, next.Owner, "the slot owner is kept across continue-as-new")
}

// decodeInput reads the input a continue-as-new carries to the next run.
func decodeInput(can *workflow.ContinueAsNewError, v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(can.Input, v)
}
