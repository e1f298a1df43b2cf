package activities

import (
	"context"

	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/target"
)

// openTarget resolves a target's password reference here, in the worker,
// and opens the target through the registry by its driver.
func openTarget(ctx context.Context, ref credentials.DSNRef) (target.Target, error) {
	dsn, err := ref.Resolve()
	if err != nil {
		return nil, err
	}
	return target.Open(ctx, ref.Driver, dsn, ref.Options)
}
