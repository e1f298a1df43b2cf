package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

// pendingCommit is a commit prepared from a catalog and the generation it
// was made from, not yet written.
type pendingCommit struct {
	base *Catalog // nil for generation 1
	next *Catalog
	data []byte
	// done is set for a catalog committed already: writing it again checks
	// that the stored commit is still its own.
	done bool
	// signed is set when the commit carries a signature.
	signed bool
}

// hash returns the SHA-256 of the commit's stored bytes.
func (pc *pendingCommit) hash() string {
	if pc.done {
		return pc.next.stored.hash
	}
	return sha256Hex(pc.data)
}

// prepareCommit works out what next changes in the generation it was made
// from (by Next; a catalog made otherwise is compared with the latest
// stored generation) and checks it.
func (c *Chain) prepareCommit(ctx context.Context, next *Catalog) (*pendingCommit, error) {
	if next == nil {
		return nil, errors.New("commit catalog: nil catalog")
	}
	if next.stored != nil && !next.stored.legacy {
		// Committed or loaded already: a retry of a commit that landed.
		return &pendingCommit{next: next, done: true}, nil
	}
	base := next.parent
	if next.Generation > 1 && (base == nil || base.stored == nil) {
		latest, err := c.LoadCatalog(ctx)
		if err != nil {
			return nil, fmt.Errorf("commit catalog generation %d: %w", next.Generation, err)
		}
		if latest.Generation >= next.Generation {
			return nil, errcode.New(errcode.CatalogConflict, "another writer committed generation %d first", next.Generation)
		}
		base = latest
	}
	if base != nil && base.Generation >= next.Generation {
		return nil, errcode.New(errcode.CatalogConflict, "generation %d was committed before the one this writer holds", next.Generation)
	}
	if base != nil && base.Generation != next.Generation-1 {
		return nil, errcode.New(errcode.ChainInvalid, "commit catalog generation %d: made from generation %d", next.Generation, base.Generation)
	}
	if base == nil && next.Generation != 1 {
		return nil, errcode.New(errcode.ChainInvalid, "commit catalog generation %d: a new chain starts at generation 1", next.Generation)
	}
	change, err := diffCatalog(base, next)
	if err != nil {
		return nil, err
	}
	if base != nil && appendOnly(base, change) {
		err = validateCatalogChange(base, next, change)
	} else {
		err = ValidateCatalog(next)
	}
	if err != nil {
		return nil, fmt.Errorf("commit catalog generation %d: %w", next.Generation, err)
	}
	commit := &CatalogCommit{FormatVersion: CatalogFormatVersionCommits, ChainID: next.ChainID, Generation: next.Generation, Change: change}
	if base == nil {
		src := next.Source
		commit.Source = &src
	} else {
		commit.Prev = base.stored.hash
	}
	if err := c.refuseUnsignedOnto(base, next.Generation); err != nil {
		return nil, err
	}
	if commit.Signature, err = c.sign(signCommit, commit); err != nil {
		return nil, err
	}
	data, err := encodeCommit(commit)
	if err != nil {
		return nil, err
	}
	return &pendingCommit{base: base, next: next, data: data, signed: commit.Signature != nil}, nil
}

// CommitCatalog commits next as generation next.Generation. next is
// normally made by Next from a catalog LoadCatalog, Refresh or
// CommitCatalog returned; what it changes in that generation is written as
// one object, catalog/commit-<generation>.json, create-only. If the
// generation already exists another writer committed first and
// CommitCatalog returns a coded errcode.CatalogConflict error (unless the
// existing commit is byte-identical, this writer's own earlier attempt
// landing). It is the same error when the generation had been committed
// by another writer and expired by retention before this one created it
// again: a checkpoint at or after the generation then shows the commit is
// not part of the chain (docs/chain-format.md §2.4, §2.6). next must pass
// ValidateCatalog.
//
// The first commit on a chain of catalog format 1 or 2 writes a checkpoint
// of the generation it was made from and a fence at its own generation
// first. A commit that brings the commits after the newest checkpoint past
// the checkpoint policy writes a checkpoint of itself; a failure there is
// ignored (the next commit tries again). On success next is the latest
// generation, ready for Next or Refresh.
func (c *Chain) CommitCatalog(ctx context.Context, next *Catalog) error {
	pc, err := c.prepareCommit(ctx, next)
	if err != nil {
		return err
	}
	return c.writeCommit(ctx, pc)
}

