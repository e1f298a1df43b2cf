package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/compact"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/producer"
	"github.com/sluicehq/sluice/internal/retention"
)

// With --retain-segments the producer prunes after every rotation, never
// otherwise; a prune that fails or is held back by a broker does not end
// the run.
func TestProducerPrunesAfterEachRotation(t *testing.T) {
	env, acts := newEnv(t)
	env.RegisterWorkflow(RotateWorkflow)
	n := 0
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.WindowParams) (activities.WindowResult, error) {
			n++
			if n == 4 {
				return activities.WindowResult{Stopped: true}, nil
			}
			// Every window fills the segment: a rotation follows each.
			return activities.WindowResult{Result: producer.Result{Committed: true, LinkID: "i", Transactions: 1, SegmentLength: 1, Links: 3}}, nil
		}).Times(4)
	env.OnActivity(acts.RotateSegment, mock.Anything, mock.Anything).Return(producer.Result{Committed: true, LinkID: "f", Links: 4}, nil).Times(3)
	var prunes []activities.PruneParams
	env.OnActivity(acts.PruneChain, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.PruneParams) (retention.Result, error) {
			prunes = append(prunes, p)
			switch len(prunes) {
			case 1:
				return retention.Result{Plan: retention.Plan{Drop: []retention.Segment{{Index: 0}}, Keep: 2}}, nil
			case 2:
				return retention.Result{}, errors.New("store unreachable")
			}
			return retention.Result{Plan: retention.Plan{Keep: 3, Held: []retention.Broker{{BrokerPosition: chain.BrokerPosition{Stream: "slow"}}}}}, nil
		}).Times(3)
	in := ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}}, Rollover: dur.Duration(time.Second), RotateAt: 1, RetainSegments: 2}
	env.ExecuteWorkflow(ProducerWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ProducerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "stopped", res.Status.Phase)
	require.Equal(t, int64(3), res.Status.Rotations)
	require.Equal(t, int64(1), res.Status.Pruned)
	require.Equal(t, []string{"slow"}, res.Status.PruneHeld)
	env.AssertExpectations(t)
	for _, p := range prunes {
		require.Equal(t, retention.Policy{KeepSegments: 2}, p.Policy)
		require.Equal(t, "file:///c", p.Store.URL)
	}
}

// Without a retention policy no prune runs.
func TestProducerWithoutRetentionNeverPrunes(t *testing.T) {
	env, acts := newEnv(t)
	env.RegisterWorkflow(RotateWorkflow)
	n := 0
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.WindowParams) (activities.WindowResult, error) {
			n++
			return activities.WindowResult{Stopped: n == 2, Result: producer.Result{Committed: true, LinkID: "i", Transactions: 1, SegmentLength: 1}}, nil
		}).Times(2)
	env.OnActivity(acts.RotateSegment, mock.Anything, mock.Anything).Return(producer.Result{Committed: true, LinkID: "f"}, nil).Once()
	env.OnActivity(acts.PruneChain, mock.Anything, mock.Anything).Return(retention.Result{}, nil).Never()
	env.ExecuteWorkflow(ProducerWorkflow, ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}}, Rollover: dur.Duration(time.Second), RotateAt: 1})
	require.NoError(t, env.GetWorkflowError())
	env.AssertExpectations(t)
}

// A compaction is one activity, its parameters passed through.
func TestCompactWorkflowRunsOneActivity(t *testing.T) {
	env, acts := newEnv(t)
	var got activities.CompactParams
	env.OnActivity(acts.CompactChain, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.CompactParams) (compact.Result, error) {
			got = p
			return compact.Result{Segments: []compact.Segment{{Index: 0, Generation: 7}}}, nil
		}).Once()
	p := activities.CompactParams{Store: activities.StoreRef{URL: "file:///c"}, Smart: true, KeepReplaced: dur.Duration(time.Hour)}
	env.ExecuteWorkflow(CompactWorkflow, p)
	require.NoError(t, env.GetWorkflowError())
	var res compact.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, int64(7), res.Segments[0].Generation)
	require.Equal(t, p, got)
	env.AssertExpectations(t)
}
