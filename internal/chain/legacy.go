package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Chains of catalog format 1 and 2 store every generation whole, as
// catalog/gen-<N>.json, with catalog/HEAD as a hint. This version reads
// them forever and never writes one; it writes a fence instead (a
// generation of format 3 with no segments) at the first generation it
// commits in the new form, so a reader of the old version probing forward
// stops there with SLUICE-E-FORMAT-UNSUPPORTED, and a writer of the old
// version loses the create-only race for that generation.

// legacyGen is one stored catalog/gen-<N>.json: a whole generation, or a
// fence.
type legacyGen struct {
	cat   *Catalog // nil for a fence
	hash  string
	fence bool
}

// readLegacy reads catalog/gen-<gen>.json; nil, nil when it does not exist.
func (c *Chain) readLegacy(ctx context.Context, gen int64) (*legacyGen, error) {
	key := CatalogKey(gen)
	data, err := blobstore.ReadAll(ctx, c.store, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, c.unreachable(err, "read", key)
	}
	cat, err := decodeCatalog(key, data)
	if err != nil {
		return nil, err
	}
	if cat.Generation != gen {
		return nil, errcode.New(errcode.ChainInvalid, "catalog %s holds generation %d", key, cat.Generation)
	}
	if cat.FormatVersion == CatalogFormatVersionCommits {
		return &legacyGen{fence: true}, nil
	}
	if err := ValidateCatalog(cat); err != nil {
		return nil, fmt.Errorf("catalog %s: %w", key, err)
	}
	cat.tail = new(atomic.Bool)
	return &legacyGen{cat: cat, hash: sha256Hex(data)}, nil
}

// fenceBytes returns the fence written at generation gen: the same bytes
// for every writer of this version, whatever chain it writes, so that a
// writer that died after writing one leaves nothing another must refuse
// (the commit after it is the compare-and-swap).
func fenceBytes(gen int64) ([]byte, error) {
	return encodeCatalog(&Catalog{FormatVersion: CatalogFormatVersionCommits, Generation: gen, Segments: []Segment{}})
}

// writeFence creates the fence at generation gen. Finding the fence there
// already is success (another writer of this version is committing gen);
// anything else there is a coded errcode.CatalogConflict error.
func (c *Chain) writeFence(ctx context.Context, gen int64) error {
	data, err := fenceBytes(gen)
	if err != nil {
		return err
	}
	key := CatalogKey(gen)
	if err := c.store.PutIfAbsent(ctx, key, data); err != nil {
		if !errors.Is(err, blobstore.ErrExists) {
			return c.unreachable(err, "write", key)
		}
		existing, rerr := blobstore.ReadAll(ctx, c.store, key)
		if rerr != nil || !bytes.Equal(existing, data) {
			return errcode.Wrap(errcode.CatalogConflict, err, "another writer committed generation %d first", gen)
		}
	}
	return nil
}

// legacyStart finds where a chain without checkpoints starts: the latest
// whole generation (following the HEAD hint, else the highest listed, and
// probing forward past it), or nil when the chain's first generation is a
// fence (a chain of this version whose first checkpoint is not written
// yet). No catalog at all is a coded errcode.ChainNotFound error.
func (c *Chain) legacyStart(ctx context.Context) (*Catalog, error) {
	var cur *legacyGen
	if gen, ok, err := c.readHead(ctx); err != nil {
		return nil, err
	} else if ok {
		if cur, err = c.readLegacy(ctx, gen); err != nil {
			return nil, err
		}
		if cur != nil && cur.fence {
			cur = nil // start over from the listing: the fence's predecessor is wanted
		}
	}
	if cur == nil {
		objs, err := c.listNumbered(ctx, generationPrefix)
		if err != nil {
			return nil, err
		}
		if len(objs) == 0 {
			return nil, errcode.Wrap(errcode.ChainNotFound, blobstore.ErrNotFound, "no catalog under %s", c.store)
		}
		// The highest whole generation: below a fence when there is one.
		for i := len(objs) - 1; i >= 0 && cur == nil; i-- {
			g, err := c.readLegacy(ctx, objs[i].gen)
			if err != nil {
				return nil, err
			}
			if g == nil {
				return nil, errcode.Wrap(errcode.StoreUnreachable, blobstore.ErrNotFound,
					"catalog %s was listed but cannot be read from %s", CatalogKey(objs[i].gen), c.store)
			}
			if !g.fence {
				cur = g
			}
		}
		if cur == nil {
			return nil, nil
		}
	}
	cat := cur.cat
	cat.stored = newStored(cur.hash, true, 0, 0, 0, nil)
	return cat, nil
}

// readHead returns the generation the HEAD hint of a format 1 or 2 chain
// names; ok is false when there is no hint or it does not hold a number.
func (c *Chain) readHead(ctx context.Context) (gen int64, ok bool, err error) {
	data, err := blobstore.ReadAll(ctx, c.store, CatalogHeadKey)
	if errors.Is(err, blobstore.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, c.unreachable(err, "read", CatalogHeadKey)
	}
	gen, perr := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if perr != nil || gen < 1 {
		return 0, false, nil
	}
	return gen, true, nil
}
