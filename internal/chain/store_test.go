package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

var testSource = SourceInfo{Engine: "postgres", SystemID: "7300000000000000001", Database: "app", Slot: "sluice_app"}

var testSchema = &Schema{Tables: []Table{{
	Schema: "public", Name: "sample",
	Columns: []Column{
		{Name: "id", Type: "bigint", TypeOID: 20, NotNull: true, Encoding: EncodingBinary},
		{Name: "name", Type: "text", TypeOID: 25, Encoding: EncodingBinary},
		{Name: "amount", Type: "numeric(20,5)", TypeOID: 1700, Encoding: EncodingBinary},
		{Name: "ratio", Type: "double precision", TypeOID: 701, Encoding: EncodingBinary},
		{Name: "extra", Type: "integer[]", TypeOID: 1007, Encoding: EncodingBinary},
	},
	PrimaryKey: []string{"id"},
}}}

var testTime = time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)

// writeTestChunk stores a chunk of the sample rows under attempt.
func writeTestChunk(t testing.TB, c *Chain, attempt, name string) ChunkRef {
	t.Helper()
	b := NewRowBuilder("public.sample", 5)
	for _, r := range sampleRows() {
		b.AppendRow(r)
	}
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := c.WriteChunk(context.Background(), ChunkPlace{Key: DataKey(attempt, name)}, data, b.Rows(), int64(b.RawLen()))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// putFull writes a full backup whose parent is parent (empty for the first).
func putFull(t testing.TB, c *Chain, parent, pos string, n int) *Manifest {
	t.Helper()
	attempt := fmt.Sprintf("full-%d", n)
	ref := writeTestChunk(t, c, attempt, "c1")
	m := &Manifest{
		Kind: KindFull, Parent: parent, Source: testSource,
		StartPosition: pos, EndPosition: pos,
		CreatedAt: testTime.Add(time.Duration(n) * time.Minute),
		Schema:    testSchema,
		Tables:    []TableData{{Table: "public.sample", Rows: ref.Rows, Chunks: []ChunkRef{ref}}},
		Rows:      ref.Rows,
	}
	if err := c.PutManifest(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// putIncremental writes an incremental following parent.
func putIncremental(t testing.TB, c *Chain, parent Link, end string, n int) *Manifest {
	t.Helper()
	ref := writeTestChunk(t, c, fmt.Sprintf("inc-%d", n), "c1")
	m := &Manifest{
		Kind: KindIncremental, Parent: parent.ID, Source: testSource,
		StartPosition: parent.EndPosition, EndPosition: end,
		CreatedAt: testTime.Add(time.Duration(n) * time.Minute),
		Chunks:    []ChunkRef{ref}, Changes: ref.Rows - 2, Transactions: 1, ApplyIdentity: true,
	}
	if err := c.PutManifest(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// buildChain commits: full1, inc, inc, rotate to full2, inc — five
// generations — and returns the last catalog.
func buildChain(t testing.TB, c *Chain) *Catalog {
	t.Helper()
	ctx := context.Background()
	full := putFull(t, c, "", "0/1000", 0)
	cat := NewCatalog(full)
	if err := c.CommitCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	step := func(apply func(next *Catalog) error) {
		t.Helper()
		next := cat.Next()
		if err := apply(next); err != nil {
			t.Fatal(err)
		}
		if err := c.CommitCatalog(ctx, next); err != nil {
			t.Fatal(err)
		}
		cat = next
	}
	step(func(n *Catalog) error { return n.AppendIncremental(putIncremental(t, c, n.Tip(), "0/2000", 1)) })
	step(func(n *Catalog) error { return n.AppendIncremental(putIncremental(t, c, n.Tip(), "0/3000", 2)) })
	step(func(n *Catalog) error { return n.Rotate(putFull(t, c, n.Tip().ID, "0/3800", 3)) })
	step(func(n *Catalog) error { return n.AppendIncremental(putIncremental(t, c, n.Tip(), "0/4000", 4)) })
	return cat
}

func TestManifestID(t *testing.T) {
	loc := time.FixedZone("X", 5*3600+30*60)
	m := &Manifest{Kind: KindFull, Source: testSource, StartPosition: "0/1", EndPosition: "0/1",
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 123456789, loc), Schema: testSchema}
	if err := m.Seal(); err != nil {
		t.Fatal(err)
	}
	if !ValidID(m.ID) || m.FormatVersion != ManifestFormatVersion {
		t.Fatalf("sealed manifest: id %q version %d", m.ID, m.FormatVersion)
	}
	if m.CreatedAt.Location() != time.UTC || m.CreatedAt.Nanosecond() != 123456000 {
		t.Fatalf("CreatedAt not normalized: %v", m.CreatedAt)
	}
	if err := VerifyID(m); err != nil {
		t.Fatal(err)
	}
	data, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeManifest(m.ID, data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := encodeManifest(back)
	if string(again) != string(data) {
		t.Fatalf("manifest does not round-trip:\n%s\n%s", data, again)
	}
	edited := *back
	edited.EndPosition = "0/2"
	if err := VerifyID(&edited); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("edited manifest: %v", err)
	}
}

func TestPutGetManifest(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	m := putFull(t, c, "", "0/1000", 0)
	got, err := c.GetManifest(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != m.ID || got.Rows != 4 || !got.CreatedAt.Equal(m.CreatedAt) {
		t.Fatalf("got %+v", got)
	}
	// An idempotent retry of the same manifest succeeds.
	again := *m
	if err := c.PutManifest(ctx, &again); err != nil || again.ID != m.ID {
		t.Fatalf("retry: %v", err)
	}
	key := ManifestKey(m.ID)
	orig := s.raw(key)

	// A hand-edited manifest no longer hashes to its ID.
	s.set(key, []byte(strings.Replace(string(orig), `"rows":4}`, `"rows":5}`, 1)))
	if _, err := c.GetManifest(ctx, m.ID); !errcode.Is(err, errcode.ManifestInvalid) || !strings.Contains(err.Error(), m.ID) {
		t.Fatalf("edited: %v", err)
	}
	if err := c.PutManifest(ctx, &again); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("put over different bytes: %v", err)
	}
	s.set(key, []byte(strings.Replace(string(orig), fmt.Sprintf(`"format_version":%d`, ManifestFormatVersion), `"format_version":7`, 1)))
	if _, err := c.GetManifest(ctx, m.ID); !errcode.Is(err, errcode.FormatUnsupported) {
		t.Fatalf("future version: %v", err)
	}
	s.set(key, []byte(strings.Replace(string(orig), `{`, `{"surprise":1,`, 1)))
	if _, err := c.GetManifest(ctx, m.ID); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("unknown field: %v", err)
	}
	s.set(key, []byte("{not json"))
	if _, err := c.GetManifest(ctx, m.ID); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("garbage: %v", err)
	}
	s.Delete(ctx, key)
	if _, err := c.GetManifest(ctx, m.ID); !errcode.Is(err, errcode.ManifestInvalid) || !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := c.GetManifest(ctx, "../../etc"); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("bad id: %v", err)
	}
	s.failGet = func(string) error { return errors.New("connection refused") }
	if _, err := c.GetManifest(ctx, m.ID); !errcode.Is(err, errcode.StoreUnreachable) {
		t.Fatalf("unreachable: %v", err)
	}
	bad := &Manifest{Kind: KindIncremental, Source: testSource, EndPosition: "0/1"}
	if err := c.PutManifest(ctx, bad); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("invalid manifest written: %v", err)
	}
}

