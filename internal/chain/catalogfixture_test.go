package chain

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// catalogFixtureDir holds a frozen chain catalog of format 3 (commits,
// checkpoint, a page, the fence): written once by
//
//	go test ./internal/chain/ -run TestWriteCatalogFixtureV3 -update-fixtures
//
// and read by TestFrozenCatalogV3 forever after. Only catalog/ is stored:
// the catalog never reads the manifests its links name.
const catalogFixtureDir = "testdata/v3-catalog"

// catalogFixtureLayout is the layout the fixture's compaction names.
var catalogFixtureLayout = strings.Repeat("c0", 20)

func TestWriteCatalogFixtureV3(t *testing.T) {
	if !*updateFixtures {
		t.Skip("run with -update-fixtures to write missing fixtures")
	}
	if _, err := os.Stat(catalogFixtureDir); err == nil {
		t.Fatalf("%s exists and is frozen; a new format version gets a new directory", catalogFixtureDir)
	}
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	// A checkpoint at generation 1003: one segment, a page and two links inline.
	cat := seedCatalog(t, c, 1003)
	cat = commitOne(t, c, cat) // 1004: an incremental appended
	rot := cat.Next()          // 1005: a rotation
	if err := rot.Rotate(&Manifest{ID: synthID(1 << 20), Kind: KindFull, Parent: cat.Tip().ID, Source: testSource,
		StartPosition: cat.Tip().EndPosition, EndPosition: cat.Tip().EndPosition, CreatedAt: synthStart}); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitCatalog(ctx, rot); err != nil {
		t.Fatal(err)
	}
	cat = commitOne(t, c, rot) // 1006: an incremental in the new segment
	lay := cat.Next()          // 1007: the first segment compacted
	lay.Segments[0].Layout = catalogFixtureLayout
	if err := c.CommitCatalog(ctx, lay); err != nil {
		t.Fatal(err)
	}
	for k, v := range s.objects {
		if !strings.HasPrefix(k, CatalogPrefix) {
			continue
		}
		p := filepath.Join(catalogFixtureDir, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, v, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFrozenCatalogV3(t *testing.T) {
	ctx := context.Background()
	s := loadFixtureStore(t, catalogFixtureDir)
	c := Open(s)
	cat, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cat.Generation != 1007 || cat.FormatVersion != CatalogFormatVersionCommits || len(cat.Segments) != 2 ||
		len(cat.Segments[0].Incrementals) != 1003 || !cat.Segments[0].Capped || cat.Segments[0].Layout != catalogFixtureLayout ||
		len(cat.Segments[1].Incrementals) != 1 || cat.ChainID != synthID(1) || cat.Source != testSource {
		t.Fatalf("catalog: generation %d, %d segments", cat.Generation, len(cat.Segments))
	}
	if err := ValidateCatalog(cat); err != nil {
		t.Fatal(err)
	}
	// The chain goes on from the frozen state.
	if next := commitOne(t, c, cat); next.Generation != 1008 {
		t.Fatalf("commit after the fixture: generation %d", next.Generation)
	}
}
