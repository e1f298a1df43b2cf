package chain

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Regression tests for what the fuzzers of readfuzz_test.go found, each
// with the input that showed it.

// storeLayout stores the layout l (resealed, so its ID matches) and reads
// it back.
func storeLayout(t *testing.T, l *Layout) (*Layout, error) {
	t.Helper()
	if err := l.Seal(); err != nil {
		t.Fatal(err)
	}
	s := newMemStore()
	s.objects[LayoutKey(l.ID)] = encodeLayout(t, l)
	return Open(s).GetLayout(context.Background(), l.ID)
}

// A layout's counts are read from the store: sums that wrap around must
// not let a link's records run outside the chunks, or Apply hands readers
// spans of negative length (FuzzGetLayout: skip and records of 2^63-1 over
// one chunk of 4 records gave a span of -2^63+5 records).
func TestLayoutCountsThatOverflowAreRefused(t *testing.T) {
	const huge = int64(1<<63 - 1)
	digest := strings.Repeat("4", 64)
	chunk := func(key string, rows int64) ChunkRef {
		return ChunkRef{Key: key, SHA256: strings.Repeat("a", 64), Size: 1, Rows: rows}
	}
	for name, l := range map[string]*Layout{
		"skip and records wrap": {Segment: synthID(1), Chunks: []ChunkRef{chunk("data/x", 4)},
			Links: []LayoutLink{{ID: synthID(2), Skip: huge, Records: huge, Digest: digest}}},
		"chunk rows wrap": {Segment: synthID(1), Chunks: []ChunkRef{chunk("data/x", huge), chunk("data/y", huge)},
			Links: []LayoutLink{{ID: synthID(2), First: 1, Records: 1, Digest: digest}}},
		"skip past its first chunk": {Segment: synthID(1), Chunks: []ChunkRef{chunk("data/x", 2), chunk("data/y", 4)},
			Links: []LayoutLink{{ID: synthID(2), Skip: 3, Records: 1, Digest: digest}}},
		"rewritten counts negative": {Segment: synthID(1), Chunks: []ChunkRef{chunk("data/x", 4)},
			Links: []LayoutLink{{ID: synthID(2), Records: 0, Digest: digest, Rewritten: true, Changes: -2, Transactions: 1}}},
		"rewritten counts wrap": {Segment: synthID(1), Chunks: []ChunkRef{chunk("data/x", 4)},
			Links: []LayoutLink{{ID: synthID(2), Records: 2, Digest: digest, Rewritten: true, Changes: 2 - 2*(1<<62), Transactions: 1 << 62}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := storeLayout(t, l)
			if !errcode.Is(err, errcode.ManifestInvalid) {
				t.Fatalf("got %v, want %s", err, errcode.ManifestInvalid)
			}
		})
	}
	// What a compaction writes still reads, and its spans add up.
	l, err := storeLayout(t, sampleLayout(t))
	if err != nil {
		t.Fatal(err)
	}
	m := l.Apply(&Manifest{ID: synthID(3), Kind: KindIncremental})
	if len(m.Chunks) != 2 || m.Chunks[0].Rows+m.Chunks[1].Rows != 6 || m.Chunks[0].Span.Skip != 2 {
		t.Fatalf("spans %+v", m.Chunks)
	}
}

// pageCountingStore counts the reads of checkpoint pages.
type pageCountingStore struct {
	*memStore
	pageGets atomic.Int64
}

func (s *pageCountingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.HasPrefix(key, pagePrefix) {
		s.pageGets.Add(1)
	}
	return s.memStore.Get(ctx, key)
}