func TestCatalogConflict(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	full := putFull(t, c, "", "0/1000", 0)
	if err := c.CommitCatalog(ctx, NewCatalog(full)); err != nil {
		t.Fatal(err)
	}
	base, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two writers build different generation-2 catalogs from the same base.
	var nexts [2]*Catalog
	for i := range nexts {
		nexts[i] = base.Next()
		inc := putIncremental(t, c, base.Tip(), fmt.Sprintf("0/%d000", 2+i), 10+i)
		if err := nexts[i].AppendIncremental(inc); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var errs [2]error
	for i := range nexts {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.CommitCatalog(ctx, nexts[i]) }()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatal("both writers committed generation 2")
			}
			winner = i
		case errcode.Is(err, errcode.CatalogConflict):
			if !strings.Contains(err.Error(), "generation 2") {
				t.Errorf("conflict message: %v", err)
			}
		default:
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer committed")
	}
	got, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 2 || got.Tip().ID != nexts[winner].Tip().ID {
		t.Fatalf("loaded generation %d tip %s", got.Generation, got.Tip().ID)
	}
	// The winner retrying its own commit is not a conflict; a stale writer is.
	if err := c.CommitCatalog(ctx, nexts[winner]); err != nil {
		t.Fatalf("idempotent retry: %v", err)
	}
	if err := c.CommitCatalog(ctx, nexts[1-winner]); !errcode.Is(err, errcode.CatalogConflict) {
		t.Fatalf("loser retrying: %v", err)
	}
}

