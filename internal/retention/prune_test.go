package retention

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// segments builds a chain of n segments of two incrementals each, a minute
// per link, and returns the builder.
func segments(t *testing.T, ch *chain.Chain, n int) *chaintest.Builder {
	t.Helper()
	b := chaintest.NewBuilder(t, ch, t0)
	id := 1
	for s := 0; s < n; s++ {
		if s > 0 {
			b.Rotate()
		}
		for i := 0; i < 2; i++ {
			b.Incremental(b.Txn(chaintest.Insert(id, "x")))
			id++
		}
	}
	return b
}

// keysOf lists every object under prefix.
func keysOf(t *testing.T, ch *chain.Chain, prefix string) map[string]bool {
	t.Helper()
	objs, err := ch.Store().List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, o := range objs {
		out[o.Key] = true
	}
	return out
}

// segmentObjects lists the manifests and chunks of segment s of cat.
func segmentObjects(t *testing.T, ch *chain.Chain, cat *chain.Catalog, s int) []string {
	t.Helper()
	keys, _, err := objectsOf(context.Background(), ch, &chain.Catalog{Segments: cat.Segments[s:]}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func requireAbsent(t *testing.T, ch *chain.Chain, keys []string, absent bool) {
	t.Helper()
	have := keysOf(t, ch, "")
	for _, k := range keys {
		if have[k] == absent {
			t.Fatalf("object %s: present=%v, want present=%v", k, have[k], !absent)
		}
	}
}

func TestPruneKeepSegments(t *testing.T) {
	ctx := context.Background()
	ch := chaintest.Store(t)
	b := segments(t, ch, 4)
	before := b.Cat
	dropped := append(segmentObjects(t, ch, before, 0), segmentObjects(t, ch, before, 1)...)
	kept := append(segmentObjects(t, ch, before, 2), segmentObjects(t, ch, before, 3)...)

	res, err := Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Refuse: true, Now: func() time.Time { return b.Now }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Drop) != 2 || res.Keep != 2 || res.Committed != before.Generation+1 || res.Deleted != len(dropped) || res.Objects != len(dropped) {
		t.Fatalf("result %+v; want 2 dropped, 2 kept, generation %d, %d objects deleted", res, before.Generation+1, len(dropped))
	}
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Segments) != 2 || cat.Segments[0].Full.ID != before.Segments[2].Full.ID || cat.ChainID != before.ChainID {
		t.Fatalf("catalog after the prune: %d segments, first full %s (want %s), chain %s", len(cat.Segments), cat.Segments[0].Full.ID, before.Segments[2].Full.ID, cat.ChainID)
	}
	if err := ch.Verify(ctx, cat, ""); err != nil {
		t.Fatalf("the pruned chain does not verify: %v", err)
	}
	requireAbsent(t, ch, dropped, true)
	requireAbsent(t, ch, kept, false)
	if j := keysOf(t, ch, "control/garbage-"); len(j) != 0 {
		t.Fatalf("journals left: %v", j)
	}

	// The newest segment is never pruned, whatever the policy.
	res, err = Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 1}, Now: func() time.Time { return b.Now }})
	if err != nil || len(res.Drop) != 1 || res.Keep != 1 {
		t.Fatalf("keep 1: %+v, %v", res, err)
	}
	res, err = Prune(ctx, ch, Options{Policy: Policy{KeepDuration: dur.Duration(time.Nanosecond)}, Now: func() time.Time { return b.Now.Add(time.Hour) }})
	if err != nil || len(res.Drop) != 0 || res.Keep != 1 || res.Committed != 0 {
		t.Fatalf("a prune of a one-segment chain: %+v, %v", res, err)
	}
}

