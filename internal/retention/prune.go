package retention

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Options configure one prune.
type Options struct {
	Policy Policy
	// DryRun decides and counts but writes and deletes nothing.
	DryRun bool
	// Force drops segments brokers still need (they must then be rebuilt).
	Force bool
	// Refuse makes a prune held back by a broker fail with
	// SLUICE-E-PRUNE-BROKER-BEHIND, dropping nothing (the CLI); without it
	// the segments no broker needs are dropped and the rest kept (the
	// producer's policy after a rotation).
	Refuse bool
	// Now is the prune's clock (default time.Now).
	Now func() time.Time
	// Catalog says which catalog commits and checkpoints go (zero:
	// chain.DefaultCatalogRetention); they go after the segments, and not
	// in a dry run.
	Catalog chain.CatalogRetention
	// AfterCommit, when set, runs between the catalog commit and the
	// deletes; an error from it ends the prune there (tests use it to
	// stand for a crash).
	AfterCommit func() error
}

// Result reports a prune.
type Result struct {
	Plan
	// Committed is the catalog generation that dropped the segments (0
	// when nothing was dropped, or in a dry run).
	Committed int64 `json:"committed,omitempty"`
	// Objects and Bytes count what the dropped segments hold in the store
	// (manifests and chunks); Deleted what this run deleted, leftovers of
	// earlier runs included.
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	Deleted int   `json:"deleted"`
	// Pending counts journals left for a later run.
	Pending int `json:"pending_journals,omitempty"`
	// CatalogCommits and CatalogCheckpoints count the catalog objects the
	// catalog retention deleted.
	CatalogCommits     int `json:"catalog_commits_deleted,omitempty"`
	CatalogCheckpoints int `json:"catalog_checkpoints_deleted,omitempty"`
}

// commitAttempts bounds the retries of a prune whose catalog write lost to
// another writer (the producer appending a window, typically).
const commitAttempts = 5

// Prune applies o.Policy to the chain: it finishes what earlier maintenance
// runs left (Sweep), decides on the latest catalog, and commits the catalog
// without the dropped segments before deleting their manifests and chunks.
// A commit that loses to another writer is decided again on the new catalog.
// Then it deletes the catalog commits and checkpoints o.Catalog lets go.
func Prune(ctx context.Context, ch *chain.Chain, o Options) (Result, error) {
	res, err := prune(ctx, ch, o)
	if err != nil || o.DryRun {
		return res, err
	}
	r := o.Catalog
	if r == (chain.CatalogRetention{}) {
		r = chain.DefaultCatalogRetention
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	exp, err := ch.ExpireCatalog(ctx, r, now())
	res.CatalogCommits, res.CatalogCheckpoints = exp.Commits, exp.Checkpoints
	return res, err
}

func prune(ctx context.Context, ch *chain.Chain, o Options) (Result, error) {
	if err := o.Policy.Validate(); err != nil {
		return Result{}, errcode.New(errcode.Usage, "%v", err)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	var res Result
	for attempt := 1; ; attempt++ {
		cat, err := ch.LoadCatalog(ctx)
		if err != nil {
			return res, err
		}
		if err := chain.ValidateCatalog(cat); err != nil {
			return res, err
		}
		sw, err := ch.Sweep(ctx, cat.Generation, now(), o.DryRun)
		res.Deleted += sw.Deleted
		res.Pending = len(sw.Pending)
		if err != nil {
			return res, err
		}
		positions, err := ch.BrokerPositions(ctx)
		if err != nil {
			return res, err
		}
		res.Plan = Decide(cat, positions, o.Policy, now(), o.Force)
		if o.Refuse && len(res.Held) > 0 && !o.Force {
			err := heldError(res.Plan)
			res.Keep, res.Drop = res.Keep+len(res.Drop), nil
			return res, err
		}
		if len(res.Drop) == 0 {
			return res, nil
		}
		keys, bytes, err := objectsOf(ctx, ch, cat, len(res.Drop))
		if err != nil {
			return res, err
		}
		res.Objects, res.Bytes = len(keys), bytes
		if o.DryRun {
			return res, nil
		}
		next := cat.Next()
		next.Segments = next.Segments[len(res.Drop):]
		t := now()
		j, err := ch.CommitWithJournal(ctx, next, chain.GarbageJournal{By: "prune", CreatedAt: t, DeleteAfter: t, OnCommit: keys})
		if errcode.Is(err, errcode.CatalogConflict) && attempt < commitAttempts {
			continue
		}
		if err != nil {
			return res, err
		}
		res.Committed = next.Generation
		if o.AfterCommit != nil {
			if err := o.AfterCommit(); err != nil {
				return res, err
			}
		}
		n, err := ch.FinishJournal(ctx, j)
		res.Deleted += n
		return res, err
	}
}

// objectsOf lists the objects of the first n segments of cat: each link's
// manifest and the chunks it names, and the segment's compacted chunks.
func objectsOf(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, n int) ([]string, int64, error) {
	var keys []string
	var bytes int64
	for _, s := range cat.Segments[:n] {
		if s.Layout != "" {
			l, err := ch.GetLayout(ctx, s.Layout)
			if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
				return nil, 0, err
			}
			if l != nil {
				for _, ref := range l.Chunks {
					keys = append(keys, ref.Key)
					bytes += ref.Size
				}
			}
			keys = append(keys, chain.LayoutKey(s.Layout))
		}
		for _, l := range append([]chain.Link{s.Full}, s.Incrementals...) {
			// The chunk list, which a sealed manifest keeps in the clear:
			// a prune needs no key.
			chunks, err := ch.ManifestChunks(ctx, l.ID)
			if err != nil {
				if errors.Is(err, blobstore.ErrNotFound) {
					// Gone already (an earlier prune forced past a lost
					// manifest): nothing else of it can be found.
					keys = append(keys, chain.ManifestKey(l.ID))
					continue
				}
				return nil, 0, err
			}
			// A compacted segment's incrementals name chunks the layout
			// replaced (gone already, or left for the compaction's journal).
			for _, ref := range chunks {
				keys = append(keys, ref.Key)
				if s.Layout == "" || l.Kind != chain.KindIncremental {
					bytes += ref.Size
				}
			}
			keys = append(keys, chain.ManifestKey(l.ID))
		}
	}
	return keys, bytes, nil
}

// heldError is the refusal of a prune that brokers hold back.
func heldError(p Plan) error {
	var names []string
	for _, b := range p.Held {
		names = append(names, fmt.Sprintf("%s (last applied %s, reported %s)", b.Stream, short(b.LastApplied), b.UpdatedAt.Format(time.RFC3339)))
	}
	return errcode.New(errcode.PruneBrokerBehind,
		"the policy (%s) would drop %d of %d segments, and %d broker(s) still have to replay part of them: %s",
		p.Policy, p.Wanted, p.Keep+len(p.Drop), len(names), strings.Join(names, "; "))
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