func TestLoadCatalog(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	if _, err := c.LoadCatalog(ctx); !errcode.Is(err, errcode.ChainNotFound) || !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("empty store: %v", err)
	}
	want := buildChain(t, c)
	if want.Generation != 5 {
		t.Fatalf("built generation %d", want.Generation)
	}
	load := func(name string) {
		t.Helper()
		got, err := c.LoadCatalog(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Generation != 5 || got.Tip().ID != want.Tip().ID {
			t.Fatalf("%s: got generation %d", name, got.Generation)
		}
	}
	load("from the checkpoint")
	for _, gen := range []int64{1, 2, 3, 4, 5} {
		s.Delete(ctx, CheckpointKey(gen))
	}
	load("without a checkpoint, from the fence at generation 1")
	orig := s.raw(CommitKey(5))
	s.set(CommitKey(5), []byte(strings.Replace(string(orig), `"format_version":3`, `"format_version":4`, 1)))
	if _, err := c.LoadCatalog(ctx); !errcode.Is(err, errcode.FormatUnsupported) {
		t.Fatalf("future commit version: %v", err)
	}
	s.set(CommitKey(5), []byte(`{"format_version":`))
	if _, err := c.LoadCatalog(ctx); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("unparseable commit: %v", err)
	}
	s.set(CommitKey(5), []byte(strings.Replace(string(orig), `"prev":"`, `"prev":"0`, 1)))
	if _, err := c.LoadCatalog(ctx); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("commit after another generation: %v", err)
	}
	s.set(CommitKey(5), orig)
	s.failGet = func(key string) error {
		if key == CommitKey(3) {
			return errors.New("timeout")
		}
		return nil
	}
	if _, err := c.LoadCatalog(ctx); !errcode.Is(err, errcode.StoreUnreachable) {
		t.Fatalf("store failure: %v", err)
	}
}

// TestLoadLegacyCatalog reads a chain of catalog format 1 (whole
// generations and the HEAD hint) whatever the hint says.
func TestLoadLegacyCatalog(t *testing.T) {
	ctx := context.Background()
	s := loadFixtureStore(t, fixtureDir)
	c := Open(s)
	load := func(name string) {
		t.Helper()
		got, err := c.LoadCatalog(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Generation != 2 {
			t.Fatalf("%s: got generation %d", name, got.Generation)
		}
	}
	load("with HEAD")
	s.set(CatalogHeadKey, []byte("1\n"))
	load("stale HEAD")
	s.set(CatalogHeadKey, []byte("9\n"))
	load("HEAD ahead")
	s.set(CatalogHeadKey, []byte("garbage"))
	load("garbage HEAD")
	s.Delete(ctx, CatalogHeadKey)
	load("without HEAD")
	orig := s.raw(CatalogKey(2))
	s.set(CatalogKey(2), []byte(`{"format_version":4}`))
	if _, err := c.LoadCatalog(ctx); !errcode.Is(err, errcode.FormatUnsupported) {
		t.Fatalf("future catalog version: %v", err)
	}
	s.set(CatalogKey(2), []byte(`{"format_version":`))
	if _, err := c.LoadCatalog(ctx); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("unparseable catalog: %v", err)
	}
	s.set(CatalogKey(2), orig)
	s.failGet = func(key string) error {
		if key == CatalogKey(2) {
			return errors.New("timeout")
		}
		return nil
	}
	if _, err := c.LoadCatalog(ctx); !errcode.Is(err, errcode.StoreUnreachable) {
		t.Fatalf("store failure: %v", err)
	}
}

