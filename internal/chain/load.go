package chain

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

// refreshHorizon is how long a reader trusts that a missing next commit
// means nothing new: a commit can only have been created and expired in
// between if the retention's minimum age (MinCatalogRetentionAge, far
// longer) had passed. A reader whose last such read is older loads again.
const refreshHorizon = 10 * time.Minute

// LoadCatalog returns the latest committed catalog generation: the newest
// checkpoint (found by listing, the one read that is never trusted to a
// hint) and the commits after it, each checked against the hash of the
// generation before it. The catalog returned passes ValidateCatalog. A chain without checkpoints (of catalog format 1 or
// 2) is read as before: its latest whole generation, found from the HEAD
// hint or the listing and probing forward. No catalog at all is a coded
// errcode.ChainNotFound error.
func (c *Chain) LoadCatalog(ctx context.Context) (*Catalog, error) {
	for attempt := 1; ; attempt++ {
		cat, err := c.loadStart(ctx)
		if errors.Is(err, errCheckpointGone) && attempt < 3 {
			continue // expired between the listing and the read: list again
		}
		if err != nil {
			return nil, err
		}
		cat, err = c.readAfter(ctx, cat)
		if err != nil {
			return nil, err
		}
		if cat == nil {
			return nil, errcode.Wrap(errcode.ChainNotFound, blobstore.ErrNotFound, "no catalog committed under %s", c.store)
		}
		return cat, nil
	}
}

var errCheckpointGone = errors.New("every listed checkpoint is gone")

// loadStart returns the newest checkpoint's catalog, or where a chain
// without checkpoints starts (nil for a chain whose first commit is still
// to be read).
func (c *Chain) loadStart(ctx context.Context) (*Catalog, error) {
	cps, err := c.listNumbered(ctx, checkpointPrefix)
	if err != nil {
		return nil, err
	}
	if len(cps) == 0 {
		cat, err := c.legacyStart(ctx)
		if err == nil && cat != nil && cat.stored != nil && cat.stored.legacy {
			err = c.requireLegacySigned(CatalogKey(cat.Generation))
		}
		return cat, err
	}
	for i := len(cps) - 1; i >= 0; i-- {
		pages := &pageSet{}
		cat, hash, signed, err := c.readCheckpoint(ctx, cps[i].gen, pages)
		if err != nil {
			return nil, err
		}
		if cat != nil {
			cat.stored = newStored(hash, false, cat.Generation, 0, 0, pages)
			cat.stored.signed = signed
			return cat, nil
		}
	}
	return nil, errCheckpointGone
}

// Refresh returns the latest committed catalog, reading only what was
// committed after cat, a catalog LoadCatalog, Refresh or CommitCatalog
// returned: when nothing was, one read of the next commit answers
// not-found and cat itself is returned. cat is not changed. A catalog not
// read from this chain, or whose last look is older than the refresh
// horizon, is loaded again whole.
func (c *Chain) Refresh(ctx context.Context, cat *Catalog) (*Catalog, error) {
	if cat == nil || cat.stored == nil || cat.parent != nil ||
		time.Since(time.Unix(0, cat.stored.verified.Load())) > refreshHorizon {
		return c.LoadCatalog(ctx)
	}
	return c.readAfter(ctx, cat)
}

// readAfter applies the commits after cat (nil: from generation 1) until
// one is missing, and records when that was seen.
func (c *Chain) readAfter(ctx context.Context, cat *Catalog) (*Catalog, error) {
	for {
		gen := int64(1)
		if cat != nil {
			gen = cat.Generation + 1
		}
		seen := time.Now()
		if cat != nil && cat.stored.legacy {
			// A writer of the old version may still add whole generations;
			// one of this version leaves a fence first.
			g, err := c.readLegacy(ctx, gen)
			if err != nil {
				return nil, err
			}
			if g == nil {
				cat.stored.verified.Store(seen.UnixNano())
				return cat, nil
			}
			if !g.fence {
				if err := c.requireLegacySigned(CatalogKey(gen)); err != nil {
					return nil, err
				}
				g.cat.stored = newStored(g.hash, true, 0, 0, 0, cat.stored.pages)
				cat = g.cat
				continue
			}
		}
		key := CommitKey(gen)
		data, err := blobstore.ReadAll(ctx, c.store, key)
		if errors.Is(err, blobstore.ErrNotFound) {
			if cat != nil {
				cat.stored.verified.Store(seen.UnixNano())
			}
			return cat, nil
		}
		if err != nil {
			return nil, c.unreachable(err, "read", key)
		}
		commit, err := decodeCommit(key, gen, data)
		if err != nil {
			return nil, err
		}
		sig := commit.Signature
		commit.Signature = nil
		signed, err := c.verify(signCommit, key, commit, sig)
		if err != nil {
			return nil, err
		}
		var st *storedState
		var baseHash string
		if cat != nil {
			st, baseHash = cat.stored, cat.stored.hash
		} else {
			st = &storedState{}
		}
		next, err := applyCommit(key, cat, baseHash, commit)
		if err != nil {
			return nil, err
		}
		next.stored = newStored(sha256Hex(data), false, st.checkpoint, st.since+1, st.sinceBytes+int64(len(data)), st.pages)
		next.stored.signed = signed
		cat = next
	}
}