func TestPruneKeepDuration(t *testing.T) {
	ctx := context.Background()
	ch := chaintest.Store(t)
	b := segments(t, ch, 4) // fulls at t0, t0+3m, t0+6m, t0+9m; tip at t0+11m
	// A point 5 minutes back (t0+7m) lies in segment 2; restoring it needs
	// segment 2 and everything after, so segments 0 and 1 go.
	now := t0.Add(12 * time.Minute)
	res, err := Prune(ctx, ch, Options{Policy: Policy{KeepDuration: dur.Duration(5 * time.Minute)}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Drop) != 2 || res.Drop[0].Full != b.Cat.Segments[0].Full.ID || res.Drop[1].Until != b.Cat.Segments[2].Full.CreatedAt {
		t.Fatalf("drop %+v; want segments 0 and 1", res.Drop)
	}
	cat, _ := ch.LoadCatalog(ctx)
	if len(cat.Segments) != 2 {
		t.Fatalf("%d segments left, want 2", len(cat.Segments))
	}
	// Exactly at the boundary nothing more goes: segment 2 covers t0+6m
	// to t0+9m, and the window reaches back to t0+9m.
	res, err = Prune(ctx, ch, Options{Policy: Policy{KeepDuration: dur.Duration(3 * time.Minute)}, Now: func() time.Time { return now }})
	if err != nil || len(res.Drop) != 0 {
		t.Fatalf("at the boundary: %+v, %v", res, err)
	}
}

func TestPruneDryRun(t *testing.T) {
	ctx := context.Background()
	ch := chaintest.Store(t)
	b := segments(t, ch, 3)
	before := keysOf(t, ch, "")
	res, err := Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 1}, DryRun: true, Now: func() time.Time { return b.Now }})
	if err != nil {
		t.Fatal(err)
	}
	want := len(segmentObjects(t, ch, b.Cat, 0)) + len(segmentObjects(t, ch, b.Cat, 1))
	if len(res.Drop) != 2 || res.Committed != 0 || res.Deleted != 0 || res.Objects != want || res.Bytes <= 0 {
		t.Fatalf("dry run: %+v; want 2 segments, %d objects, nothing committed or deleted", res, want)
	}
	after := keysOf(t, ch, "")
	if len(after) != len(before) {
		t.Fatalf("the dry run changed the store: %d objects, then %d", len(before), len(after))
	}
}

func TestPruneInterruptedBetweenCommitAndDeletes(t *testing.T) {
	ctx := context.Background()
	ch := chaintest.Store(t)
	b := segments(t, ch, 3)
	dropped := segmentObjects(t, ch, b.Cat, 0)
	crash := errors.New("the worker died")
	_, err := Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Now: func() time.Time { return b.Now },
		AfterCommit: func() error { return crash }})
	if !errors.Is(err, crash) {
		t.Fatalf("got %v, want the crash", err)
	}
	// The catalog no longer names the segment; its objects are garbage the
	// journal lists.
	cat, _ := ch.LoadCatalog(ctx)
	if len(cat.Segments) != 2 {
		t.Fatalf("%d segments after the commit, want 2", len(cat.Segments))
	}
	if err := ch.Verify(ctx, cat, ""); err != nil {
		t.Fatal(err)
	}
	requireAbsent(t, ch, dropped, false)
	if j := keysOf(t, ch, "control/garbage-"); len(j) != 1 {
		t.Fatalf("journals: %v, want one", j)
	}

	// The next prune, with nothing more to drop, deletes them.
	res, err := Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Now: func() time.Time { return b.Now }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != len(dropped) || len(res.Drop) != 0 {
		t.Fatalf("second prune: %+v; want %d leftovers deleted", res, len(dropped))
	}
	requireAbsent(t, ch, dropped, true)
	if j := keysOf(t, ch, "control/garbage-"); len(j) != 0 {
		t.Fatalf("journals left: %v", j)
	}
}

func TestPruneJournalOfALostCommit(t *testing.T) {
	ctx := context.Background()
	ch := chaintest.Store(t)
	b := segments(t, ch, 2)
	// A run that wrote its journal and new objects for generation N+1 and
	// died; then another writer took N+1.
	orphan := chain.DataKey("compact-attempt", "merged-0000.chunk")
	if err := ch.Store().Put(ctx, orphan, []byte("x")); err != nil {
		t.Fatal(err)
	}
	keep := segmentObjects(t, ch, b.Cat, 0)
	j := chain.GarbageJournal{Generation: b.Cat.Generation + 1, CatalogSHA256: strings.Repeat("0", 64), By: "compact",
		OnCommit: keep, OnConflict: []string{orphan}}
	writeJournal(t, ch, j)
	// While the generation is not committed, the journal is left alone.
	res, err := Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Now: func() time.Time { return b.Now }})
	if err != nil || res.Pending != 1 || res.Deleted != 0 {
		t.Fatalf("pending journal: %+v, %v", res, err)
	}
	b.Incremental(b.Txn(chaintest.Insert(100, "y")))
	res, err = Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Now: func() time.Time { return b.Now }})
	if err != nil || res.Deleted != 1 || res.Pending != 0 {
		t.Fatalf("lost journal: %+v, %v", res, err)
	}
	requireAbsent(t, ch, []string{orphan}, true)
	requireAbsent(t, ch, keep, false)
}

