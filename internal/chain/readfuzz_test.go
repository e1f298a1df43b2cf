package chain

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

// The fuzzers in this file feed what a hostile or damaged store could hold
// to every reader a stored object reaches besides the chunk codec (which
// fuzz_test.go and changefuzz_test.go cover): catalog commits, checkpoints
// and their pages, whole generations of catalog format 1 and 2, manifests
// plain and sealed, layouts, the bytes behind a chunk reference, and the
// control objects (stop markers, broker position reports). Each asserts
// that the reader does not panic, that it refuses with a coded error (of
// the codes docs/chain-format.md gives for the object) or returns what
// passes the checks a reader relies on, and that it allocates at most
// allocPerByte bytes per stored byte plus allocSlack.
//
// The bound. Each reader reads the object whole (io.ReadAll, which grows
// its buffer to about twice the object, plus the memory store's copy) and
// decodes it with encoding/json into Go structs, then checks it. The
// largest expansion is of the smallest JSON element into the largest
// struct: "{}," (3 bytes) becomes a checkpoint segment of 200 bytes (a Link
// of 128, two slices, a flag and a layout ID), about 67 bytes per byte, in
// a slice that encoding/json grows by a quarter at a time once it is long
// (growslice), so that all the arrays it allocates on the way add up to
// about five times the last: some 333 bytes per byte. The catalog the
// loader builds from those segments (a Segment of 176 bytes each, 59 per
// byte) and the copies of the object come on top; a checkpoint of empty
// segments measures about 383 bytes per byte. allocPerByte is 512, that and
// a margin. 64 per byte would hold for most objects but not for that one,
// which is legitimate JSON refused only after it is decoded. What the bound
// is for is what it forbids: any allocation sized by a count or a length
// the object declares rather than by its size (a page named a thousand
// times, a chunk reference declaring 2 GiB). allocSlack covers fixed costs
// (encoding/json's first look at a type, errors naming the object); the
// readers that read other objects than the fuzzed one (a checkpoint's page)
// count those objects' bytes in n.
const (
	allocPerByte = 512
	allocSlack   = 1 << 20
)

// allocated returns the bytes f allocates (runtime.MemStats.TotalAlloc
// around it). Fuzz inputs run one at a time in a worker, so little else
// allocates meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// checkAlloc runs f, which reads an object of n stored bytes, and fails t
// when it allocates more than the bound. A measurement over the bound is
// taken again before failing, since another goroutine (one a test left
// running, the runtime's) may have allocated at the same time; f must be
// safe to run twice.
func checkAlloc(t *testing.T, what string, n int, f func()) {
	t.Helper()
	checkAllocSlack(t, what, n, allocSlack, f)
}

// checkAllocSlack is checkAlloc with another fixed allowance.
func checkAllocSlack(t *testing.T, what string, n int, slack uint64, f func()) {
	t.Helper()
	limit := allocPerByte*uint64(n) + slack
	got := allocated(f)
	if got <= limit {
		return
	}
	if again := allocated(f); again < got {
		got = again
	}
	if got > limit {
		t.Fatalf("%s of %d bytes allocated %d bytes, over the bound of %d", what, n, got, limit)
	}
}

// wantCoded fails t unless err carries one of codes.
func wantCoded(t *testing.T, what string, err error, codes ...errcode.Code) {
	t.Helper()
	e, ok := errcode.As(err)
	if !ok {
		t.Fatalf("%s: uncoded error: %v", what, err)
	}
	for _, c := range codes {
		if e.Code == c {
			return
		}
	}
	t.Fatalf("%s: error with unexpected code %s: %v", what, e.Code, err)
}

// peekString returns the string field name of a JSON object, "" when data
// is not one or has no such field.
func peekString(data []byte, name string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[name], &s) != nil {
		return ""
	}
	return s
}

// peekGeneration returns the generation field of a JSON object, or def.
func peekGeneration(data []byte, def int64) int64 {
	var v struct {
		Generation int64 `json:"generation"`
	}
	if json.Unmarshal(data, &v) != nil || v.Generation < 1 {
		return def
	}
	return v.Generation
}

