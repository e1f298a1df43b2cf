package workflows

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// The cutover runs its one activity with the CLI's parameters and returns
// what the target did.
func TestCutoverRaisesTheSequences(t *testing.T) {
	env, acts := newEnv(t)
	p := activities.CutoverParams{Store: activities.StoreRef{URL: "file:///chain"}, Stream: "s1", Tip: "inc-9", Margin: 500}
	want := activities.CutoverResult{ChainID: "c1", LastApplied: "inc-9", Counters: 2, Sequences: target.SequenceResult{
		Raised: []string{"public.s_id_seq: 3000 → 3500"}, Skipped: []string{"public.free: the target has no such sequence"}}}
	env.OnActivity(acts.RaiseCutoverSequences, mock.Anything, p).Return(want, nil).Once()
	env.ExecuteWorkflow(CutoverWorkflow, p)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var got activities.CutoverResult
	require.NoError(t, env.GetWorkflowResult(&got))
	require.Equal(t, want, got)
}

// A position short of the tip is a refusal: not retried, its code kept.
func TestCutoverBehindIsNotRetried(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.RaiseCutoverSequences, mock.Anything, mock.Anything).Return(activities.CutoverResult{}, refusal(errcode.CutoverBehind)).Once()
	env.ExecuteWorkflow(CutoverWorkflow, activities.CutoverParams{Stream: "s1", Tip: "inc-9"})
	requireCode(t, env.GetWorkflowError(), errcode.CutoverBehind)
}

// A target that is unreachable for a moment is retried: raising is
// idempotent, a counter already moved is kept.
func TestCutoverRetriesATransientFailure(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.RaiseCutoverSequences, mock.Anything, mock.Anything).Return(activities.CutoverResult{}, errors.New("connection reset")).Once()
	env.OnActivity(acts.RaiseCutoverSequences, mock.Anything, mock.Anything).Return(activities.CutoverResult{Counters: 1}, nil).Once()
	env.ExecuteWorkflow(CutoverWorkflow, activities.CutoverParams{Stream: "s1", Tip: "inc-9"})
	require.NoError(t, env.GetWorkflowError())
	var got activities.CutoverResult
	require.NoError(t, env.GetWorkflowResult(&got))
	require.Equal(t, 1, got.Counters)
}