func writeJournal(t *testing.T, ch *chain.Chain, j chain.GarbageJournal) {
	t.Helper()
	data := []byte(`{"generation":` + itoa(j.Generation) + `,"catalog_sha256":"` + j.CatalogSHA256 + `","by":"` + j.By +
		`","created_at":"2026-01-01T00:00:00Z","delete_after":"2026-01-01T00:00:00Z","on_commit":["` + strings.Join(j.OnCommit, `","`) +
		`"],"on_conflict":["` + strings.Join(j.OnConflict, `","`) + `"]}`)
	if err := ch.Store().Put(context.Background(), chain.GarbageJournalKey(j.Generation), data); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int64) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func TestPruneHeldByABroker(t *testing.T) {
	ctx := context.Background()
	ch := chaintest.Store(t)
	b := segments(t, ch, 4)
	cat := b.Cat
	// A broker inside segment 1, and one at the tip of segment 1 (its
	// closing incremental): that one needs nothing of segment 1.
	put := func(stream, last string) {
		if err := ch.PutBrokerPosition(ctx, chain.BrokerPosition{Stream: stream, ChainID: cat.ChainID, LastApplied: last, UpdatedAt: b.Now}); err != nil {
			t.Fatal(err)
		}
	}
	put("lagging", cat.Segments[1].Incrementals[0].ID)
	put("at-rotation", cat.Segments[1].Incrementals[1].ID)
	now := func() time.Time { return b.Now }

	_, err := Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Refuse: true, Now: now})
	e, ok := errcode.As(err)
	if !ok || e.Code != errcode.PruneBrokerBehind || !strings.Contains(err.Error(), "lagging") || strings.Contains(err.Error(), "at-rotation") {
		t.Fatalf("got %v, want SLUICE-E-PRUNE-BROKER-BEHIND naming the lagging broker only", err)
	}
	if after, _ := ch.LoadCatalog(ctx); after.Generation != cat.Generation {
		t.Fatal("the refused prune committed")
	}

	// A report that does not parse holds every segment.
	if err := ch.Store().Put(ctx, chain.BrokerPositionKey("damaged"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if res, err := Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Now: now}); err != nil || len(res.Drop) != 0 {
		t.Fatalf("with a damaged report: %+v, %v; want nothing dropped", res, err)
	}
	if err := ch.DeleteBrokerPosition(ctx, "damaged"); err != nil {
		t.Fatal(err)
	}

	// As the producer's policy: what no broker needs goes, the rest stays.
	res, err := Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Now: now})
	if err != nil || len(res.Drop) != 1 || len(res.Held) != 1 || res.Held[0].Stream != "lagging" {
		t.Fatalf("policy prune: %+v, %v; want segment 0 dropped, held by lagging", res, err)
	}

	// Forced: the lagging broker's segment goes too; its position is lost.
	res, err = Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Refuse: true, Force: true, Now: now})
	if err != nil || len(res.Drop) != 1 {
		t.Fatalf("forced prune: %+v, %v", res, err)
	}
	res, err = Prune(ctx, ch, Options{Policy: Policy{KeepSegments: 2}, Refuse: true, Now: now, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, br := range res.Brokers {
		if br.Stream == "lagging" && !br.Lost {
			t.Fatalf("the lagging broker's position survived a forced prune: %+v", br)
		}
	}
}

// conflictStore lets another writer commit just before the first catalog
// write of a prune.
type conflictStore struct {
	blobstore.Store
	once   sync.Once
	before func()
}

func (s *conflictStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, "catalog/commit-") {
		s.once.Do(s.before)
	}
	return s.Store.PutIfAbsent(ctx, key, data)
}

func TestPruneRetriesAfterAnotherCommit(t *testing.T) {
	ctx := context.Background()
	ch := chaintest.Store(t)
	b := segments(t, ch, 3)
	var appended string
	cs := &conflictStore{Store: ch.Store(), before: func() { appended = b.Incremental(b.Txn(chaintest.Insert(50, "late"))).ID }}
	res, err := Prune(ctx, chain.Open(cs), Options{Policy: Policy{KeepSegments: 1}, Refuse: true, Now: func() time.Time { return b.Now }})
	if err != nil {
		t.Fatal(err)
	}
	cat, _ := ch.LoadCatalog(ctx)
	if len(res.Drop) != 2 || len(cat.Segments) != 1 || cat.Tip().ID != appended {
		t.Fatalf("after the retried prune: %+v, %d segments, tip %s (want the late incremental %s)", res, len(cat.Segments), cat.Tip().ID, appended)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, p := range []Policy{{}, {KeepSegments: 1, KeepDuration: dur.Duration(time.Hour)}, {KeepSegments: -1}} {
		if p.Validate() == nil {
			t.Errorf("%+v validates", p)
		}
	}
}