// readFixtureFiles returns the files matching pattern under testdata.
func readFixtureFiles(tb testing.TB, pattern string) [][]byte {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// fixtureObjects returns the objects of a fixture directory by key.
func fixtureObjects(tb testing.TB, dir string) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// badJSON returns hostile documents shared by the fuzzers' seeds: deep
// nesting, empty elements by the thousand, absurd numbers, truncations.
func badJSON(field string) [][]byte {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	deepObj := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
	empties := "[" + strings.Repeat("{},", 20000) + "{}]"
	nulls := "[" + strings.Repeat("null,", 20000) + "null]"
	return [][]byte{
		nil,
		[]byte("{"),
		[]byte("null"),
		[]byte(`{"` + field + `":` + deep + `}`),
		[]byte(deepObj),
		[]byte(`{"format_version":3,"generation":1,"` + field + `":` + empties + `}`),
		[]byte(`{"format_version":1,"generation":1,"` + field + `":` + nulls + `}`),
		[]byte(`{"format_version":99999999999999999999999,"generation":-9223372036854775808}`),
		[]byte(`{"format_version":3,"generation":9223372036854775807,"` + field + `":[]}`),
		[]byte(`{"` + field + `":"` + strings.Repeat(`\u0000`, 5000) + `"}`),
	}
}

// --- catalog commits --------------------------------------------------------

// commitBases returns the catalogs the fixture of catalog format 3 holds at
// generations 1003 (its checkpoint) to 1006, by generation.
func commitBases(tb testing.TB) map[int64]*Catalog {
	tb.Helper()
	objs := fixtureObjects(tb, catalogFixtureDir)
	bases := map[int64]*Catalog{}
	for g := int64(1003); g <= 1006; g++ {
		s := newMemStore()
		for k, v := range objs {
			if n, ok := parseNumberedKey(k, commitPrefix); ok && n > g {
				continue
			}
			s.objects[k] = v
		}
		cat, err := Open(s).LoadCatalog(context.Background())
		if err != nil || cat.Generation != g {
			tb.Fatalf("fixture at generation %d: %v", g, err)
		}
		bases[g] = cat
	}
	return bases
}

// newChainCommit returns the stored commit of generation 1 of a new chain.
func newChainCommit(tb testing.TB) []byte {
	tb.Helper()
	s := newMemStore()
	full := &Manifest{ID: synthID(1), Kind: KindFull, Source: testSource, StartPosition: "0/1000", EndPosition: "0/1000", CreatedAt: synthStart}
	if err := Open(s).CommitCatalog(context.Background(), NewCatalog(full)); err != nil {
		tb.Fatal(err)
	}
	return s.raw(CommitKey(1))
}

// FuzzDecodeCommit feeds a stored catalog commit to the reader of commits
// (decodeCommit, then applyCommit onto the generation before it: one of the
// format 3 fixture's generations, or none for generation 1). What applies
// must give a catalog that passes ValidateCatalog, as LoadCatalog promises.
func FuzzDecodeCommit(f *testing.F) {
	for _, data := range readFixtureFiles(f, "v3-catalog/catalog/commit-*.json") {
		f.Add(data)
	}
	first := newChainCommit(f)
	f.Add(first)
	f.Add(first[:len(first)/2])
	for _, data := range badJSON("change") {
		f.Add(data)
	}
	f.Add([]byte(`{"format_version":3,"chain_id":"0000000000000000000000000000000000000001","generation":1004,"change":{"drop":9223372036854775807,"edits":[{"segment":-1}]}}`))
	f.Add([]byte(`{"format_version":3,"generation":1004,"change":{"edits":[` + strings.Repeat(`{"segment":0,"append":[{}]},`, 3000) + `{}]}}`))
	bases := commitBases(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		gen := peekGeneration(data, 1004)
		base := bases[gen-1]
		hash := ""
		if base != nil {
			hash = base.stored.hash
		} else if gen != 1 {
			gen, base = 1004, bases[1003]
			hash = base.stored.hash
		}
		key := CommitKey(gen)
		var next *Catalog
		var err error
		checkAlloc(t, "commit", len(data), func() {
			var c *CatalogCommit
			next = nil
			if c, err = decodeCommit(key, gen, data); err == nil {
				next, err = applyCommit(key, base, hash, c)
			}
		})
		if err != nil {
			wantCoded(t, "commit", err, errcode.ManifestInvalid, errcode.FormatUnsupported, errcode.ChainInvalid)
			return
		}
		if err := ValidateCatalog(next); err != nil {
			t.Fatalf("commit applied, and the catalog it makes fails validation: %v", err)
		}
	})
}

