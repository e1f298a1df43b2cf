package chain

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

func i32(v int32) *int32 { return &v }

// sampleRows covers NULL vs empty, 64-bit integers above 2^53, NaN and
// infinities, numerics, arrays and JSON.
func sampleRows() [][][]byte {
	return [][][]byte{
		{pgInt8(1), pgText("alpha"), pgNumeric("12.3400"), pgFloat8(1.5), pgInt4Array([]*int32{i32(1), nil, i32(3)})},
		{pgInt8(1<<53 + 1), nil, pgNumeric("NaN"), pgFloat8(math.NaN()), nil},
		{pgInt8(math.MaxInt64), []byte{}, pgNumeric("-0.00001"), pgFloat8(math.Inf(-1)), pgInt4Array(nil)},
		{pgInt8(math.MinInt64), pgText("日本語 \x00 bytes"), nil, pgFloat8(math.Inf(1)), pgJSONB(`{"a": 1}`)},
	}
}

func buildChunk(t testing.TB, rows [][][]byte) []byte {
	t.Helper()
	b := NewRowBuilder("public.sample", len(rows[0]))
	for _, r := range rows {
		b.AppendRow(r)
	}
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestChunkRoundTrip(t *testing.T) {
	rows := sampleRows()
	data := buildChunk(t, rows)
	h, body, err := DecodeChunk(data)
	if err != nil {
		t.Fatal(err)
	}
	if h.Kind != ChunkKindRows || h.Table != "public.sample" || h.Columns != 5 || h.Rows != 4 || h.RawSize != int64(len(body)) {
		t.Fatalf("header %+v", h)
	}
	it := NewTupleIter(body, h.Columns)
	n := 0
	for it.Next() {
		want := rows[n]
		got := it.Values()
		for i := range want {
			if (want[i] == nil) != (got[i] == nil) || !bytes.Equal(want[i], got[i]) {
				t.Fatalf("row %d col %d: got %x (nil=%v), want %x (nil=%v)", n, i, got[i], got[i] == nil, want[i], want[i] == nil)
			}
		}
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(rows) {
		t.Fatalf("iterated %d rows, want %d", n, len(rows))
	}
	// Spot-check exact values after the trip.
	it.Reset(body, h.Columns)
	it.Next()
	it.Next()
	v := it.Values()
	if got := int64(binary.BigEndian.Uint64(v[0])); got != 1<<53+1 {
		t.Errorf("int8 above 2^53: got %d", got)
	}
	if f := math.Float64frombits(binary.BigEndian.Uint64(v[3])); !math.IsNaN(f) {
		t.Errorf("float8 NaN: got %v", f)
	}
	if v[1] != nil {
		t.Errorf("NULL text came back as %q", v[1])
	}
	it.Next()
	v = it.Values()
	if v[1] == nil || len(v[1]) != 0 {
		t.Errorf("empty text came back as %v (nil=%v)", v[1], v[1] == nil)
	}
	if got := numericString(v[2]); got != "-0.00001" {
		t.Errorf("numeric: got %s", got)
	}
}

func TestChunkAppendTupleMatchesAppendRow(t *testing.T) {
	rows := sampleRows()
	a := NewRowBuilder("public.sample", 5)
	b := NewRowBuilder("public.sample", 5)
	var stream []byte
	for _, r := range rows {
		a.AppendRow(r)
	}
	it := NewTupleIter(a.raw, 5)
	for it.Next() {
		if err := b.AppendTuple(it.Tuple()); err != nil {
			t.Fatal(err)
		}
		stream = append(stream, it.Tuple()...)
	}
	if !bytes.Equal(a.raw, b.raw) || a.Rows() != b.Rows() || a.RawLen() != len(stream) {
		t.Fatal("AppendTuple and AppendRow disagree")
	}
	c := NewRowBuilder("public.sample", 5)
	if n, err := c.AppendTuples(stream); err != nil || n != 4 || !bytes.Equal(c.raw, a.raw) {
		t.Fatalf("AppendTuples: %d, %v", n, err)
	}
	if _, err := c.AppendTuples(stream[:len(stream)-1]); err == nil {
		t.Fatal("AppendTuples accepted a partial tuple")
	}
	it.Reset(stream, 5)
	it.Next()
	first := it.Tuple()
	for _, bad := range [][]byte{
		stream[:10],                    // incomplete
		stream,                         // several tuples
		append(bytes.Clone(first), 0),  // trailing byte
		{0, 2, 0, 0, 0, 0, 0, 0, 0, 0}, // wrong field count
		{0, 5, 0xff, 0xff, 0xff, 0xfe}, // length -2
	} {
		if err := b.AppendTuple(bad); !errors.Is(err, ErrMalformedTuple) {
			t.Errorf("AppendTuple(%x) = %v", bad, err)
		}
	}
	if b.Rows() != 4 {
		t.Fatalf("failed appends changed the builder: %d rows", b.Rows())
	}
	b.Reset()
	if b.Rows() != 0 || b.RawLen() != 0 {
		t.Fatal("Reset did not empty the builder")
	}
}

func TestChunkEmpty(t *testing.T) {
	b := NewRowBuilder("public.empty", 3)
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	h, body, err := DecodeChunk(data)
	if err != nil || h.Rows != 0 || len(body) != 0 {
		t.Fatalf("empty chunk: %+v %d %v", h, len(body), err)
	}
	// Zero-column tables have two-byte tuples.
	z := NewRowBuilder("public.nocols", 0)
	z.AppendRow(nil)
	z.AppendRow([][]byte{})
	data, err = z.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if h, _, err := DecodeChunk(data); err != nil || h.Rows != 2 {
		t.Fatalf("zero-column chunk: %+v %v", h, err)
	}
}

func TestChunkCorruption(t *testing.T) {
	data := buildChunk(t, sampleRows())
	check := func(name string, d []byte, code errcode.Code) {
		t.Helper()
		_, _, err := DecodeChunk(d)
		if !errcode.Is(err, code) {
			t.Errorf("%s: got %v, want %s", name, err, code)
		}
	}
	for n := 0; n < len(data); n++ {
		check("truncated", data[:n], errcode.ChunkCorrupt)
	}
	ver := bytes.Clone(data)
	ver[4] = ChunkFormatVersion + 1
	check("unknown version", ver, errcode.FormatUnsupported)
	ver[4] = 0
	check("version 0", ver, errcode.FormatUnsupported)
	kind := bytes.Clone(data)
	kind[5] = 3
	check("unknown kind", kind, errcode.FormatUnsupported)
	kind[5] = byte(ChunkKindChanges)
	check("row header under the change kind", kind, errcode.ChunkCorrupt)
	flags := bytes.Clone(data)
	flags[6] = 1
	check("unknown flags", flags, errcode.FormatUnsupported)
	magic := bytes.Clone(data)
	magic[0] = 'X'
	check("bad magic", magic, errcode.ChunkCorrupt)
	check("trailing byte", append(bytes.Clone(data), 0), errcode.ChunkCorrupt)
	// Flip every byte after the prefix in turn: each must fail cleanly
	// (zstd's checksum or our framing checks catch it).
	for i := chunkPrefixLen; i < len(data); i++ {
		d := bytes.Clone(data)
		d[i] ^= 0x40
		if _, _, err := DecodeChunk(d); err != nil && !errcode.Is(err, errcode.ChunkCorrupt) {
			t.Fatalf("flip at %d: uncoded error %v", i, err)
		}
	}
}

func TestChunkHeaderLimits(t *testing.T) {
	mk := func(hdr string, payload []byte) []byte {
		d := append([]byte(ChunkMagic), ChunkFormatVersion, byte(ChunkKindRows), 0)
		d = binary.AppendUvarint(d, uint64(len(hdr)))
		d = append(d, hdr...)
		return append(d, payload...)
	}
	for _, hdr := range []string{
		`{"table":"t","columns":1,"rows":1,"raw_size":2000000000}`,
		`{"table":"t","columns":1,"rows":1,"raw_size":1000000}`,
		`{"table":"t","columns":1,"rows":-1,"raw_size":10}`,
		`{"table":"t","columns":40000,"rows":0,"raw_size":0}`,
		`{"table":"","columns":1,"rows":0,"raw_size":0}`,
		`{"table":"t","columns":1,"rows":0,"raw_size":0,"extra":1}`,
		`{"table":"t","columns":1,"rows":1,"raw_size":0}`,
		`{"table":"t","columns":1,"rows":0,"raw_size":0} {}`,
	} {
		_, _, err := DecodeChunk(mk(hdr, []byte("0123456789")))
		if !errcode.Is(err, errcode.ChunkCorrupt) {
			t.Errorf("header %s: got %v", hdr, err)
		}
	}
}

func TestScanTuples(t *testing.T) {
	b := NewRowBuilder("public.sample", 5)
	for _, r := range sampleRows() {
		b.AppendRow(r)
	}
	stream := b.raw
	var bounds []int
	it := NewTupleIter(stream, 5)
	for it.Next() {
		bounds = append(bounds, it.off)
	}
	for cut := 0; cut <= len(stream); cut++ {
		complete, n, err := ScanTuples(stream[:cut], 5)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		wantN := 0
		for _, bd := range bounds {
			if bd <= cut {
				wantN++
			}
		}
		wantComplete := 0
		if wantN > 0 {
			wantComplete = bounds[wantN-1]
		}
		if complete != wantComplete || n != wantN {
			t.Fatalf("cut %d: got %d/%d, want %d/%d", cut, complete, n, wantComplete, wantN)
		}
	}
	withTrailer := AppendCopyTrailer(bytes.Clone(stream))
	complete, n, err := ScanTuples(withTrailer, 5)
	if !errors.Is(err, ErrCopyTrailer) || complete != len(stream) || n != 4 {
		t.Fatalf("trailer: %d %d %v", complete, n, err)
	}
	if _, _, err := ScanTuples(stream, 4); !errors.Is(err, ErrMalformedTuple) {
		t.Fatalf("wrong column count: %v", err)
	}
	if allocs := testing.AllocsPerRun(100, func() { ScanTuples(stream, 5) }); allocs != 0 {
		t.Fatalf("ScanTuples allocates %v times", allocs)
	}
}

func TestAppendRowAllocationFree(t *testing.T) {
	rows := sampleRows()
	b := NewRowBuilder("public.sample", 5)
	for range 1000 {
		b.AppendRow(rows[0])
	}
	b.Reset()
	allocs := testing.AllocsPerRun(500, func() {
		b.AppendRow(rows[0])
		b.AppendRow(rows[1])
	})
	if allocs != 0 {
		t.Fatalf("AppendRow allocates %v times per call pair", allocs)
	}
	it := NewTupleIter(b.raw, 5)
	allocs = testing.AllocsPerRun(10, func() {
		it.Reset(b.raw, 5)
		for it.Next() {
		}
	})
	if allocs != 0 {
		t.Fatalf("TupleIter allocates %v times", allocs)
	}
}

func TestCopyHeader(t *testing.T) {
	h := AppendCopyHeader(nil)
	if n, err := CopyHeaderLen(h); err != nil || n != len(h) || n != 19 {
		t.Fatalf("CopyHeaderLen = %d, %v", n, err)
	}
	if _, err := CopyHeaderLen(h[:10]); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short header: %v", err)
	}
	ext := bytes.Clone(h)
	binary.BigEndian.PutUint32(ext[15:], 3)
	if _, err := CopyHeaderLen(ext); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("extension not yet read: %v", err)
	}
	if n, err := CopyHeaderLen(append(ext, 1, 2, 3, 0, 1)); err != nil || n != 22 {
		t.Fatalf("with extension: %d %v", n, err)
	}
	oids := bytes.Clone(h)
	binary.BigEndian.PutUint32(oids[11:], 1<<16)
	if _, err := CopyHeaderLen(oids); err == nil {
		t.Fatal("accepted OIDs")
	}
	if _, err := CopyHeaderLen([]byte("PGCOPX\n\xff\r\n\x00 and more bytes")); err == nil {
		t.Fatal("accepted a bad signature")
	}
	if _, err := CopyHeaderLen([]byte("XY")); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal("short bad signature not refused")
	}
}
