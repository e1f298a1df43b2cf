package chain

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// synthID is the n-th synthetic link ID (40 hex digits).
func synthID(n int) string { return fmt.Sprintf("%040x", n) }

var synthStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// synthIncremental is a sealed-looking incremental after tip: enough for
// the catalog, which never reads the manifest.
func synthIncremental(tip Link, n int) *Manifest {
	end, _ := ParseLSN(tip.EndPosition)
	return &Manifest{ID: synthID(n), Kind: KindIncremental, Parent: tip.ID, Source: testSource,
		StartPosition: tip.EndPosition, EndPosition: FormatLSN(end + 0x1000),
		CreatedAt: synthStart.Add(time.Duration(n) * 2 * time.Second), Changes: 40, Transactions: 10}
}

// seedCatalog stores a chain of n links (one full, n-1 incrementals in one
// segment) as it stands after n generations: a checkpoint at generation n.
// Building it commit by commit would cost the history of its checkpoints,
// which is not what the benchmark measures.
func seedCatalog(tb testing.TB, c *Chain, n int) *Catalog {
	tb.Helper()
	full := Link{ID: synthID(1), Kind: KindFull, StartPosition: "0/1000", EndPosition: "0/1000", CreatedAt: synthStart, Rows: 1000}
	seg := Segment{Full: full, Incrementals: make([]Link, 0, n)}
	tip := full
	for i := 2; i <= n; i++ {
		tip = LinkFromManifest(synthIncremental(tip, i))
		seg.Incrementals = append(seg.Incrementals, tip)
	}
	cat := &Catalog{FormatVersion: CatalogFormatVersionCommits, ChainID: full.ID, Generation: int64(n), Source: testSource,
		Segments: []Segment{seg}, tail: new(atomic.Bool)}
	hash := sha256Hex([]byte("seed"))
	if err := c.writeFence(context.Background(), 1); err != nil {
		tb.Fatal(err)
	}
	pages := &pageSet{}
	if err := c.writeCheckpoint(context.Background(), cat, hash, pages); err != nil {
		tb.Fatal(err)
	}
	cat.stored = newStored(hash, false, cat.Generation, 0, 0, pages)
	cat.stored.verified.Store(time.Now().UnixNano())
	return cat
}

// commitOne appends one synthetic incremental to cat and commits it.
func commitOne(tb testing.TB, c *Chain, cat *Catalog) *Catalog {
	next := cat.Next()
	if err := next.AppendIncremental(synthIncremental(cat.Tip(), int(next.Generation)+1)); err != nil {
		tb.Fatal(err)
	}
	if err := c.CommitCatalog(context.Background(), next); err != nil {
		tb.Fatal(err)
	}
	return next
}

// catalogFootprint sums the catalog's stored objects.
func catalogFootprint(s *memStore) (objects int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.objects {
		if strings.HasPrefix(k, CatalogPrefix) {
			objects++
			bytes += int64(len(v))
		}
	}
	return objects, bytes
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkCatalog measures the catalog at 1,000, 10,000 and 100,000 links:
// a commit (median, and mean with the checkpoints it writes every
// DefaultCheckpointPolicy.Every commits; requests and bytes written per
// commit), an empty broker poll (time,
// requests, bytes), LoadCatalog, and the catalog's stored bytes and object
// count after expiry with DefaultCatalogRetention once every object is old
// enough. Run it with a fixed count, for example
//
//	go test ./internal/chain/ -run '^$' -bench 'BenchmarkCatalog$' -benchtime 1000x
func BenchmarkCatalog(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("links=%d", n), func(b *testing.B) { benchCatalog(b, n) })
	}
}

func benchCatalog(b *testing.B, n int) {
	ctx := context.Background()
	mem := newMemStore()
	rs := &requestStore{Store: mem}
	c := Open(rs)
	cat := seedCatalog(b, c, n)
	// One commit first: a catalog just loaded holds its links without spare
	// capacity, so its first append copies them (once per load).
	cat = commitOne(b, c, cat)
	commits := make([]time.Duration, 0, b.N)
	rs.reset()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cat = commitOne(b, c, cat)
		commits = append(commits, time.Since(t0))
	}
	mean := time.Since(start) / time.Duration(b.N)
	b.StopTimer()
	commitReq := float64(rs.requests()) / float64(b.N)
	commitWritten := float64(rs.written.Load()) / float64(b.N)

	t0 := time.Now()
	reader, err := c.LoadCatalog(ctx)
	if err != nil {
		b.Fatal(err)
	}
	load := time.Since(t0)
	if reader.Generation != cat.Generation {
		b.Fatalf("loaded generation %d, committed %d", reader.Generation, cat.Generation)
	}
	const polls = 200
	rs.reset()
	t0 = time.Now()
	for range polls {
		if got, err := c.Refresh(ctx, reader); err != nil || got != reader {
			b.Fatalf("poll: %v", err)
		}
	}
	poll := time.Since(t0) / polls
	pollReq, pollBytes := float64(rs.requests())/polls, float64(rs.bytes.Load())/polls

	if _, err := c.ExpireCatalog(ctx, DefaultCatalogRetention, time.Now().Add(DefaultCatalogRetention.Age+time.Hour)); err != nil {
		b.Fatal(err)
	}
	objects, stored := catalogFootprint(mem)
	b.ReportMetric(float64(median(commits).Microseconds()), "commit-p50-µs")
	b.ReportMetric(float64(mean.Microseconds()), "commit-mean-µs")
	b.ReportMetric(commitReq, "commit-requests")
	b.ReportMetric(commitWritten, "commit-written-bytes")
	b.ReportMetric(float64(poll.Nanoseconds()), "poll-ns")
	b.ReportMetric(pollReq, "poll-requests")
	b.ReportMetric(pollBytes, "poll-bytes")
	b.ReportMetric(float64(load.Microseconds()), "load-µs")
	b.ReportMetric(float64(stored), "stored-bytes")
	b.ReportMetric(float64(objects), "stored-objects")
	b.Logf("links=%d commits=%d: commit p50 %v mean %v, %.1f requests and %.0f bytes written per commit (checkpoints included); empty poll %v, %.0f requests, %.0f bytes; LoadCatalog %v; catalog %d objects, %d bytes",
		n, b.N, median(commits), mean, commitReq, commitWritten, poll, pollReq, pollBytes, load, objects, stored)
}

