package source

import (
	"context"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// RefuseExistingChain refuses a full backup into a store that already
// holds a chain (SLUICE-E-CHAIN-EXISTS), before anything is read.
func RefuseExistingChain(ctx context.Context, ch *chain.Chain) error {
	if _, err := ch.LoadCatalog(ctx); err == nil {
		return errcode.New(errcode.ChainExists, "%s already holds a chain", ch.Store())
	} else if !errcode.Is(err, errcode.ChainNotFound) {
		return err
	}
	return nil
}

// CommitFirstFull stores a chain's first full's manifest and makes the
// catalog write that creates the chain. Another full that committed first
// is refused as SLUICE-E-CHAIN-EXISTS; cleanup, when the manifest cannot
// be stored, deletes the full's chunks.
func CommitFirstFull(ctx context.Context, ch *chain.Chain, m *chain.Manifest, cleanup func()) error {
	if err := ch.PutManifest(ctx, m); err != nil {
		cleanup()
		return err
	}
	if err := ch.CommitCatalog(ctx, chain.NewCatalog(m)); err != nil {
		if errcode.Is(err, errcode.CatalogConflict) {
			return errcode.Wrap(errcode.ChainExists, err, "another full backup committed to %s first", ch.Store())
		}
		return err
	}
	return nil
}