// checkpointNaming returns the format 3 fixture's checkpoint with its one
// page reference replaced by refs, and a store holding the fixture's page.
func checkpointNaming(t *testing.T, refs []string) *pageCountingStore {
	t.Helper()
	objs := fixtureObjects(t, catalogFixtureDir)
	s := &pageCountingStore{memStore: newMemStore()}
	for k, v := range objs {
		if strings.HasPrefix(k, pagePrefix) {
			s.objects[k] = v
		}
	}
	for k, v := range objs {
		if !strings.HasPrefix(k, checkpointPrefix) {
			continue
		}
		var page string
		for pk := range objs {
			if strings.HasPrefix(pk, pagePrefix) {
				page = strings.TrimSuffix(strings.TrimPrefix(pk, pagePrefix), ".json")
			}
		}
		old := `[{"sha256":"` + page + `","links":1000}]`
		if !bytes.Contains(v, []byte(old)) {
			t.Fatalf("fixture checkpoint does not name its page as expected")
		}
		var list []string
		for _, r := range refs {
			if r == "" {
				r = page
			}
			list = append(list, `{"sha256":"`+r+`","links":1000}`)
		}
		s.objects[k] = bytes.Replace(v, []byte(old), []byte("["+strings.Join(list, ",")+"]"), 1)
	}
	return s
}

// A checkpoint naming one page many times read and decoded the page once
// per naming (FuzzLoadCheckpoint: 2,000 namings of the fixture's page in a
// checkpoint of 182 kB allocated 3.6 GB) before validation refused the
// links it repeated. It is refused before any page is read.
func TestCheckpointNamingAPageTwiceIsRefused(t *testing.T) {
	s := checkpointNaming(t, make([]string, 2000)) // "" is the fixture's page
	var err error
	got := allocated(func() { _, err = Open(s).LoadCatalog(context.Background()) })
	if !errcode.Is(err, errcode.ChainInvalid) || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("got %v, want %s naming the page twice", err, errcode.ChainInvalid)
	}
	if n := s.pageGets.Load(); n != 0 {
		t.Fatalf("%d pages read before the checkpoint was refused", n)
	}
	if got > 16<<20 {
		t.Fatalf("refusing the checkpoint allocated %d bytes", got)
	}
}

// A checkpoint naming many missing pages read every one of them (and joined
// an error per page) before failing; the first failure now stops the reads.
func TestCheckpointStopsReadingPagesAtTheFirstFailure(t *testing.T) {
	var refs []string
	for i := range 500 {
		refs = append(refs, sha256Hex([]byte{byte(i), byte(i >> 8)}))
	}
	s := checkpointNaming(t, refs)
	_, err := Open(s).LoadCatalog(context.Background())
	if !errcode.Is(err, errcode.ChainInvalid) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("got %v, want %s naming a missing page", err, errcode.ChainInvalid)
	}
	if n := s.pageGets.Load(); n > 2*pageReaders {
		t.Fatalf("%d page reads after the first failure, want at most %d", n, 2*pageReaders)
	}
	// A checkpoint naming its page once still loads.
	if _, err := Open(checkpointNaming(t, []string{""})).LoadCatalog(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A chunk reference's size, read from a manifest or layout, sized the read
// buffer before any byte arrived (FuzzReadChunkRef: a 10-byte object under
// a reference declaring 2 GiB allocated 2 GiB). It sizes it up to
// chunkPresize only.
func TestChunkReferenceSizeDoesNotSizeTheBuffer(t *testing.T) {
	s := newMemStore()
	data := []byte("0123456789")
	s.objects["data/a/0001.slck"] = data
	c := Open(s)
	for _, size := range []int64{2 * MaxChunkRawSize, MaxChunkRawSize, chunkPresize + 1} {
		ref := ChunkRef{Key: "data/a/0001.slck", SHA256: sha256Hex(data), Size: size}
		var err error
		got := allocated(func() { _, err = c.readChunkBytes(context.Background(), ref) })
		if !errcode.Is(err, errcode.ChunkCorrupt) {
			t.Fatalf("size %d: got %v, want %s", size, err, errcode.ChunkCorrupt)
		}
		if got > chunkPresize+1<<20 {
			t.Fatalf("size %d: reading a 10-byte object allocated %d bytes", size, got)
		}
	}
	// A chunk larger than chunkPresize still reads whole.
	big := bytes.Repeat([]byte{7}, chunkPresize+12345)
	s.objects["data/a/0002.slck"] = big
	got, err := c.readChunkBytes(context.Background(), ChunkRef{Key: "data/a/0002.slck", Size: int64(len(big))})
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("big chunk: %d bytes, %v", len(got), err)
	}
}