// --- checkpoints and their pages ---------------------------------------------

// FuzzLoadCheckpoint loads a chain whose only checkpoint holds the fuzzed
// bytes (under the generation they name), with the format 3 fixture's page
// in the store (counted in the allocation bound, since a checkpoint may
// name it once). A catalog loaded must pass ValidateCatalog.
func FuzzLoadCheckpoint(f *testing.F) {
	objs := fixtureObjects(f, catalogFixtureDir)
	for _, data := range readFixtureFiles(f, "v3-catalog/catalog/checkpoint-*.json") {
		f.Add(data)
		f.Add(data[:len(data)-200])
		f.Add(bytes.Replace(data, []byte(`"links":1000`), []byte(`"links":9223372036854775807`), 1))
	}
	{
		s := newMemStore()
		seedCatalog(f, Open(s), 5)
		f.Add(s.raw(CheckpointKey(5)))
	}
	for _, data := range badJSON("segments") {
		f.Add(data)
	}
	page := `{"sha256":"e4c2e23c47a86d56e64038c8938cc266be0ca8b173b51eb36a019df4d8f5253d","links":1000}`
	f.Add([]byte(`{"format_version":3,"generation":7,"commit_sha256":"` + strings.Repeat("a", 64) +
		`","segments":[{"pages":[` + strings.Repeat(page+",", 2000) + page + `]}]}`))
	f.Add([]byte(`{"format_version":3,"generation":7,"commit_sha256":"` + strings.Repeat("a", 64) +
		`","segments":[{"pages":[` + strings.Repeat(`{"sha256":"`+strings.Repeat("b", 64)+`","links":1000},`, 2000) + `{}]}]}`))
	pageBytes := 0
	for k, v := range objs {
		if strings.HasPrefix(k, pagePrefix) {
			pageBytes += len(v)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newMemStore()
		for k, v := range objs {
			if strings.HasPrefix(k, pagePrefix) {
				s.objects[k] = v
			}
		}
		gen := peekGeneration(data, 1)
		s.objects[CheckpointKey(gen)] = data
		c := Open(s)
		var cat *Catalog
		var err error
		checkAlloc(t, "checkpoint and its pages", len(data)+pageBytes, func() { cat, err = c.LoadCatalog(context.Background()) })
		if err != nil {
			wantCoded(t, "checkpoint", err, errcode.ManifestInvalid, errcode.FormatUnsupported, errcode.ChainInvalid)
			return
		}
		if err := ValidateCatalog(cat); err != nil {
			t.Fatalf("checkpoint loaded, and fails validation: %v", err)
		}
	})
}

// FuzzLoadCheckpointPage loads the format 3 fixture's checkpoint with its
// page replaced by the fuzzed bytes (stored under their hash, which the
// checkpoint then names).
func FuzzLoadCheckpointPage(f *testing.F) {
	objs := fixtureObjects(f, catalogFixtureDir)
	var cpKey string
	var cp, page []byte
	for k, v := range objs {
		switch {
		case strings.HasPrefix(k, checkpointPrefix):
			cpKey, cp = k, v
		case strings.HasPrefix(k, pagePrefix):
			page = v
		}
	}
	oldSHA := sha256Hex(page)
	f.Add(page)
	f.Add(page[:len(page)/3])
	f.Add(page[:len(page)-1])
	f.Add(append(bytes.Clone(page), page...))
	for _, data := range badJSON("links") {
		f.Add(data)
	}
	f.Add([]byte("[" + strings.Repeat("{},", 999) + "{}]"))
	f.Add([]byte("[" + strings.Repeat("{},", 99999) + "{}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newMemStore()
		sha := sha256Hex(data)
		s.objects[cpKey] = bytes.Replace(cp, []byte(oldSHA), []byte(sha), 1)
		s.objects[PageKey(sha)] = data
		c := Open(s)
		var cat *Catalog
		var err error
		checkAlloc(t, "checkpoint page", len(data)+len(cp), func() { cat, err = c.LoadCatalog(context.Background()) })
		if err != nil {
			wantCoded(t, "checkpoint page", err, errcode.ManifestInvalid, errcode.FormatUnsupported, errcode.ChainInvalid)
			return
		}
		if err := ValidateCatalog(cat); err != nil {
			t.Fatalf("page loaded, and the catalog fails validation: %v", err)
		}
	})
}

