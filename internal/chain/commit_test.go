package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

// requestStore counts the requests a store answers and the bytes it returns.
type requestStore struct {
	blobstore.Store
	gets, lists, puts, bytes, written atomic.Int64
}

func (s *requestStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	s.gets.Add(1)
	rc, err := s.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	s.bytes.Add(int64(len(data)))
	return io.NopCloser(strings.NewReader(string(data))), err
}

func (s *requestStore) List(ctx context.Context, prefix string) ([]blobstore.ObjectInfo, error) {
	s.lists.Add(1)
	return s.Store.List(ctx, prefix)
}

func (s *requestStore) Put(ctx context.Context, key string, data []byte) error {
	s.puts.Add(1)
	s.written.Add(int64(len(data)))
	return s.Store.Put(ctx, key, data)
}

func (s *requestStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	s.puts.Add(1)
	s.written.Add(int64(len(data)))
	return s.Store.PutIfAbsent(ctx, key, data)
}

func (s *requestStore) requests() int64 { return s.gets.Load() + s.lists.Load() + s.puts.Load() }

func (s *requestStore) reset() {
	s.gets.Store(0)
	s.lists.Store(0)
	s.puts.Store(0)
	s.bytes.Store(0)
	s.written.Store(0)
}

// appendLinks commits n incrementals onto cat, one commit each.
func appendLinks(t testing.TB, c *Chain, cat *Catalog, n int) *Catalog {
	t.Helper()
	for i := 0; i < n; i++ {
		tip := cat.Tip()
		end, err := ParseLSN(tip.EndPosition)
		if err != nil {
			t.Fatal(err)
		}
		m := putIncremental(t, c, tip, FormatLSN(end+0x100), int(end))
		next := cat.Next()
		if err := next.AppendIncremental(m); err != nil {
			t.Fatal(err)
		}
		if err := c.CommitCatalog(context.Background(), next); err != nil {
			t.Fatal(err)
		}
		cat = next
	}
	return cat
}

func sameCatalog(t *testing.T, name string, got, want *Catalog) {
	t.Helper()
	if got.Generation != want.Generation || got.ChainID != want.ChainID || got.Source != want.Source ||
		!reflect.DeepEqual(got.Links(), want.Links()) || len(got.Segments) != len(want.Segments) {
		t.Fatalf("%s: generation %d with %d links, want generation %d with %d", name, got.Generation, len(got.Links()), want.Generation, len(want.Links()))
	}
	for i := range got.Segments {
		if got.Segments[i].Capped != want.Segments[i].Capped || got.Segments[i].Layout != want.Segments[i].Layout {
			t.Fatalf("%s: segment %d differs", name, i)
		}
	}
}

func TestCommitsAndCheckpoints(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	c.SetCheckpointPolicy(CheckpointPolicy{Every: 4})
	cat := buildChain(t, c) // generations 1-5: appends and a rotation
	cat = appendLinks(t, c, cat, 6)
	if cat.Generation != 11 {
		t.Fatalf("generation %d", cat.Generation)
	}
	// Generation 1 checkpoints at once; then every 4 commits.
	var cps []int64
	for k := range s.objects {
		if gen, ok := parseNumberedKey(k, checkpointPrefix); ok {
			cps = append(cps, gen)
		}
	}
	if fmt.Sprint(sortedInts(cps)) != "[1 5 9]" {
		t.Fatalf("checkpoints at %v", sortedInts(cps))
	}
	// A commit holds its change only.
	for gen := int64(6); gen <= 11; gen++ {
		if n := len(s.raw(CommitKey(gen))); n > 600 {
			t.Errorf("commit %d is %d bytes", gen, n)
		}
	}
	if _, ok := s.objects[CatalogKey(1)]; !ok {
		t.Error("no fence at generation 1")
	}
	got, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, "load", got, cat)
	if err := ValidateCatalog(got); err != nil {
		t.Fatal(err)
	}
	// A prune (drop the first segment) and a compaction-like rewrite of a
	// capped segment are stored as changes too.
	pruned := got.Next()
	pruned.Segments = pruned.Segments[1:]
	if err := c.CommitCatalog(ctx, pruned); err != nil {
		t.Fatal(err)
	}
	got, err = c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, "after prune", got, pruned)
	rot := got.Next()
	if err := rot.Rotate(putFull(t, c, rot.Tip().ID, rot.Tip().EndPosition, 99)); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitCatalog(ctx, rot); err != nil {
		t.Fatal(err)
	}
	lay := rot.Next()
	lay.Segments[0].Layout = strings.Repeat("ab", 20)
	if err := c.CommitCatalog(ctx, lay); err != nil {
		t.Fatal(err)
	}
	if c := string(s.raw(CommitKey(lay.Generation))); !strings.Contains(c, `"layout":"abab`) || strings.Contains(c, "replace") {
		t.Fatalf("a compaction's commit: %s", c)
	}
	got, err = c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, "after layout", got, lay)
	if got.Segments[0].Layout != lay.Segments[0].Layout || got.FormatVersion != CatalogFormatVersionCommits {
		t.Fatalf("layout %q version %d", got.Segments[0].Layout, got.FormatVersion)
	}
}

