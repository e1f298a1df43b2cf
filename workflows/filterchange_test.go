package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/producer"
)

func filterChanged() error {
	return temporal.NewNonRetryableApplicationError("the chain's newest segment was written with other filters", string(errcode.FilterChanged), nil)
}

// With --rotate-on-filter-change a window refused for changed filters is
// followed by one rotation (whose full takes the run's filters), and the
// stream goes on; a second refusal after it ends the run.
func TestProducerRotatesOnceOnAFilterChange(t *testing.T) {
	env, acts := newEnv(t)
	env.RegisterWorkflow(RotateWorkflow)
	spec := filter.Spec{ExcludeTables: []string{"audit*"}}
	n := 0
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.WindowParams) (activities.WindowResult, error) {
			n++
			switch n {
			case 1, 3:
				return activities.WindowResult{}, filterChanged()
			}
			return activities.WindowResult{Result: producer.Result{Committed: true, LinkID: "i", Transactions: 1, SegmentLength: 1, Links: 3}}, nil
		}).Times(3)
	var rotated []activities.ProducerParams
	env.OnActivity(acts.RotateSegment, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.ProducerParams) (producer.Result, error) {
			rotated = append(rotated, p)
			return producer.Result{Committed: true, LinkID: "f", Links: 2}, nil
		}).Times(1)
	in := ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}, Filter: spec},
		Rollover: dur.Duration(time.Second), RotateOnFilterChange: true}
	env.ExecuteWorkflow(ProducerWorkflow, in)
	require.True(t, env.IsWorkflowCompleted())
	require.ErrorContains(t, env.GetWorkflowError(), string(errcode.FilterChanged))
	require.Len(t, rotated, 1)
	require.Equal(t, spec, rotated[0].Filter)
	env.AssertExpectations(t)
}

// Without it the refusal ends the run at once, and nothing rotates.
func TestProducerRefusesAFilterChange(t *testing.T) {
	env, acts := newEnv(t)
	env.RegisterWorkflow(RotateWorkflow)
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).Return(activities.WindowResult{}, filterChanged()).Times(1)
	env.ExecuteWorkflow(ProducerWorkflow, ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}}, Rollover: dur.Duration(time.Second)})
	require.True(t, env.IsWorkflowCompleted())
	require.ErrorContains(t, env.GetWorkflowError(), string(errcode.FilterChanged))
	env.AssertExpectations(t)
}