// --- whole generations of catalog format 1 and 2 -----------------------------

// FuzzLoadLegacyCatalog loads a chain without checkpoints whose only whole
// generation holds the fuzzed bytes (under the generation they name).
func FuzzLoadLegacyCatalog(f *testing.F) {
	for _, data := range readFixtureFiles(f, "v1/catalog/gen-*.json") {
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	for _, data := range readFixtureFiles(f, "v3-catalog/catalog/gen-*.json") {
		f.Add(data)
	}
	for _, data := range badJSON("segments") {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newMemStore()
		gen := peekGeneration(data, 1)
		s.objects[CatalogKey(gen)] = data
		c := Open(s)
		var cat *Catalog
		var err error
		checkAlloc(t, "whole catalog generation", len(data), func() { cat, err = c.LoadCatalog(context.Background()) })
		if err != nil {
			wantCoded(t, "whole catalog generation", err, errcode.ManifestInvalid, errcode.FormatUnsupported, errcode.ChainInvalid, errcode.ChainNotFound)
			return
		}
		if err := ValidateCatalog(cat); err != nil {
			t.Fatalf("whole generation loaded, and fails validation: %v", err)
		}
	})
}

// --- manifests ---------------------------------------------------------------

// sampleIncrementalManifest is a sealed incremental with two change chunks.
func sampleIncrementalManifest(tb testing.TB) *Manifest {
	tb.Helper()
	m := &Manifest{Kind: KindIncremental, Parent: synthID(1), Source: testSource, StartPosition: "0/1000", EndPosition: "0/2000",
		CreatedAt: synthStart, Changes: 3, Transactions: 1, ApplyIdentity: true, Schema: testSchema,
		Chunks: []ChunkRef{
			{Key: "data/a/0001.slck", SHA256: strings.Repeat("1", 64), Size: 100, Rows: 2, RawSize: 300},
			{Key: "data/a/0002.slck", SHA256: strings.Repeat("2", 64), Size: 100, Rows: 3, RawSize: 300},
		}}
	if err := m.Seal(); err != nil {
		tb.Fatal(err)
	}
	return m
}