func sortedInts(v []int64) []int64 {
	out := append([]int64(nil), v...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestRefreshReadsOnlyWhatIsNew(t *testing.T) {
	ctx := context.Background()
	cs := &requestStore{Store: newMemStore()}
	c := Open(cs)
	writer := appendLinks(t, c, buildChain(t, c), 20)
	reader, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs.reset()
	same, err := c.Refresh(ctx, reader)
	if err != nil || same != reader {
		t.Fatalf("refresh with nothing new: %v", err)
	}
	if cs.requests() != 1 || cs.bytes.Load() != 0 {
		t.Fatalf("an empty poll cost %d requests and %d bytes", cs.requests(), cs.bytes.Load())
	}
	writer = appendLinks(t, c, writer, 3)
	cs.reset()
	got, err := c.Refresh(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, "refresh", got, writer)
	if cs.gets.Load() != 4 || cs.lists.Load() != 0 || cs.bytes.Load() > 3*600 {
		t.Fatalf("refresh over 3 commits: %d gets, %d lists, %d bytes", cs.gets.Load(), cs.lists.Load(), cs.bytes.Load())
	}
	if reader.Generation != writer.Generation-3 {
		t.Fatal("refresh changed the catalog it was given")
	}
	// The writer's own catalog refreshes the same way.
	if w, err := c.Refresh(ctx, writer); err != nil || w != writer {
		t.Fatalf("writer refresh: %v", err)
	}
	// A catalog not read from the store is loaded whole.
	if got, err := c.Refresh(ctx, writer.Next()); err != nil || got.Generation != writer.Generation {
		t.Fatalf("refresh of an uncommitted catalog: %v", err)
	}
}

func TestStaleWriterConflicts(t *testing.T) {
	ctx := context.Background()
	c := Open(newMemStore())
	base := buildChain(t, c)
	a, b := base.Next(), base.Next()
	if err := a.AppendIncremental(putIncremental(t, c, base.Tip(), "0/5000", 50)); err != nil {
		t.Fatal(err)
	}
	if err := b.AppendIncremental(putIncremental(t, c, base.Tip(), "0/5100", 51)); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitCatalog(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitCatalog(ctx, b); !errcode.Is(err, errcode.CatalogConflict) {
		t.Fatalf("second writer: %v", err)
	}
	if err := c.CommitCatalog(ctx, a); err != nil {
		t.Fatalf("retry of a landed commit: %v", err)
	}
	newer, err := c.Refresh(ctx, base)
	if err != nil || newer.Tip().ID != a.Tip().ID {
		t.Fatalf("refresh after the race: %v", err)
	}
}

// TestStalledWriterAcrossExpiry: a writer that held generation G while other
// writers committed past it, checkpointed and expired G+1 creates G+1 again
// (the create-only write succeeds: the object is gone) and is refused;
// readers never see its commit.
func TestStalledWriterAcrossExpiry(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	c.SetCheckpointPolicy(CheckpointPolicy{Every: 5})
	stalled := buildChain(t, c)
	held := stalled.Generation
	m := putIncremental(t, c, stalled.Tip(), "0/9000", 90)
	latest := appendLinks(t, c, stalled, 12) // checkpoints at 1, 6, 11, 16
	// Writers that were merely quick are not mistaken for expiry: a
	// checkpoint at the commit names its hash, or one past it and the
	// following commit does.
	for _, gen := range []int64{14, 16, 17} {
		if _, err := c.checkNotExpired(ctx, gen, sha256Hex(s.raw(CommitKey(gen)))); err != nil {
			t.Fatalf("generation %d: %v", gen, err)
		}
	}
	res, err := c.ExpireCatalog(ctx, CatalogRetention{Commits: 2, Checkpoints: 1, Age: time.Hour}, time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Commits == 0 || res.Checkpoints == 0 {
		t.Fatalf("expired %+v", res)
	}
	if _, ok := s.objects[CommitKey(held+1)]; ok {
		t.Fatal("generation G+1 not expired")
	}
	next := stalled.Next()
	if err := next.AppendIncremental(m); err != nil {
		t.Fatal(err)
	}
	err = c.CommitCatalog(ctx, next)
	if !errcode.Is(err, errcode.CatalogConflict) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("stalled writer: %v", err)
	}
	if _, ok := s.objects[CommitKey(held+1)]; !ok {
		t.Fatal("the stalled writer's create-only write did not land (the test shows nothing)")
	}
	got, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, "after the stalled writer", got, latest)
}

// oldLoadCatalog is how a reader of catalog format 1 and 2 loads: the HEAD
// hint or the highest listed generation, then probing forward, refusing a
// version it does not know.
func oldLoadCatalog(ctx context.Context, s blobstore.Store) (int64, error) {
	read := func(gen int64) (bool, error) {
		data, err := blobstore.ReadAll(ctx, s, CatalogKey(gen))
		if errors.Is(err, blobstore.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var cat Catalog
		if err := strictUnmarshal(data, &cat); err != nil {
			return false, errcode.Wrap(errcode.ManifestInvalid, err, "does not parse")
		}
		if cat.FormatVersion != 1 && cat.FormatVersion != 2 {
			return false, errcode.New(errcode.FormatUnsupported, "version %d", cat.FormatVersion)
		}
		return true, nil
	}
	var gen int64
	if data, err := blobstore.ReadAll(ctx, s, CatalogHeadKey); err == nil {
		if g, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil {
			if ok, err := read(g); err != nil {
				return 0, err
			} else if ok {
				gen = g
			}
		}
	}
	if gen == 0 {
		objs, err := s.List(ctx, generationPrefix)
		if err != nil {
			return 0, err
		}
		if len(objs) == 0 {
			return 0, errcode.New(errcode.ChainNotFound, "none")
		}
		g, _ := parseNumberedKey(objs[len(objs)-1].Key, generationPrefix)
		if _, err := read(g); err != nil {
			return 0, err
		}
		gen = g
	}
	for {
		ok, err := read(gen + 1)
		if err != nil || !ok {
			return gen, err
		}
		gen++
	}
}

func TestLegacyChainMigrates(t *testing.T) {
	ctx := context.Background()
	s := loadFixtureStore(t, fixtureDir)
	c := Open(s)
	if gen, err := oldLoadCatalog(ctx, s); err != nil || gen != 2 {
		t.Fatalf("old reader on the fixture: %d %v", gen, err)
	}
	old, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An old reader polling the chain sees its generations while the chain
	// is old: a refresh reads the next whole generation.
	cat := appendLinks(t, c, old, 3)
	if cat.Generation != 5 {
		t.Fatalf("generation %d", cat.Generation)
	}
	if _, ok := s.objects[CheckpointKey(2)]; !ok {
		t.Fatal("the first commit on an old chain wrote no checkpoint")
	}
	got, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, "migrated", got, cat)
	if err := ValidateCatalog(got); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Refresh(ctx, old); err != nil || r.Generation != 5 {
		t.Fatalf("refresh across the migration: %v", err)
	}
	// A reader of the old version refuses, with the HEAD hint or without.
	if _, err := oldLoadCatalog(ctx, s); !errcode.Is(err, errcode.FormatUnsupported) {
		t.Fatalf("old reader on the migrated chain: %v", err)
	}
	s.Delete(ctx, CatalogHeadKey)
	if _, err := oldLoadCatalog(ctx, s); !errcode.Is(err, errcode.FormatUnsupported) {
		t.Fatalf("old reader without HEAD: %v", err)
	}
	// A writer of the old version loses the race for generation 3.
	if err := s.PutIfAbsent(ctx, CatalogKey(3), []byte("{}")); !errors.Is(err, blobstore.ErrExists) {
		t.Fatalf("old writer: %v", err)
	}
	// Without checkpoints (all lost), the fence leads to the commits.
	s.Delete(ctx, CheckpointKey(2))
	if got, err := c.LoadCatalog(ctx); err != nil || got.Generation != 5 {
		t.Fatalf("load without checkpoints: %v", err)
	}
	// A new chain refuses the old reader too.
	fresh := newMemStore()
	buildChain(t, Open(fresh))
	if _, err := oldLoadCatalog(ctx, fresh); !errcode.Is(err, errcode.FormatUnsupported) {
		t.Fatalf("old reader on a new chain: %v", err)
	}
}

func TestExpireCatalog(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	c.SetCheckpointPolicy(CheckpointPolicy{Every: 10})
	cat := appendLinks(t, c, buildChain(t, c), 60)
	r := CatalogRetention{Commits: 15, Checkpoints: 2, Age: time.Hour}
	if res, err := c.ExpireCatalog(ctx, r, time.Now()); err != nil || res != (ExpireResult{}) {
		t.Fatalf("young objects expired: %+v %v", res, err)
	}
	if _, err := c.ExpireCatalog(ctx, CatalogRetention{Commits: 1, Checkpoints: 1, Age: time.Minute}, time.Now()); err == nil {
		t.Fatal("a retention shorter than the minimum age was taken")
	}
	// A journal still waiting holds the commit it names.
	j := GarbageJournalKey(40)
	s.set(j, []byte("{}"))
	if _, err := c.ExpireCatalog(ctx, r, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.objects[CommitKey(40)]; !ok {
		t.Fatal("the commit a journal names expired")
	}
	s.Delete(ctx, j)
	res, err := c.ExpireCatalog(ctx, r, time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var commits, cps []int64
	for k := range s.objects {
		if gen, ok := parseNumberedKey(k, commitPrefix); ok {
			commits = append(commits, gen)
		}
		if gen, ok := parseNumberedKey(k, checkpointPrefix); ok {
			cps = append(cps, gen)
		}
	}
	commits, cps = sortedInts(commits), sortedInts(cps)
	// Newest checkpoint 61 (written at 61), 15 newest commits 51-65.
	if len(cps) != 2 || cps[1] != 61 || commits[0] != 51 || commits[len(commits)-1] != 65 {
		t.Fatalf("kept commits %v, checkpoints %v (%+v)", commits, cps, res)
	}
	got, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, "after expiry", got, cat)
}

// TestCheckpointPages: a checkpoint of a long segment stores its
// incrementals in pages written once and named again by later
// checkpoints; a pruned segment's pages expire.
func TestCheckpointPages(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	c.SetCheckpointPolicy(CheckpointPolicy{Every: 10})
	cat := seedCatalog(t, c, 2*pageLinks+500)
	countPages := func() int {
		n := 0
		for k := range s.objects {
			if strings.HasPrefix(k, pagePrefix) {
				n++
			}
		}
		return n
	}
	if n := countPages(); n != 2 {
		t.Fatalf("%d pages for %d incrementals", n, len(cat.Segments[0].Incrementals))
	}
	if n := len(s.raw(CheckpointKey(cat.Generation))); n > (pageLinks/2+10)*300 {
		t.Fatalf("checkpoint of %d bytes", n)
	}
	for range 520 {
		cat = commitOne(t, c, cat)
	}
	if n := countPages(); n != 3 {
		t.Fatalf("%d pages after a third page filled", n)
	}
	got, err := Open(s).LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameCatalog(t, "paged", got, cat)
	// A damaged page is refused.
	var page string
	for k := range s.objects {
		if strings.HasPrefix(k, pagePrefix) {
			page = k
			break
		}
	}
	orig := s.raw(page)
	s.set(page, append([]byte(" "), orig...))
	if _, err := Open(s).LoadCatalog(ctx); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("damaged page: %v", err)
	}
	s.set(page, orig)
	// Rotate, prune the long segment away, checkpoint: its pages expire.
	next := got.Next()
	if err := next.Rotate(&Manifest{ID: synthID(1 << 30), Kind: KindFull, Parent: got.Tip().ID, Source: testSource,
		StartPosition: got.Tip().EndPosition, EndPosition: got.Tip().EndPosition, CreatedAt: synthStart}); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitCatalog(ctx, next); err != nil {
		t.Fatal(err)
	}
	pruned := next.Next()
	pruned.Segments = pruned.Segments[1:]
	if err := c.CommitCatalog(ctx, pruned); err != nil {
		t.Fatal(err)
	}
	cat = pruned
	for range 20 {
		cat = commitOne(t, c, cat)
	}
	res, err := c.ExpireCatalog(ctx, CatalogRetention{Commits: 5, Checkpoints: 1, Age: time.Hour}, time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Pages != 3 || countPages() != 0 {
		t.Fatalf("expired %+v, %d pages left", res, countPages())
	}
	if got, err := Open(s).LoadCatalog(ctx); err != nil || got.Generation != cat.Generation {
		t.Fatalf("load after expiry: %v", err)
	}
}

// TestWriterOnAReplacedChain: a writer holding a catalog of a chain that
// was deleted and created again under the same store is refused, though
// its generation is free in the new chain.
func TestWriterOnAReplacedChain(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	c.SetCheckpointPolicy(CheckpointPolicy{Every: 3})
	stale := appendLinks(t, c, buildChain(t, c), 6)
	for k := range s.objects {
		s.Delete(ctx, k)
	}
	buildChain(t, c)
	next := stale.Next()
	if err := next.AppendIncremental(putIncremental(t, c, stale.Tip(), "0/F000", 77)); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitCatalog(ctx, next); !errcode.Is(err, errcode.CatalogConflict) || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("writer on a replaced chain: %v", err)
	}
}

// A commit that appends a link whose ID an earlier link of the chain
// already has (not the tip: that was always refused) is refused by the
// reader: the catalog it would make names one link twice, so Find and Path
// would answer for the wrong one.
func TestCommitRepeatingAnEarlierLinkIsRefused(t *testing.T) {
	s := newMemStore()
	c := Open(s)
	full := &Manifest{ID: synthID(1), Kind: KindFull, Source: testSource, StartPosition: "0/1000", EndPosition: "0/1000", CreatedAt: synthStart}
	if err := c.CommitCatalog(context.Background(), NewCatalog(full)); err != nil {
		t.Fatal(err)
	}
	base, err := c.LoadCatalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	appendLinks(t, c, base, 3)
	base, err = c.LoadCatalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	links := base.Links()
	tip, earlier := links[len(links)-1], links[1]
	for _, tc := range []struct {
		name   string
		append []Link
	}{
		{"an earlier incremental's ID", []Link{{ID: earlier.ID, Kind: KindIncremental, Parent: tip.ID, StartPosition: tip.EndPosition, EndPosition: "0/9000", CreatedAt: synthStart}}},
		{"the full's ID", []Link{{ID: full.ID, Kind: KindIncremental, Parent: tip.ID, StartPosition: tip.EndPosition, EndPosition: "0/9000", CreatedAt: synthStart}}},
		{"one ID twice in one commit", []Link{
			{ID: synthID(50), Kind: KindIncremental, Parent: tip.ID, StartPosition: tip.EndPosition, EndPosition: "0/9000", CreatedAt: synthStart},
			{ID: synthID(51), Kind: KindIncremental, Parent: synthID(50), StartPosition: "0/9000", EndPosition: "0/9100", CreatedAt: synthStart},
			{ID: synthID(50), Kind: KindIncremental, Parent: synthID(51), StartPosition: "0/9100", EndPosition: "0/9200", CreatedAt: synthStart},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			commit := &CatalogCommit{FormatVersion: CatalogFormatVersionCommits, ChainID: base.ChainID, Generation: base.Generation + 1,
				Prev: base.stored.hash, Change: CatalogChange{Edits: []SegmentEdit{{Segment: len(base.Segments) - 1, Append: tc.append}}}}
			next, err := applyCommit(CommitKey(commit.Generation), base, base.stored.hash, commit)
			if !errcode.Is(err, errcode.ChainInvalid) || !strings.Contains(err.Error(), "appears twice") {
				t.Fatalf("applied (%v); want SLUICE-E-CHAIN-INVALID naming the link that appears twice", err)
			}
			if next != nil {
				t.Fatal("a refused commit returned a catalog")
			}
		})
	}
}
