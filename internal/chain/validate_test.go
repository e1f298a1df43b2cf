package chain

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

func TestValidateCatalogCatchesBrokenLinks(t *testing.T) {
	c := Open(newMemStore())
	good := buildChain(t, c)
	if err := ValidateCatalog(good); err != nil {
		t.Fatal(err)
	}
	const other = "0123456789abcdef0123456789abcdef01234567"
	cases := []struct {
		name   string
		mutate func(cat *Catalog)
		want   string // substring of the message
	}{
		{"first full has a parent", func(c *Catalog) { c.Segments[0].Full.Parent = other }, "first full"},
		{"incremental parent skips a link", func(c *Catalog) {
			c.Segments[0].Incrementals[1].Parent = c.Segments[0].Full.ID
		}, "segment 0 incremental 1"},
		{"incremental start is not parent's end", func(c *Catalog) {
			c.Segments[0].Incrementals[0].StartPosition = "0/1001"
		}, "start position"},
		{"rotated full's parent is not the previous tip", func(c *Catalog) {
			c.Segments[1].Full.Parent = c.Segments[0].Full.ID
		}, "segment 1 full"},
		{"full start differs from end", func(c *Catalog) { c.Segments[1].Full.StartPosition = "0/3000" }, "differs"},
		{"last segment capped", func(c *Catalog) { c.Segments[1].Capped = true }, "capped"},
		{"middle segment uncapped", func(c *Catalog) { c.Segments[0].Capped = false }, "not capped"},
		{"duplicate ID", func(c *Catalog) {
			c.Segments[1].Incrementals[0].ID = c.Segments[0].Incrementals[0].ID
		}, "twice"},
		{"wrong kind", func(c *Catalog) { c.Segments[0].Incrementals[0].Kind = KindFull }, "kind"},
		{"malformed ID", func(c *Catalog) { c.Segments[0].Incrementals[0].ID = "XYZ" }, "not a manifest ID"},
		{"chain ID is not a full", func(c *Catalog) { c.ChainID = other }, "no parent"},
		{"no segments", func(c *Catalog) { c.Segments = nil }, "no segments"},
		{"missing end position", func(c *Catalog) { c.Segments[1].Incrementals[0].EndPosition = "" }, "no end position"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cat := deepNext(good)
			tc.mutate(cat)
			err := ValidateCatalog(cat)
			if !errcode.Is(err, errcode.ChainInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ChainInvalid mentioning %q", err, tc.want)
			}
			if err := c.CommitCatalog(context.Background(), cat); !errcode.Is(err, errcode.ChainInvalid) {
				t.Fatalf("invalid catalog committed: %v", err)
			}
		})
	}
	ver := good.Next()
	ver.FormatVersion = CatalogFormatVersionCommits + 1
	if err := ValidateCatalog(ver); !errcode.Is(err, errcode.FormatUnsupported) {
		t.Fatalf("version: %v", err)
	}
	// Retention pruned the first segment: the first remaining full keeps
	// its parent and the chain ID still names the pruned first full.
	pruned := good.Next()
	pruned.Segments = pruned.Segments[1:]
	if err := ValidateCatalog(pruned); err != nil {
		t.Fatalf("pruned catalog: %v", err)
	}
}