func (c *Chain) writeCommit(ctx context.Context, pc *pendingCommit) error {
	base, next := pc.base, pc.next
	if pc.done {
		key := CommitKey(next.Generation)
		data, err := blobstore.ReadAll(ctx, c.store, key)
		if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
			return c.unreachable(err, "read", key)
		}
		if err != nil || sha256Hex(data) != next.stored.hash {
			return errcode.New(errcode.CatalogConflict, "generation %d in the store is not the one this writer holds", next.Generation)
		}
		return nil
	}
	gen := next.Generation
	var st storedState
	if base != nil {
		st.checkpoint, st.since, st.sinceBytes, st.pages = base.stored.checkpoint, base.stored.since, base.stored.sinceBytes, base.stored.pages
	}
	if base == nil || base.stored.legacy {
		// Readers and writers of the old version stop at the fence.
		if err := c.writeFence(ctx, gen); err != nil {
			return err
		}
	}
	if base != nil && base.stored.legacy {
		if err := c.writeCheckpoint(ctx, base, base.stored.hash, base.stored.pages); err != nil {
			return fmt.Errorf("commit catalog generation %d: checkpoint of generation %d: %w", gen, base.Generation, err)
		}
		st.checkpoint, st.since, st.sinceBytes = base.Generation, 0, 0
	}
	key := CommitKey(gen)
	started := time.Now()
	if err := c.store.PutIfAbsent(ctx, key, pc.data); err != nil {
		if !errors.Is(err, blobstore.ErrExists) {
			return c.unreachable(err, "write", key)
		}
		existing, rerr := blobstore.ReadAll(ctx, c.store, key)
		if rerr != nil || !bytes.Equal(existing, pc.data) {
			return errcode.Wrap(errcode.CatalogConflict, err, "another writer committed generation %d first", gen)
		}
	}
	hash := sha256Hex(pc.data)
	newest, err := c.checkNotExpired(ctx, gen, hash)
	if err != nil {
		return err
	}
	if newest < st.checkpoint {
		// The newest checkpoint is never deleted: a store whose newest is
		// older than one this writer knew holds another chain now (deleted
		// and created again under the same URL).
		return errcode.New(errcode.CatalogConflict,
			"the store's newest catalog checkpoint is generation %d, older than generation %d this writer read: the chain was replaced; nothing this writer wrote is named by it", newest, st.checkpoint)
	}
	if newest > st.checkpoint {
		st.checkpoint, st.since, st.sinceBytes = newest, gen-newest-1, 0
	}
	next.FormatVersion = CatalogFormatVersionCommits
	next.parent = nil
	next.stored = newStored(hash, false, st.checkpoint, st.since+1, st.sinceBytes+int64(len(pc.data)), st.pages)
	next.stored.signed = pc.signed
	// The generation after this one did not exist when this one was created.
	next.stored.verified.Store(started.UnixNano())
	if p := c.checkpointPolicy(); next.stored.checkpoint == 0 || next.stored.since >= p.Every || next.stored.sinceBytes >= p.Bytes {
		if err := c.writeCheckpoint(ctx, next, hash, next.stored.pages); err == nil {
			next.stored.checkpoint, next.stored.since, next.stored.sinceBytes = gen, 0, 0
		}
	}
	return nil
}

// checkNotExpired refuses a commit of generation gen (stored bytes hashing
// to hash) that a stalled writer created after the generation had already
// been committed by another writer and expired. Expiry deletes a commit only
// once a checkpoint at or after it exists, and never the newest checkpoint,
// so listing the checkpoints after the create-only write finds one at or
// after gen in that case. One can also exist because writers after this one
// were quick; then the checkpoint (at gen) or the next commit (after gen)
// names this commit's hash, which they cannot for a commit they never saw.
// It returns the newest checkpoint's generation.
func (c *Chain) checkNotExpired(ctx context.Context, gen int64, hash string) (int64, error) {
	cps, err := c.listNumbered(ctx, checkpointPrefix)
	if err != nil {
		return 0, err
	}
	if len(cps) == 0 || cps[len(cps)-1].gen < gen {
		if len(cps) == 0 {
			return 0, nil
		}
		return cps[len(cps)-1].gen, nil
	}
	newest := cps[len(cps)-1].gen
	orphan := func() (int64, error) {
		return 0, errcode.New(errcode.CatalogConflict,
			"generation %d was committed by another writer and expired before this writer created it again (checkpoint %d covers it); nothing this writer wrote is named by the chain", gen, newest)
	}
	if newest == gen {
		key := CheckpointKey(gen)
		data, err := blobstore.ReadAll(ctx, c.store, key)
		if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
			return 0, c.unreachable(err, "read", key)
		}
		var cp struct {
			Commit string `json:"commit_sha256"`
		}
		if err == nil && json.Unmarshal(data, &cp) == nil && cp.Commit == hash {
			return newest, nil
		}
		return orphan()
	}
	key := CommitKey(gen + 1)
	data, err := blobstore.ReadAll(ctx, c.store, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return orphan()
	}
	if err != nil {
		return 0, c.unreachable(err, "read", key)
	}
	following, err := decodeCommit(key, gen+1, data)
	if err != nil {
		return 0, err
	}
	if following.Prev != hash {
		return orphan()
	}
	return newest, nil
}