func TestReadChunkDamage(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	ref := writeTestChunk(t, c, "attempt-1", "c1")
	h, body, err := c.ReadChunk(ctx, ref)
	if err != nil || h.Rows != 4 || int64(len(body)) != ref.RawSize {
		t.Fatalf("read: %+v %v", h, err)
	}
	orig := s.raw(ref.Key)

	flipped := []byte(string(orig))
	flipped[len(flipped)/2] ^= 1
	s.set(ref.Key, flipped)
	_, _, err = c.ReadChunk(ctx, ref)
	if !errcode.Is(err, errcode.ChunkCorrupt) || !strings.Contains(err.Error(), ref.Key) || !strings.Contains(err.Error(), ref.SHA256) {
		t.Fatalf("flipped byte: %v", err)
	}
	s.set(ref.Key, orig[:len(orig)-3])
	if _, _, err = c.ReadChunk(ctx, ref); !errcode.Is(err, errcode.ChunkCorrupt) || !strings.Contains(err.Error(), ref.Key) {
		t.Fatalf("truncated: %v", err)
	}
	s.set(ref.Key, append([]byte(string(orig)), 0))
	if _, _, err = c.ReadChunk(ctx, ref); !errcode.Is(err, errcode.ChunkCorrupt) {
		t.Fatalf("extended: %v", err)
	}
	s.set(ref.Key, orig)
	lying := ref
	lying.Rows = 5
	if _, _, err = c.ReadChunk(ctx, lying); !errcode.Is(err, errcode.ChunkCorrupt) {
		t.Fatalf("row count mismatch: %v", err)
	}
	s.Delete(ctx, ref.Key)
	if _, _, err = c.ReadChunk(ctx, ref); !errcode.Is(err, errcode.ChunkCorrupt) || !strings.Contains(err.Error(), ref.Key) {
		t.Fatalf("missing: %v", err)
	}
	s.failGet = func(string) error { return errors.New("no route to host") }
	if _, _, err = c.ReadChunk(ctx, ref); !errcode.Is(err, errcode.StoreUnreachable) {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestReadChunkDecodeErrorNamesKey(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	data := buildChunk(t, sampleRows())
	data[4] = 9 // future version, stored with a matching digest
	ref, err := c.WriteChunk(ctx, ChunkPlace{Key: DataKey("a", "future")}, data, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.ReadChunk(ctx, ref)
	if !errcode.Is(err, errcode.FormatUnsupported) || !strings.Contains(err.Error(), ref.Key) {
		t.Fatalf("got %v", err)
	}
}

func TestStopMarkers(t *testing.T) {
	ctx := context.Background()
	c := Open(newMemStore())
	if StopMarkerKey(RoleProducer, "") != "control/stop-producer" || StopMarkerKey(RoleBroker, "east") != "control/stop-broker-east" {
		t.Fatal("marker keys")
	}
	if _, ok, err := c.GetStopMarker(ctx, RoleBroker, "east"); ok || err != nil {
		t.Fatalf("absent marker: %v %v", ok, err)
	}
	if err := c.PutStopMarker(ctx, RoleBroker, "east", StopMarker{RequestedAt: testTime, By: "ops", Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	m, ok, err := c.GetStopMarker(ctx, RoleBroker, "east")
	if !ok || err != nil || m.Reason != "maintenance" || !m.RequestedAt.Equal(NormalizeTime(testTime)) {
		t.Fatalf("marker: %+v %v %v", m, ok, err)
	}
	if _, ok, _ := c.GetStopMarker(ctx, RoleBroker, "west"); ok {
		t.Fatal("marker leaked to another stream")
	}
	if err := c.ClearStopMarker(ctx, RoleBroker, "east"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.GetStopMarker(ctx, RoleBroker, "east"); ok {
		t.Fatal("marker not cleared")
	}
}

// TestFileStore runs the main flow against the real file:// store.
func TestFileStore(t *testing.T) {
	ctx := context.Background()
	s, err := blobstore.Open(ctx, "file://"+t.TempDir(), blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := Open(s)
	want := buildChain(t, c)
	got, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != want.Generation {
		t.Fatalf("generation %d, want %d", got.Generation, want.Generation)
	}
	if err := c.Verify(ctx, got, ""); err != nil {
		t.Fatal(err)
	}
	m, err := c.GetManifest(ctx, got.Segments[0].Full.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadChunk(ctx, m.Tables[0].Chunks[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitCatalog(ctx, want); !errcode.Is(err, errcode.CatalogConflict) && err != nil {
		t.Fatalf("recommit: %v", err)
	}
	stale := want.Next()
	stale.Generation = 3
	if err := c.CommitCatalog(ctx, stale); !errcode.Is(err, errcode.CatalogConflict) {
		t.Fatalf("stale writer: %v", err)
	}
	if err := s.Delete(ctx, CatalogHeadKey); err != nil {
		t.Fatal(err)
	}
	if got, err := c.LoadCatalog(ctx); err != nil || got.Generation != want.Generation {
		t.Fatalf("without HEAD: %v", err)
	}
}