func TestCatalogHelpers(t *testing.T) {
	c := Open(newMemStore())
	cat := buildChain(t, c)
	links := cat.Links()
	if len(links) != 5 || links[0].ID != cat.ChainID || links[4] != cat.Tip() {
		t.Fatalf("links %d", len(links))
	}
	if l, seg, ok := cat.Find(links[3].ID); !ok || seg != 1 || l.Kind != KindFull {
		t.Fatalf("find: %v %d %v", l, seg, ok)
	}
	if _, _, ok := cat.Find("nope"); ok {
		t.Fatal("found a missing link")
	}
	path, err := cat.Path(links[2].ID)
	if err != nil || len(path) != 3 || path[0].ID != links[0].ID {
		t.Fatalf("path: %v %v", path, err)
	}
	if path, err := cat.Path(links[4].ID); err != nil || len(path) != 2 || path[0].ID != links[3].ID {
		t.Fatalf("path across rotation: %v %v", path, err)
	}
	if _, err := cat.Path("nope"); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("path to missing link: %v", err)
	}
	// Next shares links but never lets one copy's appends show in another.
	next, other := cat.Next(), cat.Next()
	if next.Generation != cat.Generation+1 {
		t.Fatal("Next keeps the generation")
	}
	m1 := putIncremental(t, c, cat.Tip(), "0/5000", 21)
	m2 := putIncremental(t, c, cat.Tip(), "0/5100", 22)
	if err := next.AppendIncremental(m1); err != nil {
		t.Fatal(err)
	}
	if err := other.AppendIncremental(m2); err != nil {
		t.Fatal(err)
	}
	if next.Tip().ID != m1.ID || other.Tip().ID != m2.ID || cat.Tip().ID == m1.ID || cat.Tip().ID == m2.ID {
		t.Fatal("appends to one copy show in another")
	}
	after := next.Next()
	if err := after.AppendIncremental(putIncremental(t, c, LinkFromManifest(m1), "0/5200", 23)); err != nil {
		t.Fatal(err)
	}
	if next.Tip().ID != m1.ID || other.Tip().ID != m2.ID {
		t.Fatal("appends to a copy's copy show in the copy")
	}
	// Appends that do not chain are refused and change nothing.
	tip := cat.Tip()
	m := putIncremental(t, c, tip, "0/5000", 20)
	bad := *m
	bad.Parent = links[0].ID
	bad.ID = ""
	if err := bad.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := cat.Next().AppendIncremental(&bad); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("wrong parent: %v", err)
	}
	bad = *m
	bad.StartPosition = "0/4001"
	bad.ID = ""
	if err := bad.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := cat.Next().AppendIncremental(&bad); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("wrong start: %v", err)
	}
	capped := cat.Next()
	capped.Segments[len(capped.Segments)-1].Capped = true
	if err := capped.AppendIncremental(m); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("append to capped: %v", err)
	}
	if err := cat.Next().Rotate(m); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("rotate to an incremental: %v", err)
	}
	ok := cat.Next()
	if err := ok.AppendIncremental(m); err != nil {
		t.Fatal(err)
	}
	if err := ok.AppendIncremental(m); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("duplicate append: %v", err)
	}
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	cat := buildChain(t, c)
	if err := c.Verify(ctx, cat, ""); err != nil {
		t.Fatal(err)
	}
	links := cat.Links()
	if err := c.Verify(ctx, cat, links[2].ID); err != nil {
		t.Fatal(err)
	}
	if err := c.VerifyRange(ctx, cat, links[2].ID, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.VerifyRange(ctx, cat, links[3].ID, links[1].ID); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("reversed range: %v", err)
	}
	if err := c.Verify(ctx, cat, "0123456789abcdef0123456789abcdef01234567"); !errcode.Is(err, errcode.ChainInvalid) {
		t.Fatalf("unknown through: %v", err)
	}

	// The catalog disagrees with a manifest.
	lying := deepNext(cat)
	lying.Segments[0].Incrementals[0].Changes++
	if err := c.Verify(ctx, lying, ""); !errcode.Is(err, errcode.ChainInvalid) || !strings.Contains(err.Error(), links[1].ID) {
		t.Fatalf("count mismatch: %v", err)
	}
	other := cat.Next()
	other.Source.SystemID = "999"
	if err := c.Verify(ctx, other, ""); !errcode.Is(err, errcode.ChainInvalid) || !strings.Contains(err.Error(), "source") {
		t.Fatalf("source mismatch: %v", err)
	}

	// A manifest edited in the store is caught by recomputing its ID, even
	// when the edit is only verified partway (through an earlier link it is not).
	key := ManifestKey(links[2].ID)
	orig := s.raw(key)
	s.set(key, []byte(strings.Replace(string(orig), `"transactions":1`, `"transactions":3`, 1)))
	if err := c.Verify(ctx, cat, ""); !errcode.Is(err, errcode.ManifestInvalid) || !strings.Contains(err.Error(), links[2].ID) {
		t.Fatalf("edited manifest: %v", err)
	}
	if err := c.Verify(ctx, cat, links[1].ID); err != nil {
		t.Fatalf("verify before the edited link: %v", err)
	}
	s.Delete(ctx, key)
	if err := c.Verify(ctx, cat, ""); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("missing manifest: %v", err)
	}
}

func TestValidateManifest(t *testing.T) {
	c := Open(newMemStore())
	full := putFull(t, c, "", "0/1000", 0)
	inc := putIncremental(t, c, LinkFromManifest(full), "0/2000", 1)
	cases := []struct {
		name   string
		base   *Manifest
		mutate func(m *Manifest)
	}{
		{"table rows disagree with chunks", full, func(m *Manifest) { m.Tables[0].Rows++; m.Rows++ }},
		{"total rows disagree", full, func(m *Manifest) { m.Rows++ }},
		{"full without schema", full, func(m *Manifest) { m.Schema = nil }},
		{"full with change chunks", full, func(m *Manifest) { m.Chunks = inc.Chunks }},
		{"full start differs", full, func(m *Manifest) { m.StartPosition = "0/1" }},
		{"changes disagree with chunks", inc, func(m *Manifest) { m.Changes++ }},
		{"incremental without parent", inc, func(m *Manifest) { m.Parent = "" }},
		{"bad digest", inc, func(m *Manifest) { m.Chunks[0].SHA256 = "abc" }},
		{"bad chunk key", inc, func(m *Manifest) { m.Chunks[0].Key = "../x" }},
		{"duplicate chunk", inc, func(m *Manifest) { m.Chunks = append(m.Chunks, m.Chunks[0]); m.Changes *= 2 }},
		{"unknown kind", inc, func(m *Manifest) { m.Kind = "diff" }},
	}
	for _, tc := range cases {
		m := *tc.base
		m.Tables = append([]TableData(nil), m.Tables...)
		for i := range m.Tables {
			m.Tables[i].Chunks = append([]ChunkRef(nil), m.Tables[i].Chunks...)
		}
		m.Chunks = append([]ChunkRef(nil), m.Chunks...)
		tc.mutate(&m)
		if err := ValidateManifest(&m); !errcode.Is(err, errcode.ManifestInvalid) {
			t.Errorf("%s: got %v", tc.name, err)
		}
	}
}

// deepNext is Next with every link copied, for tests that change links in
// place (Next shares them).
func deepNext(cat *Catalog) *Catalog {
	next := cat.Next()
	for i := range next.Segments {
		next.Segments[i].Incrementals = append([]Link(nil), next.Segments[i].Incrementals...)
	}
	return next
}
