package activities

import (
	"context"
	"fmt"
	"sync"

	"go.temporal.io/sdk/activity"

	"github.com/sluicehq/sluice/internal/compact"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/retention"
)

// PruneParams ask for one prune of a chain by a retention policy.
type PruneParams struct {
	Store  StoreRef         `json:"store"`
	Policy retention.Policy `json:"policy"`
}

// PruneChain applies a retention policy after a rotation, as the
// producer's policy: segments no broker still needs are dropped, the rest
// kept (the result names the brokers that held them). The catalog commits
// before anything is deleted, so a retried attempt only finishes the
// deletes.
func (a *Activities) PruneChain(ctx context.Context, p PruneParams) (retention.Result, error) {
	defer a.heartbeat(ctx, nil).stop()
	defer a.Health.Running(producerKey(p.Store))()
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return retention.Result{}, a.temporalError(err)
	}
	res, err := retention.Prune(ctx, ch, retention.Options{Policy: p.Policy})
	return res, a.temporalError(err)
}

// CompactParams ask for a compaction of a chain's capped segments.
type CompactParams struct {
	Store StoreRef `json:"store"`
	// Smart folds changes per key across transactions (--smart-compaction).
	Smart bool `json:"smart,omitempty"`
	// KeepReplaced is how long replaced chunks stay readable.
	KeepReplaced dur.Duration `json:"keep_replaced"`
}

// CompactProgress is the heartbeat of CompactChain.
type CompactProgress struct {
	Segments  int `json:"segments_done"`
	Compacted int `json:"segments_compacted"`
}

// CompactChain compacts the chain's capped segments, each in a commit of
// its own, heartbeating after each. A retried attempt skips the segments
// an earlier one committed.
func (a *Activities) CompactChain(ctx context.Context, p CompactParams) (compact.Result, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return compact.Result{}, a.temporalError(err)
	}
	info := activity.GetInfo(ctx)
	var mu sync.Mutex
	var prog CompactProgress
	hb.report(func() any { mu.Lock(); defer mu.Unlock(); return prog })
	res, err := compact.Compact(ctx, ch, compact.Options{
		Smart: p.Smart, KeepReplaced: p.KeepReplaced.D(),
		AttemptID: fmt.Sprintf("compact-%s-%d", info.WorkflowExecution.RunID, info.Attempt),
		Progress: func(s compact.Segment) {
			mu.Lock()
			defer mu.Unlock()
			prog.Segments++
			if s.Generation > 0 {
				prog.Compacted++
			}
		},
	})
	return res, a.temporalError(err)
}
