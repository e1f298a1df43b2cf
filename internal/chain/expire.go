package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// MinCatalogRetentionAge is the least age a commit or checkpoint must reach
// before it may expire. It is far longer than refreshHorizon, the longest a
// reader trusts that a missing next commit means nothing new, which is what
// lets a reader poll with one read (docs/chain-format.md §2.6).
const MinCatalogRetentionAge = time.Hour

// CatalogRetention says which commits and checkpoints ExpireCatalog
// deletes: only those older than Age (by the store's modification time) and
// beyond the newest Commits commits, and only commits a checkpoint covers.
// The newest Checkpoints checkpoints are always kept.
type CatalogRetention struct {
	Commits     int
	Checkpoints int
	Age         time.Duration
}

// DefaultCatalogRetention keeps a day and at least 1,000 commits: a reader
// polls every few seconds, and a day of commits lets an operator look back.
var DefaultCatalogRetention = CatalogRetention{Commits: 1000, Checkpoints: 2, Age: 24 * time.Hour}

// Validate refuses a retention that could delete what a reader may still
// be reading.
func (r CatalogRetention) Validate() error {
	if r.Age < MinCatalogRetentionAge {
		return fmt.Errorf("catalog retention age %s is shorter than the minimum %s", r.Age, MinCatalogRetentionAge)
	}
	if r.Commits < 1 || r.Checkpoints < 1 {
		return fmt.Errorf("catalog retention must keep at least one commit and one checkpoint (got %d and %d)", r.Commits, r.Checkpoints)
	}
	return nil
}

// ExpireResult reports what ExpireCatalog deleted.
type ExpireResult struct {
	Commits, Checkpoints, Pages int
}

// ExpireCatalog deletes the commits and checkpoints r lets go, as of now.
// A commit goes only once a checkpoint at or after its generation exists,
// oldest first, and never at or after the generation of a garbage journal
// still waiting (the journal's sweep reads that commit); a checkpoint goes
// only when newer ones are kept. Whole generations of catalog format 1 and
// 2 and fences are never deleted: a writer of the old version relies on
// them existing (docs/chain-format.md §2.6).
func (c *Chain) ExpireCatalog(ctx context.Context, r CatalogRetention, now time.Time) (ExpireResult, error) {
	var res ExpireResult
	if err := r.Validate(); err != nil {
		return res, err
	}
	cutoff := now.Add(-r.Age)
	cps, err := c.listNumbered(ctx, checkpointPrefix)
	if err != nil || len(cps) == 0 {
		return res, err
	}
	newest := cps[len(cps)-1].gen
	commits, err := c.listNumbered(ctx, commitPrefix)
	if err != nil {
		return res, err
	}
	journals, err := c.listNumbered(ctx, garbagePrefix)
	if err != nil {
		return res, err
	}
	limit := newest
	if len(journals) > 0 && journals[0].gen-1 < limit {
		limit = journals[0].gen - 1
	}
	if len(commits) > 0 {
		if keepFrom := commits[len(commits)-1].gen - int64(r.Commits) + 1; keepFrom-1 < limit {
			limit = keepFrom - 1
		}
	}
	for _, o := range commits {
		if o.gen > limit || !o.info.Modified.Before(cutoff) {
			break // oldest first: what stays is a suffix
		}
		if err := c.store.Delete(ctx, o.info.Key); err != nil {
			return res, c.unreachable(err, "delete", o.info.Key)
		}
		res.Commits++
	}
	for _, o := range cps[:max(0, len(cps)-r.Checkpoints)] {
		if !o.info.Modified.Before(cutoff) {
			continue
		}
		if err := c.store.Delete(ctx, o.info.Key); err != nil {
			return res, c.unreachable(err, "delete", o.info.Key)
		}
		res.Checkpoints++
	}
	n, err := c.expirePages(ctx, cutoff)
	res.Pages = n
	return res, err
}

// expirePages deletes the checkpoint pages older than cutoff that no
// remaining checkpoint names (a pruned segment's). A page a checkpoint
// written later could name again is one of a segment the catalog still
// holds, which the newest checkpoint names too.
func (c *Chain) expirePages(ctx context.Context, cutoff time.Time) (int, error) {
	pages, err := c.store.List(ctx, pagePrefix)
	if err != nil || len(pages) == 0 {
		return 0, err
	}
	cps, err := c.listNumbered(ctx, checkpointPrefix)
	if err != nil {
		return 0, err
	}
	named := map[string]bool{}
	for _, o := range cps {
		data, err := blobstore.ReadAll(ctx, c.store, o.info.Key)
		if errors.Is(err, blobstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, c.unreachable(err, "read", o.info.Key)
		}
		var cp catalogCheckpoint
		if err := json.Unmarshal(data, &cp); err != nil {
			return 0, nil // cannot tell what it names: keep every page
		}
		for _, s := range cp.Segments {
			for _, p := range s.Pages {
				named[PageKey(p.SHA256)] = true
			}
		}
	}
	n := 0
	for _, o := range pages {
		if named[o.Key] || !o.Modified.Before(cutoff) {
			continue
		}
		if err := c.store.Delete(ctx, o.Key); err != nil {
			return n, c.unreachable(err, "delete", o.Key)
		}
		n++
	}
	return n, nil
}
