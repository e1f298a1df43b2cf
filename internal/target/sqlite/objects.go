package sqlite

import (
	"context"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// ApplyObjects implements target.Target.
func (t *Target) ApplyObjects(ctx context.Context, from, to []chain.Object, o target.ObjectOptions) (target.ObjectResult, error) {
	var r target.ObjectResult
	r.SkipAll(to, "they are another engine's statements, and an SQLite target runs none")
	return r, nil
}
