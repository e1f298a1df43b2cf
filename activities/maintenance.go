package activities

import (
	"context"

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
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return retention.Result{}, a.temporalError(err)
	}
	res, err := retention.Prune(ctx, ch, retention.Options{Policy: p.Policy})
	return res, a.temporalError(err)
}