// manifestSeeds returns stored manifests: the frozen fixture's and one the
// test builds.
func manifestSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	out := readFixtureFiles(tb, "v1/manifests/*.json")
	data, err := encodeManifest(sampleIncrementalManifest(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return append(out, data)
}

// resealManifest parses data leniently and returns the stored form of the
// manifest it holds with its ID computed, so that the fuzzer reaches the
// checks after the ID's; data itself when it does not parse.
func resealManifest(data []byte) []byte {
	var m Manifest
	if json.Unmarshal(data, &m) != nil || m.Seal() != nil {
		return data
	}
	out, err := encodeManifest(&m)
	if err != nil {
		return data
	}
	return out
}

// FuzzGetManifest reads a stored plaintext manifest through GetManifest,
// under the ID it names (or a fixed one). With reseal, the bytes are first
// made to hash to their ID, so the checks after it are reached. A manifest
// read must carry its ID, and ValidateManifest must not panic on it.
func FuzzGetManifest(f *testing.F) {
	for _, data := range manifestSeeds(f) {
		f.Add(data, false)
		f.Add(data[:len(data)-10], false)
		f.Add(data, true)
	}
	for _, data := range badJSON("tables") {
		f.Add(data, false)
		f.Add(data, true)
	}
	f.Add([]byte(`{"format_version":2,"kind":"full","schema":{"tables":`+"["+strings.Repeat("{},", 20000)+"{}]}}"), true)
	f.Add([]byte(`{"format_version":2,"kind":"incremental","chunks":`+"["+strings.Repeat("{},", 20000)+"{}]}"), true)
	f.Add([]byte(`{"format_version":2,"kind":"incremental","chunks":[{"key":"data/x","sha256":"`+strings.Repeat("a", 64)+`","size":9223372036854775807,"rows":9223372036854775807,"raw_size":9223372036854775807},{"key":"data/y","sha256":"`+strings.Repeat("a", 64)+`","size":1,"rows":9223372036854775807}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, reseal bool) {
		if reseal {
			data = resealManifest(data)
		}
		id := peekString(data, "id")
		if !ValidID(id) {
			id = synthID(7)
		}
		s := newMemStore()
		s.objects[ManifestKey(id)] = data
		c := Open(s)
		var m *Manifest
		var err error
		checkAlloc(t, "manifest", len(data), func() { m, err = c.GetManifest(context.Background(), id) })
		if err != nil {
			wantCoded(t, "manifest", err, errcode.ManifestInvalid, errcode.FormatUnsupported)
			return
		}
		if m.ID != id {
			t.Fatalf("manifest read as %s carries ID %s", id, m.ID)
		}
		if err := ValidateManifest(m); err != nil {
			wantCoded(t, "manifest validation", err, errcode.ManifestInvalid, errcode.FormatUnsupported)
		}
		if _, err := c.ManifestChunks(context.Background(), id); err != nil {
			t.Fatalf("manifest reads, and its chunk list does not: %v", err)
		}
	})
}

// sealedPlaceholder and keyPlaceholder stand, in a fuzzed sealed manifest,
// for the base64 of the fuzzed inner bytes sealed under the test's data key
// for the manifest's ID, and for that key's ID.
const (
	sealedPlaceholder = "@SEALED@"
	keyPlaceholder    = "@KEY@"
)

// sealedFuzzChain returns a handle that reads sealed manifests (an age
// identity unwraps its data key, whose envelope is in s) and the key.
func sealedFuzzChain(tb testing.TB, s *memStore) (*Chain, *seal.DataKey) {
	tb.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		tb.Fatal(err)
	}
	w, err := seal.NewAgeIdentities(id.String()+"\n", "test")
	if err != nil {
		tb.Fatal(err)
	}
	c := Open(s).WithKeyring(NewKeyring(Trust{Wrapper: w, Encrypt: true}))
	dk, err := c.writeKey(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return c, dk
}

// sealedOuter returns the clear part of a sealed manifest for m, with the
// placeholders in place of the sealed bytes and the key ID.
func sealedOuter(tb testing.TB, m *Manifest) []byte {
	tb.Helper()
	sm := sealedManifest{FormatVersion: SealedManifestFormatVersion, ID: m.ID, KeyID: keyPlaceholder, Chunks: []SealedChunk{}}
	for _, ref := range m.AllChunks() {
		sm.Chunks = append(sm.Chunks, SealedChunk{Key: ref.Key, Size: ref.Size})
	}
	data, err := json.Marshal(&sm)
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.Replace(data, []byte(`"sealed":null`), []byte(`"sealed":"`+sealedPlaceholder+`"`), 1)
}

// FuzzGetSealedManifest reads a stored sealed manifest: outer is its clear
// part, in which @SEALED@ stands for inner sealed under the chain's data key
// for the manifest's ID and @KEY@ for that key's ID. It is read with the key
// (GetManifest) and without it (ManifestChunks, what retention reads).
func FuzzGetSealedManifest(f *testing.F) {
	for _, data := range manifestSeeds(f) {
		m, err := decodeManifest(peekString(data, "id"), data)
		if err != nil {
			f.Fatal(err)
		}
		canonical, _ := canonicalManifest(m, m.ID)
		outer := sealedOuter(f, m)
		f.Add(outer, canonical)
		f.Add(outer, canonical[:len(canonical)/2])
		f.Add(bytes.Replace(outer, []byte(`"chunks":[`), []byte(`"chunks":[{"key":"data/extra","size":1},`), 1), canonical)
		f.Add(outer[:len(outer)-5], canonical)
	}
	for _, data := range badJSON("chunks") {
		f.Add(data, []byte("{}"))
	}
	f.Add([]byte(`{"format_version":3,"id":"`+synthID(7)+`","key_id":"@KEY@","chunks":[`+strings.Repeat(`{},`, 20000)+`{}],"sealed":"@SEALED@"}`), []byte("{}"))
	f.Add([]byte(`{"format_version":3,"id":"`+synthID(7)+`","key_id":"@KEY@","chunks":[],"sealed":"`+strings.Repeat("A", 40000)+`"}`), []byte(nil))
	s := newMemStore()
	c, dk := sealedFuzzChain(f, s)
	plain := Open(s)
	f.Fuzz(func(t *testing.T, outer, inner []byte) {
		id := peekString(outer, "id")
		if !ValidID(id) {
			id = synthID(7)
		}
		data := outer
		if bytes.Contains(data, []byte(sealedPlaceholder)) {
			sealed, err := dk.Seal(nil, inner, manifestAAD(id))
			if err != nil {
				t.Fatal(err)
			}
			data = bytes.Replace(data, []byte(sealedPlaceholder), []byte(base64.StdEncoding.EncodeToString(sealed)), 1)
		}
		data = bytes.Replace(data, []byte(keyPlaceholder), []byte(dk.ID), 1)
		s.set(ManifestKey(id), data)
		defer s.Delete(context.Background(), ManifestKey(id))
		var m *Manifest
		var err error
		checkAlloc(t, "sealed manifest", len(data), func() { m, err = c.GetManifest(context.Background(), id) })
		if err != nil {
			wantCoded(t, "sealed manifest", err, errcode.ManifestInvalid, errcode.FormatUnsupported, errcode.ChainNotSealed,
				errcode.ChunkSealBroken, errcode.KeyRequired)
		} else {
			if m.ID != id {
				t.Fatalf("manifest read as %s carries ID %s", id, m.ID)
			}
			if err := ValidateManifest(m); err != nil {
				wantCoded(t, "sealed manifest validation", err, errcode.ManifestInvalid, errcode.FormatUnsupported)
			}
			for _, ref := range m.AllChunks() {
				if ref.seal == nil {
					t.Fatalf("chunk %s of a sealed manifest is not bound to its place", ref.Key)
				}
			}
		}
		var chunks []SealedChunk
		checkAlloc(t, "sealed manifest without the key", len(data), func() { chunks, err = plain.ManifestChunks(context.Background(), id) })
		if err != nil {
			wantCoded(t, "sealed manifest without the key", err, errcode.ManifestInvalid, errcode.FormatUnsupported)
			return
		}
		if m != nil && len(chunks) != len(m.AllChunks()) {
			t.Fatalf("retention sees %d chunks, the reader %d", len(chunks), len(m.AllChunks()))
		}
	})
}

// --- layouts -------------------------------------------------------------

// sampleLayout is a sealed layout of three chunks placing two incrementals.
func sampleLayout(tb testing.TB) *Layout {
	tb.Helper()
	l := &Layout{Segment: synthID(1), CreatedAt: synthStart,
		Chunks: []ChunkRef{
			{Key: "data/c/0001.slck", SHA256: strings.Repeat("1", 64), Size: 100, Rows: 4, RawSize: 300},
			{Key: "data/c/0002.slck", SHA256: strings.Repeat("2", 64), Size: 100, Rows: 4, RawSize: 300},
			{Key: "data/c/0003.slck", SHA256: strings.Repeat("3", 64), Size: 100, Rows: 4, RawSize: 300},
		},
		Links: []LayoutLink{
			{ID: synthID(2), First: 0, Skip: 1, Records: 5, Digest: strings.Repeat("4", 64)},
			{ID: synthID(3), First: 1, Skip: 2, Records: 6, Digest: strings.Repeat("5", 64), Rewritten: true, Changes: 4, Transactions: 1},
		}}
	if err := l.Seal(); err != nil {
		tb.Fatal(err)
	}
	return l
}

func encodeLayout(tb testing.TB, l *Layout) []byte {
	tb.Helper()
	b, err := canonicalLayout(l, l.ID)
	if err != nil {
		tb.Fatal(err)
	}
	return append(b, '\n')
}

// resealLayout parses data leniently and returns the stored form of the
// layout it holds with its ID computed; data itself when it does not parse.
func resealLayout(data []byte) []byte {
	var l Layout
	if json.Unmarshal(data, &l) != nil || l.Seal() != nil {
		return data
	}
	b, err := canonicalLayout(&l, l.ID)
	if err != nil {
		return data
	}
	return append(b, '\n')
}

// FuzzGetLayout reads a stored layout through GetLayout, under the ID it
// names (or a fixed one); with reseal the bytes are first made to hash to
// their ID. A layout read must place every link's records within its
// chunks: Apply gives each a run of spans, each within its chunk, whose
// records add up to the link's.
func FuzzGetLayout(f *testing.F) {
	l := sampleLayout(f)
	data := encodeLayout(f, l)
	f.Add(data, false)
	f.Add(data[:len(data)-20], false)
	f.Add(data, true)
	keyed := *l
	keyed.KeyID = strings.Repeat("a", 32)
	if err := keyed.Seal(); err != nil {
		f.Fatal(err)
	}
	f.Add(encodeLayout(f, &keyed), false)
	for _, data := range badJSON("chunks") {
		f.Add(data, false)
		f.Add(data, true)
	}
	f.Add([]byte(`{"format_version":1,"segment":"`+synthID(1)+`","links":[{"id":"`+synthID(2)+`","first":0,"skip":9223372036854775807,"records":9223372036854775807,"digest":"`+strings.Repeat("4", 64)+`"}],"chunks":[{"key":"data/x","sha256":"`+strings.Repeat("a", 64)+`","size":1,"rows":4}]}`), true)
	f.Add([]byte(`{"format_version":1,"segment":"`+synthID(1)+`","links":[{"id":"`+synthID(2)+`","first":1,"skip":0,"records":1,"digest":"`+strings.Repeat("4", 64)+`"}],"chunks":[{"key":"data/x","sha256":"`+strings.Repeat("a", 64)+`","size":1,"rows":9223372036854775807},{"key":"data/y","sha256":"`+strings.Repeat("a", 64)+`","size":1,"rows":9223372036854775807}]}`), true)
	f.Add([]byte(`{"format_version":1,"segment":"`+synthID(1)+`","links":[`+strings.Repeat(`{},`, 20000)+`{}],"chunks":[`+strings.Repeat(`{},`, 20000)+`{}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, reseal bool) {
		if reseal {
			data = resealLayout(data)
		}
		id := peekString(data, "id")
		if !ValidID(id) {
			id = synthID(9)
		}
		s := newMemStore()
		s.objects[LayoutKey(id)] = data
		c := Open(s)
		var l *Layout
		var err error
		checkAlloc(t, "layout", len(data), func() { l, err = c.GetLayout(context.Background(), id) })
		if err != nil {
			wantCoded(t, "layout", err, errcode.ManifestInvalid, errcode.FormatUnsupported)
			return
		}
		for _, ll := range l.Links {
			m := l.Apply(&Manifest{ID: ll.ID, Kind: KindIncremental})
			var records int64
			for _, ref := range m.Chunks {
				sp := ref.Span
				if sp == nil || ref.Rows <= 0 || sp.Skip < 0 || sp.Skip >= sp.Total || ref.Rows > sp.Total-sp.Skip {
					t.Fatalf("layout link %s: span %+v of %d records in chunk %s", ll.ID, sp, ref.Rows, ref.Key)
				}
				records += ref.Rows
			}
			if records != ll.Records {
				t.Fatalf("layout link %s: spans hold %d records, the layout says %d", ll.ID, records, ll.Records)
			}
		}
	})
}

// --- the bytes behind a chunk reference ----------------------------------

// FuzzReadChunkRef reads stored bytes through a chunk reference whose
// size (and, unless fixHash, digest) are fuzzed, as a manifest or layout
// read from the store declares them. The reader must refuse a mismatch
// with CHUNK-CORRUPT, and a declared size must not make it allocate more
// than the object it reads. Decoding the chunk itself is FuzzDecodeChunk's.
func FuzzReadChunkRef(f *testing.F) {
	chunk := buildChunk(f, sampleRows())
	f.Add(chunk, int64(len(chunk)), true)
	f.Add(chunk, int64(len(chunk)-1), true)
	f.Add(chunk, int64(len(chunk)+1), true)
	f.Add(chunk[:10], int64(2*MaxChunkRawSize), true)
	f.Add(chunk[:10], int64(MaxChunkRawSize), false)
	f.Add([]byte{}, int64(-1), true)
	f.Fuzz(func(t *testing.T, data []byte, size int64, fixHash bool) {
		s := newMemStore()
		ref := ChunkRef{Key: "data/a/0001.slck", SHA256: strings.Repeat("0", 64), Size: size}
		if fixHash {
			ref.SHA256 = sha256Hex(data)
		}
		s.objects[ref.Key] = data
		c := Open(s)
		var got []byte
		var err error
		// The declared size sizes the buffer up to chunkPresize before
		// the bytes arrive; beyond that only what arrives counts.
		checkAllocSlack(t, "chunk bytes", len(data), allocSlack+chunkPresize+bytes.MinRead, func() {
			got, err = c.readChunkBytes(context.Background(), ref)
		})
		if err != nil {
			wantCoded(t, "chunk bytes", err, errcode.ChunkCorrupt)
			return
		}
		if !bytes.Equal(got, data) || int64(len(got)) != size {
			t.Fatalf("read %d bytes of a %d-byte object declared %d", len(got), len(data), size)
		}
	})
}

// --- control objects -----------------------------------------------------

// FuzzControlObjects reads a stop marker and a broker position report
// holding the fuzzed bytes. Neither is parsed strictly: a marker counts
// whatever it holds, and a report that does not parse (or names another
// stream) stands for its stream with no link, which keeps every segment.
func FuzzControlObjects(f *testing.F) {
	f.Add([]byte(`{"requested_at":"2026-01-01T00:00:00Z","by":"ops","reason":"maintenance"}`))
	f.Add([]byte(`{"stream":"s1","chain_id":"` + synthID(1) + `","last_applied":"` + synthID(2) + `","updated_at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"stream":"s2","last_applied":"` + synthID(2) + `"}`))
	for _, data := range badJSON("by") {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newMemStore()
		s.objects[StopMarkerKey(RoleProducer, "")] = data
		s.objects[BrokerPositionKey("s1")] = data
		c := Open(s)
		var ok bool
		var err error
		checkAlloc(t, "stop marker", len(data), func() { _, ok, err = c.GetStopMarker(context.Background(), RoleProducer, "") })
		if err != nil || !ok {
			t.Fatalf("stop marker present: %v, %v", ok, err)
		}
		var ps []BrokerPosition
		checkAlloc(t, "broker position", len(data), func() { ps, err = c.BrokerPositions(context.Background()) })
		if err != nil || len(ps) != 1 || ps[0].Stream != "s1" {
			t.Fatalf("broker positions %+v, %v", ps, err)
		}
	})
}

// --- key envelopes -------------------------------------------------------

// FuzzReadEnvelope reads a stored data key envelope (without opening it:
// that is the wrapper's, which a passphrase makes deliberately costly).
func FuzzReadEnvelope(f *testing.F) {
	s := newMemStore()
	_, dk := sealedFuzzChain(f, s)
	f.Add(s.raw(KeyEnvelopeKey(dk.ID)))
	for _, data := range badJSON("wrap") {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newMemStore()
		id := peekString(data, "key_id")
		if !seal.ValidKeyID(id) {
			id = strings.Repeat("a", 32)
		}
		s.objects[KeyEnvelopeKey(id)] = data
		c := Open(s)
		var err error
		checkAlloc(t, "key envelope", len(data), func() { _, err = c.ReadEnvelope(context.Background(), id) })
		if err != nil {
			wantCoded(t, "key envelope", err, errcode.ManifestInvalid, errcode.FormatUnsupported)
		}
	})
}
