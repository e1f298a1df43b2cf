package producer

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// rebaseAttempts bounds how often one commit is moved onto a newer catalog.
const rebaseAttempts = 5

// commitOnto commits what add puts onto a copy of cat (the catalog the
// step was taken on). When another writer committed first and the tip it
// left is still cat's — a prune or a compaction, which never moves the tip
// — the step is put onto the newer catalog and committed again: the links
// it adds still follow the tip they were written after. A newer tip is a
// second producer's, and stays a coded errcode.CatalogConflict.
func commitOnto(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, add func(next *chain.Catalog) error) (*chain.Catalog, error) {
	tip := cat.Tip().ID
	for attempt := 1; ; attempt++ {
		next := cat.Next()
		if err := add(next); err != nil {
			return nil, err
		}
		err := ch.CommitCatalog(ctx, next)
		if err == nil {
			return next, nil
		}
		if !errcode.Is(err, errcode.CatalogConflict) || attempt == rebaseAttempts {
			return nil, err
		}
		newer, lerr := ch.Refresh(ctx, cat)
		if lerr != nil {
			return nil, err
		}
		if newer.Tip().ID != tip || len(newer.Segments) == 0 || newer.Segments[len(newer.Segments)-1].Capped {
			return nil, err
		}
		cat = newer
	}
}

// expireEvery is how many generations pass between the producer's catalog
// expiries (each lists the catalog and deletes what the retention lets go).
const expireEvery = 100

// expireCatalog deletes, every expireEvery generations, the commits and
// checkpoints chain.DefaultCatalogRetention lets go. It is best-effort: a
// failure leaves them for the next time or for backup prune.
func expireCatalog(ctx context.Context, ch *chain.Chain, cat *chain.Catalog) {
	if cat.Generation%expireEvery == 0 {
		_, _ = ch.ExpireCatalog(ctx, chain.DefaultCatalogRetention, time.Now())
	}
}
