package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
)

// TestCatalogCommitsOnEveryStore runs the catalog's compare-and-swap on each
// store kind (file, S3, GCS, Azure): two writers holding one generation
// commit the next at once and exactly one wins; a writer stalled across an
// expiry of the generation it commits creates that commit again (the
// create-only write succeeds) and is refused, and readers never see it.
func TestCatalogCommitsOnEveryStore(t *testing.T) {
	kinds := []struct {
		name string
		open func(t *testing.T) (string, []string)
	}{
		{"file", func(t *testing.T) (string, []string) { return fileChain(t), nil }},
		{"s3", s3Chain},
		{"gcs", gcsChain},
		{"azure", azureChain},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			url, flags := k.open(t)
			catalogRaceAndExpiry(t, chain.Open(openStoreAt(t, url, flags...)))
		})
	}
}

// nextIncremental returns base.Next() with one sealed incremental appended
// (the catalog never reads the manifest, so none is stored).
func nextIncremental(t *testing.T, base *chain.Catalog, n int) *chain.Catalog {
	t.Helper()
	tip := base.Tip()
	lsn, err := chain.ParseLSN(tip.EndPosition)
	if err != nil {
		t.Fatal(err)
	}
	m := &chain.Manifest{Kind: chain.KindIncremental, Parent: tip.ID, Source: base.Source,
		StartPosition: tip.EndPosition, EndPosition: chain.FormatLSN(lsn + uint64(0x100*n)),
		CreatedAt: time.Now().UTC(), Chunks: []chain.ChunkRef{}}
	if err := m.Seal(); err != nil {
		t.Fatal(err)
	}
	next := base.Next()
	if err := next.AppendIncremental(m); err != nil {
		t.Fatal(err)
	}
	return next
}

func catalogRaceAndExpiry(t *testing.T, ch *chain.Chain) {
	ctx := context.Background()
	ch.SetCheckpointPolicy(chain.CheckpointPolicy{Every: 3})
	b := chaintest.NewBuilder(t, ch, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	b.Incremental(b.Txn(chaintest.Insert(1, "a")))
	base := b.Cat

	// Two writers, one generation.
	nexts := []*chain.Catalog{nextIncremental(t, base, 1), nextIncremental(t, base, 2)}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range nexts {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = ch.CommitCatalog(ctx, nexts[i]) }()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatal("both writers committed one generation")
		case !errcode.Is(err, errcode.CatalogConflict):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer committed")
	}
	got, err := ch.LoadCatalog(ctx)
	if err != nil || got.Tip().ID != nexts[winner].Tip().ID {
		t.Fatalf("after the race: %v", err)
	}

	// A writer stalls holding the winner's generation; another goes on,
	// checkpoints, and the history expires.
	stalled := got
	other, err := chain.Open(ch.Store()).LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oc := chain.Open(ch.Store())
	oc.SetCheckpointPolicy(chain.CheckpointPolicy{Every: 3})
	for i := range 7 {
		next := nextIncremental(t, other, 10+i)
		if err := oc.CommitCatalog(ctx, next); err != nil {
			t.Fatal(err)
		}
		other = next
	}
	res, err := oc.ExpireCatalog(ctx, chain.CatalogRetention{Commits: 1, Checkpoints: 1, Age: time.Hour}, time.Now().Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Commits == 0 {
		t.Fatalf("nothing expired: %+v", res)
	}
	err = ch.CommitCatalog(ctx, nextIncremental(t, stalled, 99))
	if !errcode.Is(err, errcode.CatalogConflict) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("stalled writer: %v", err)
	}
	latest, err := ch.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Tip().ID != other.Tip().ID || latest.Generation != other.Generation {
		t.Fatalf("readers see generation %d tip %s, want %d %s", latest.Generation, latest.Tip().ID, other.Generation, other.Tip().ID)
	}
	t.Logf("expired %d commits and %d checkpoints; the stalled writer was refused", res.Commits, res.Checkpoints)
}