// delayStore adds a fixed latency to every read and listing, standing for
// a remote store.
type delayStore struct {
	blobstore.Store
	delay time.Duration
}

func (s *delayStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	time.Sleep(s.delay)
	return s.Store.Get(ctx, key)
}

func (s *delayStore) List(ctx context.Context, prefix string) ([]blobstore.ObjectInfo, error) {
	time.Sleep(s.delay)
	return s.Store.List(ctx, prefix)
}

// BenchmarkCheckpointEvery is how DefaultCheckpointPolicy.Every was chosen:
// at 10,500 links, for several intervals, the mean commit (checkpoints
// included), the checkpoint bytes written per commit, and the worst
// LoadCatalog (the most commits after a checkpoint) with 2 ms per request.
//
//	go test ./internal/chain/ -run '^$' -bench BenchmarkCheckpointEvery -benchtime 1x
func BenchmarkCheckpointEvery(b *testing.B) {
	const n = 10000 + pageLinks/2 // half a page inline: a checkpoint of average size
	for _, every := range []int64{10, 30, 100, 300, 1000} {
		b.Run(fmt.Sprintf("every=%d", every), func(b *testing.B) {
			ctx := context.Background()
			mem := newMemStore()
			c := Open(mem)
			c.SetCheckpointPolicy(CheckpointPolicy{Every: every, Bytes: 1 << 40})
			cat := seedCatalog(b, c, n)
			runs := int(every) // one whole interval
			cpBefore := checkpointBytes(mem)
			t0 := time.Now()
			for range runs {
				cat = commitOne(b, c, cat)
			}
			mean := time.Since(t0) / time.Duration(runs)
			perCommit := float64(checkpointBytes(mem)-cpBefore) / float64(runs) // pages included
			// The worst load: every-1 commits after the newest checkpoint.
			for range every - 1 {
				cat = commitOne(b, c, cat)
			}
			slow := Open(&delayStore{Store: mem, delay: 2 * time.Millisecond})
			t0 = time.Now()
			if _, err := slow.LoadCatalog(ctx); err != nil {
				b.Fatal(err)
			}
			load := time.Since(t0)
			b.ReportMetric(float64(mean.Microseconds()), "commit-mean-µs")
			b.ReportMetric(perCommit, "checkpoint-bytes/commit")
			b.ReportMetric(float64(load.Milliseconds()), "worst-load-ms@2ms")
			b.Logf("every=%d: commit mean %v, checkpoint bytes per commit %.0f, worst LoadCatalog at 2 ms/request %v", every, mean, perCommit, load)
		})
	}
}

// checkpointBytes sums the stored checkpoints and their pages.
func checkpointBytes(s *memStore) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k, v := range s.objects {
		if strings.HasPrefix(k, checkpointPrefix) || strings.HasPrefix(k, pagePrefix) {
			n += int64(len(v))
		}
	}
	return n
}

// byteMeter sums what a metered store reads.
type byteMeter struct{ read, fetches atomic.Int64 }

func (m *byteMeter) Wrote(string, int64) {}
func (m *byteMeter) Fetched(_ string, n int64, _ time.Duration) {
	m.read.Add(n)
	m.fetches.Add(1)
}

// TestBrokerPollsUnchangedChain: a broker polling an unchanged chain of
// 100,000 links once a second for a minute (the wait loop's reads: the
// catalog, then its stream's and every broker's stop marker) reads less
// than 1 MB from the store, counted through the metered store.
func TestBrokerPollsUnchangedChain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a chain of 100,000 links")
	}
	ctx := context.Background()
	mem := newMemStore()
	seedCatalog(t, Open(mem), 100000)
	m := &byteMeter{}
	c := Open(blobstore.Metered(mem, m))
	cat, err := c.LoadCatalog(ctx) // the broker's first load, before it polls
	if err != nil {
		t.Fatal(err)
	}
	first := m.read.Load()
	m.read.Store(0)
	m.fetches.Store(0)
	for range 60 {
		got, err := c.Refresh(ctx, cat)
		if err != nil || got.Generation != cat.Generation {
			t.Fatalf("poll: %v", err)
		}
		cat = got
		for _, stream := range []string{"s1", ""} {
			if _, _, err := c.GetStopMarker(ctx, RoleBroker, stream); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := m.read.Load(); n >= 1<<20 {
		t.Fatalf("a minute of polls read %d bytes", n)
	}
	t.Logf("first load %d bytes; a minute of polls %d bytes in %d objects read (every other read answered not-found)", first, m.read.Load(), m.fetches.Load())
}
