package chain

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// The frozen fixtures in testdata/v1 are a tiny chain written once by
//
//	go test ./internal/chain/ -run TestWriteFixtures -update-fixtures
//
// and read by TestFrozenFixturesV1 forever after. The writer refuses to
// overwrite an existing fixture directory: a reader of a newer format must
// still read these bytes, so they are never regenerated.
var updateFixtures = flag.Bool("update-fixtures", false, "write testdata/v<N> fixtures if they do not exist yet")

const fixtureDir = "testdata/v1"

var fixtureSchema = &Schema{
	Tables: []Table{{
		Schema: "public", Name: "fixture",
		Columns: []Column{
			{Name: "id", Type: "bigint", TypeOID: 20, NotNull: true, Encoding: EncodingBinary},
			{Name: "name", Type: "text", TypeOID: 25, Encoding: EncodingBinary},
			{Name: "amount", Type: "numeric(20,4)", TypeOID: 1700, Encoding: EncodingBinary},
			{Name: "ratio", Type: "double precision", TypeOID: 701, Encoding: EncodingBinary},
			{Name: "at", Type: "timestamp with time zone", TypeOID: 1184, Encoding: EncodingBinary},
			{Name: "born", Type: "date", TypeOID: 1082, Encoding: EncodingBinary},
			{Name: "payload", Type: "bytea", TypeOID: 17, Encoding: EncodingBinary},
			{Name: "active", Type: "boolean", TypeOID: 16, Encoding: EncodingBinary},
			{Name: "doc", Type: "jsonb", TypeOID: 3802, Encoding: EncodingBinary},
			{Name: "tags", Type: "integer[]", TypeOID: 1007, Encoding: EncodingBinary},
			{Name: "uid", Type: "uuid", TypeOID: 2950, Encoding: EncodingBinary},
			{Name: "span", Type: "interval", TypeOID: 1186, Encoding: EncodingBinary},
			{Name: "mood", Type: "public.mood", Encoding: EncodingBinary},
			{Name: "spot", Type: "point", TypeOID: 600, Encoding: EncodingText},
		},
		PrimaryKey:      []string{"id"},
		PrimaryKeyName:  "fixture_pkey",
		ReplicaIdentity: "d",
	}},
	Enums: []Enum{{Schema: "public", Name: "mood", Labels: []string{"sad", "ok", "happy"}}},
	Sequences: []Sequence{{Schema: "public", Name: "fixture_id_seq", DataType: "bigint", Start: 1, Increment: 1,
		Min: 1, Max: math.MaxInt64, Cache: 1, LastValue: 4, IsCalled: true}},
}

// fixtureChunks returns the rows of the fixture's two chunks.
func fixtureChunks() [2][][][]byte {
	return [2][][][]byte{
		{
			{pgInt8(1), pgText("plain"), pgNumeric("1234.5600"), pgFloat8(0.25),
				pgTimestamptz(time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.UTC)), pgDate(1999, 12, 31),
				{0x00, 0x01, 0xfe, 0xff}, pgBool(true), pgJSONB(`{"a": [1, 2]}`), pgInt4Array([]*int32{i32(1), nil, i32(3)}),
				pgUUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), pgInterval(1500000, 2, 1), pgText("happy"), pgText("(1.5,-2)")},
			{pgInt8(1<<53 + 1), []byte{}, nil, pgFloat8(math.NaN()), nil, nil,
				[]byte{}, pgBool(false), nil, pgInt4Array(nil), nil, nil, nil, nil},
		},
		{
			{pgInt8(math.MaxInt64), pgText("日本語 ✓"), pgNumeric("-0.00001"), pgFloat8(math.Inf(1)),
				pgInt8(math.MaxInt64), pgInt4(math.MinInt32), nil, nil, pgJSONB(`"str"`), nil,
				pgUUID("00000000-0000-0000-0000-000000000000"), pgInterval(-1, -1, -1), pgText("sad"), []byte{}},
			{pgInt8(math.MinInt64), pgText("tab\tnewline\n"), pgNumeric("NaN"), pgFloat8(math.Inf(-1)),
				pgTimestamptz(time.Unix(0, 0)), pgDate(2000, 1, 1), []byte{0xff, 0xff, 0xff}, pgBool(true),
				pgJSONB(`{}`), pgInt4Array([]*int32{i32(math.MaxInt32), i32(math.MinInt32)}),
				pgUUID("ffffffff-ffff-ffff-ffff-ffffffffffff"), pgInterval(0, 0, 0), nil, nil},
		},
	}
}

