package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

// garbagePrefix starts the key of every garbage journal.
const garbagePrefix = ControlPrefix + "garbage-"

// GarbageJournal is written by a maintenance run (retention, compaction)
// just before it commits a catalog generation that stops naming objects.
// The commit comes first and the deletes after it, so a catalog never names
// a missing object; the journal is what lets a later run finish the deletes
// of one that died between the two. Its key is
// "control/garbage-<20-digit generation>.json".
type GarbageJournal struct {
	// Generation is the catalog generation the run commits.
	Generation int64 `json:"generation"`
	// CatalogSHA256 is the SHA-256 of the generation's bytes as the run
	// writes them: whether the generation stored under that number is this
	// run's tells a later reader whether the commit happened.
	CatalogSHA256 string `json:"catalog_sha256"`
	// By names the kind of run ("prune", "compact").
	By string `json:"by"`
	// CreatedAt is when the journal was written.
	CreatedAt time.Time `json:"created_at"`
	// DeleteAfter is the earliest time OnCommit may be deleted (readers
	// that loaded the catalog before the commit may still read them).
	DeleteAfter time.Time `json:"delete_after"`
	// OnCommit are the objects the generation no longer names: deleted
	// once it committed.
	OnCommit []string `json:"on_commit,omitempty"`
	// OnConflict are objects only the generation names (written by the
	// run for it): deleted when another writer took the generation.
	OnConflict []string `json:"on_conflict,omitempty"`
}

// GarbageJournalKey returns the key of the journal for generation gen.
func GarbageJournalKey(gen int64) string { return fmt.Sprintf("%s%020d.json", garbagePrefix, gen) }

// CommitWithJournal commits next (as CommitCatalog does) after writing j,
// completed with next's generation and digest, so that a run that dies
// after the commit leaves a record of what to delete. It returns the
// completed journal; the caller deletes its objects with FinishJournal. On
// a coded errcode.CatalogConflict the journal is deleted (its objects are
// the caller's, to commit again onto a newer generation or to delete).
func (c *Chain) CommitWithJournal(ctx context.Context, next *Catalog, j GarbageJournal) (GarbageJournal, error) {
	pc, err := c.prepareCommit(ctx, next)
	if err != nil {
		return j, err
	}
	j.Generation, j.CatalogSHA256 = next.Generation, pc.hash()
	j.CreatedAt, j.DeleteAfter = NormalizeTime(j.CreatedAt), NormalizeTime(j.DeleteAfter)
	jdata, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return j, fmt.Errorf("encode garbage journal: %w", err)
	}
	key := GarbageJournalKey(j.Generation)
	if err := c.store.Put(ctx, key, append(jdata, '\n')); err != nil {
		return j, c.unreachable(err, "write", key)
	}
	if err := c.writeCommit(ctx, pc); err != nil {
		if errcode.Is(err, errcode.CatalogConflict) {
			// Left in place, a later sweep would find another writer's
			// generation under its number and delete OnConflict objects
			// a retry may commit.
			_ = c.store.Delete(ctx, key)
		}
		return j, err
	}
	return j, nil
}

// FinishJournal deletes the objects of a committed journal (OnCommit) and
// then the journal, returning how many objects it deleted. Deleting a
// missing object is no error, so finishing twice is harmless.
func (c *Chain) FinishJournal(ctx context.Context, j GarbageJournal) (int, error) {
	n, err := c.deleteAll(ctx, j.OnCommit)
	if err != nil {
		return n, err
	}
	key := GarbageJournalKey(j.Generation)
	if err := c.store.Delete(ctx, key); err != nil {
		return n, c.unreachable(err, "delete", key)
	}
	return n, nil
}

func (c *Chain) deleteAll(ctx context.Context, keys []string) (int, error) {
	for i, k := range keys {
		if err := c.store.Delete(ctx, k); err != nil {
			return i, c.unreachable(err, "delete", k)
		}
	}
	return len(keys), nil
}

// SweepResult reports what Sweep did.
type SweepResult struct {
	// Finished counts journals completed; Deleted the objects deleted.
	Finished, Deleted int
	// Pending are journals left for later: their generation is not
	// committed yet (a run may be committing it now), or their objects
	// may still be read until DeleteAfter.
	Pending []GarbageJournal
}

// Sweep completes the journals earlier maintenance runs left behind: a
// journal whose generation committed as written has its OnCommit objects
// deleted once now is past its DeleteAfter; one whose generation another
// writer took has its OnConflict objects deleted. A journal for a
// generation past latest is left alone: its run may still be committing.
// With dryRun nothing is deleted and every journal is reported pending.
func (c *Chain) Sweep(ctx context.Context, latest int64, now time.Time, dryRun bool) (SweepResult, error) {
	var res SweepResult
	objs, err := c.store.List(ctx, garbagePrefix)
	if err != nil {
		return res, c.unreachable(err, "list", garbagePrefix)
	}
	for _, o := range objs {
		gen, ok := parseJournalKey(o.Key)
		if !ok {
			continue
		}
		data, err := blobstore.ReadAll(ctx, c.store, o.Key)
		if errors.Is(err, blobstore.ErrNotFound) {
			continue // another run finished it since the listing
		}
		if err != nil {
			return res, c.unreachable(err, "read", o.Key)
		}
		var j GarbageJournal
		if err := json.Unmarshal(data, &j); err != nil || j.Generation != gen {
			// A damaged journal cannot say what is safe to delete; it
			// is left for an operator (docs/chain-format.md §7).
			continue
		}
		if gen > latest || dryRun {
			res.Pending = append(res.Pending, j)
			continue
		}
		stored, err := c.readGenerationBytes(ctx, gen)
		if err != nil {
			return res, err
		}
		if stored != nil && sha256Hex(stored) == j.CatalogSHA256 {
			if now.Before(j.DeleteAfter) {
				res.Pending = append(res.Pending, j)
				continue
			}
			n, err := c.FinishJournal(ctx, j)
			res.Deleted += n
			if err != nil {
				return res, err
			}
		} else {
			// Generations are dense, so one at or below latest that is
			// not this run's was taken by another writer.
			n, err := c.deleteAll(ctx, j.OnConflict)
			res.Deleted += n
			if err != nil {
				return res, err
			}
			if err := c.store.Delete(ctx, o.Key); err != nil {
				return res, c.unreachable(err, "delete", o.Key)
			}
		}
		res.Finished++
	}
	return res, nil
}

// parseJournalKey returns the generation a journal key names.
func parseJournalKey(key string) (int64, bool) {
	return parseNumberedKey(key, garbagePrefix)
}

// DeleteObjects deletes keys (a run's own objects that no catalog names,
// after its commit lost), returning how many.
func (c *Chain) DeleteObjects(ctx context.Context, keys []string) (int, error) {
	return c.deleteAll(ctx, keys)
}

// readGenerationBytes returns the stored bytes of generation gen: its
// commit, or its whole form in a chain of catalog format 1 or 2; nil when
// neither exists. (Catalog retention keeps the commit of every generation
// a journal names, so a journal's generation is never missing for having
// expired.)
func (c *Chain) readGenerationBytes(ctx context.Context, gen int64) ([]byte, error) {
	for _, key := range []string{CommitKey(gen), CatalogKey(gen)} {
		data, err := blobstore.ReadAll(ctx, c.store, key)
		if err == nil {
			return data, nil
		}
		if !errors.Is(err, blobstore.ErrNotFound) {
			return nil, c.unreachable(err, "read", key)
		}
	}
	return nil, nil
}
