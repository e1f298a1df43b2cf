package compact

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
)

var updateFixtures = flag.Bool("update-fixtures", false, "write missing frozen fixtures (never over an existing one)")

// fixtureDir holds a chain written once, as a store root: a segment
// compacted smartly, one compacted plainly (catalog format 2, layout format
// 1), and an open segment, with every link's records as readers
// see them in records.txt. TestFrozenCompactedChain reads it forever.
const fixtureDir = "testdata/layout-v1"

// TestWriteCompactedFixture writes fixtureDir; it runs only with
// -update-fixtures and never over an existing directory:
//
//	go test ./internal/compact/ -run TestWriteCompactedFixture -update-fixtures
func TestWriteCompactedFixture(t *testing.T) {
	if !*updateFixtures {
		t.Skip("run with -update-fixtures to write missing fixtures")
	}
	if _, err := os.Stat(fixtureDir); err == nil {
		t.Fatalf("%s exists and is frozen; a new format version gets a new directory", fixtureDir)
	}
	ctx := context.Background()
	root := t.TempDir()
	store, err := blobstore.Open(ctx, "file://"+root, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := chain.Open(store)
	b := chaintest.NewBuilder(t, ch, t0)
	b.PerChunk = 3
	now := func() time.Time { return b.Now }
	segment := func(s int) {
		for i := 0; i < 3; i++ {
			id := 10*s + 2*i
			b.Incremental(append(b.Txn(chaintest.Insert(id, "a"), chaintest.Update(id, "b")), b.Txn(chaintest.Insert(id+1, "c"), chaintest.Delete(id))...))
		}
	}
	// Segment 0 is compacted smartly while it is the only capped one, then
	// segment 1 plainly (segment 0 is done).
	segment(0)
	b.Rotate()
	segment(1)
	if _, err := Compact(ctx, ch, Options{Smart: true, ChunkBytes: 300, AttemptID: "fixture-smart", Now: now}); err != nil {
		t.Fatal(err)
	}
	b.Reload()
	b.Rotate()
	segment(2)
	if _, err := Compact(ctx, ch, Options{ChunkBytes: 300, AttemptID: "fixture-plain", Now: now}); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for id, recs := range recordsOf(t, ch) {
		for _, r := range recs {
			lines = append(lines, id+" "+r)
		}
	}
	if err := os.MkdirAll(filepath.Dir(fixtureDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", root, fixtureDir).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(fixtureDir, "records.txt"), []byte(strings.Join(sortLines(lines), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sortLines(lines []string) []string {
	out := append([]string(nil), lines...)
	// Records keep their order within a link; links sort by ID (stable).
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && linkOf(out[j]) < linkOf(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func linkOf(line string) string { return strings.SplitN(line, " ", 2)[0] }

// TestFrozenCompactedChain reads the frozen compacted chain: the catalog
// (format 2) and its layouts verify, every link's records read back as
// they were written, the smart segment's (0) incrementals record no apply
// identities, and the chain passes the severed-transaction check.
func TestFrozenCompactedChain(t *testing.T) {
	ctx := context.Background()
	abs, err := filepath.Abs(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	store, err := blobstore.Open(ctx, "file://"+abs, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := chain.Open(store)
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cat.FormatVersion != chain.CatalogFormatVersionLayouts || len(cat.Segments) != 3 || cat.Segments[0].Layout == "" || cat.Segments[1].Layout == "" || cat.Segments[2].Layout != "" {
		t.Fatalf("catalog: version %d, %d segments", cat.FormatVersion, len(cat.Segments))
	}
	if err := ch.Verify(ctx, cat, ""); err != nil {
		t.Fatal(err)
	}
	if f, err := ch.SeveredTransactions(ctx, cat, nil); err != nil || len(f) != 0 {
		t.Fatalf("severed: %v %v", f, err)
	}
	want, err := os.ReadFile(filepath.Join(fixtureDir, "records.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for id, recs := range recordsOf(t, ch) {
		for _, r := range recs {
			lines = append(lines, id+" "+r)
		}
	}
	if got := strings.Join(sortLines(lines), "\n") + "\n"; got != string(want) {
		t.Fatalf("records differ from the frozen ones:\n%s\nwant:\n%s", got, want)
	}
	for i, seg := range cat.Segments[:2] {
		for _, l := range seg.Incrementals {
			m, err := ch.LinkManifest(ctx, cat, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			if m.ApplyIdentity != (i == 1) {
				t.Fatalf("segment %d link %s: apply identity %v", i, l.ID, m.ApplyIdentity)
			}
		}
	}
}