// TestWriteFixtures writes the frozen fixture chain; it runs only with
// -update-fixtures and never over an existing directory.
func TestWriteFixtures(t *testing.T) {
	if !*updateFixtures {
		t.Skip("run with -update-fixtures to write missing fixtures")
	}
	if _, err := os.Stat(fixtureDir); err == nil {
		t.Fatalf("%s exists and is frozen; a new format version gets a new directory", fixtureDir)
	}
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	td := TableData{Table: "public.fixture"}
	for i, rows := range fixtureChunks() {
		b := NewRowBuilder(td.Table, len(fixtureSchema.Tables[0].Columns))
		for _, r := range rows {
			b.AppendRow(r)
		}
		data, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		ref, err := c.WriteChunk(ctx, ChunkPlace{Key: DataKey("fixture-full", []string{"0000-000001.slck", "0000-000002.slck"}[i])}, data, b.Rows(), int64(b.RawLen()))
		if err != nil {
			t.Fatal(err)
		}
		td.Chunks = append(td.Chunks, ref)
		td.Rows += ref.Rows
	}
	src := SourceInfo{Engine: "postgres", SystemID: "7480000000000000001", Database: "fixture", Slot: "sluice_fixture"}
	full := &Manifest{Kind: KindFull, Source: src, StartPosition: "0/1A2B3C8", EndPosition: "0/1A2B3C8",
		CreatedAt: time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC), Schema: fixtureSchema,
		Tables: []TableData{td}, Rows: td.Rows}
	if err := c.PutManifest(ctx, full); err != nil {
		t.Fatal(err)
	}
	cat := NewCatalog(full)
	if err := c.CommitCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	inc := &Manifest{Kind: KindIncremental, Parent: full.ID, Source: src, StartPosition: full.EndPosition,
		EndPosition: "0/1A2C000", CreatedAt: time.Date(2026, 5, 1, 12, 1, 0, 0, time.UTC), ApplyIdentity: true}
	if err := c.PutManifest(ctx, inc); err != nil {
		t.Fatal(err)
	}
	next := cat.Next()
	if err := next.AppendIncremental(inc); err != nil {
		t.Fatal(err)
	}
	if err := c.CommitCatalog(ctx, next); err != nil {
		t.Fatal(err)
	}
	for key, data := range s.objects {
		p := filepath.Join(fixtureDir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loadFixtureStore copies a fixture directory into a memory store, so the
// test does not depend on any store implementation.
func loadFixtureStore(t *testing.T, dir string) *memStore {
	t.Helper()
	s := newMemStore()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s.objects[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFrozenFixturesV1(t *testing.T) {
	ctx := context.Background()
	mem := loadFixtureStore(t, fixtureDir)
	file, err := blobstore.Open(ctx, "file://"+mustAbs(t, fixtureDir), blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []blobstore.Store{mem, file} {
		checkFixtureChain(t, Open(s))
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func checkFixtureChain(t *testing.T, c *Chain) {
	t.Helper()
	ctx := context.Background()
	cat, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cat.Generation != 2 || len(cat.Links()) != 2 || cat.Source.SystemID != "7480000000000000001" {
		t.Fatalf("catalog: generation %d, %d links", cat.Generation, len(cat.Links()))
	}
	if err := c.Verify(ctx, cat, ""); err != nil {
		t.Fatal(err)
	}
	full, err := c.GetManifest(ctx, cat.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	if full.Schema == nil || len(full.Schema.Tables[0].Columns) != 14 || full.Schema.Enums[0].Labels[2] != "happy" ||
		full.Schema.Sequences[0].Max != math.MaxInt64 || full.Rows != 4 || full.CreatedAt.Nanosecond() != 123456000 {
		t.Fatalf("full manifest: %+v", full)
	}
	inc, err := c.GetManifest(ctx, cat.Tip().ID)
	if err != nil {
		t.Fatal(err)
	}
	if inc.Kind != KindIncremental || !inc.ApplyIdentity || inc.StartPosition != "0/1A2B3C8" {
		t.Fatalf("incremental manifest: %+v", inc)
	}
	want := fixtureChunks()
	var got [][][]byte
	for i, ref := range full.Tables[0].Chunks {
		h, body, err := c.ReadChunk(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if h.Table != "public.fixture" || h.Columns != 14 || h.Rows != int64(len(want[i])) {
			t.Fatalf("chunk %d header %+v", i, h)
		}
		it := NewTupleIter(body, h.Columns)
		for it.Next() {
			row := make([][]byte, len(it.Values()))
			for j, v := range it.Values() {
				if v != nil {
					row[j] = append([]byte{}, v...)
				}
			}
			got = append(got, row)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	wantRows := append(want[0], want[1]...)
	if len(got) != len(wantRows) {
		t.Fatalf("%d rows, want %d", len(got), len(wantRows))
	}
	for r := range wantRows {
		for col := range wantRows[r] {
			w, g := wantRows[r][col], got[r][col]
			if (w == nil) != (g == nil) || !bytes.Equal(w, g) {
				t.Errorf("row %d col %d: got %x (nil %v), want %x (nil %v)", r, col, g, g == nil, w, w == nil)
			}
		}
	}
	// Literal checks, independent of the test encoders.
	lit := func(r, col int, hexWant string) {
		t.Helper()
		if h := hex.EncodeToString(got[r][col]); h != hexWant {
			t.Errorf("row %d col %d = %s, want %s", r, col, h, hexWant)
		}
	}
	lit(1, 0, "0020000000000001")         // 2^53+1
	lit(1, 3, "7ff8000000000000")         // NaN
	lit(0, 2, "000200000000000404d215e0") // numeric 1234.5600
	lit(2, 2, "0001fffe4000000503e8")     // numeric -0.00001
	lit(3, 2, "00000000c0000000")         // numeric NaN
	lit(2, 4, "7fffffffffffffff")         // timestamptz infinity
	lit(0, 11, "000000000016e3600000000200000001")
	lit(0, 8, "017b2261223a205b312c20325d7d")
	if v := int64(binary.BigEndian.Uint64(got[3][0])); v != math.MinInt64 {
		t.Errorf("int8 min: %d", v)
	}
	if got[1][1] == nil || len(got[1][1]) != 0 || got[1][2] != nil || got[2][13] == nil || got[3][13] != nil {
		t.Error("NULL and empty values are not told apart")
	}
}
