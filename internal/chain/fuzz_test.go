package chain

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

// FuzzDecodeChunk feeds arbitrary bytes to DecodeChunk: it must never panic,
// must fail only with a coded error, and whatever it accepts must iterate
// cleanly and agree with its header.
func FuzzDecodeChunk(f *testing.F) {
	f.Add(buildChunk(f, sampleRows()))
	f.Add(buildChunk(f, sampleRows()[:1]))
	empty, _ := NewRowBuilder("public.e", 2).Encode()
	f.Add(empty)
	big := NewRowBuilder("public.big", 5)
	for range 2000 {
		for _, r := range sampleRows() {
			big.AppendRow(r)
		}
	}
	if data, err := big.Encode(); err == nil {
		f.Add(data)
	}
	if paths, _ := filepath.Glob("testdata/v1/data/*/*.slck"); len(paths) > 0 {
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, body, err := DecodeChunk(data)
		if err != nil {
			if !errcode.Is(err, errcode.ChunkCorrupt) && !errcode.Is(err, errcode.FormatUnsupported) {
				t.Fatalf("uncoded error: %v", err)
			}
			return
		}
		if int64(len(body)) != h.RawSize {
			t.Fatalf("body %d bytes, header %d", len(body), h.RawSize)
		}
		if h.Kind == ChunkKindChanges {
			if n, err := scanChanges(body); err != nil || n != h.Rows {
				t.Fatalf("accepted change chunk iterates %d of %d records: %v", n, h.Rows, err)
			}
			return
		}
		it := NewTupleIter(body, h.Columns)
		var n int64
		for it.Next() {
			n++
		}
		if it.Err() != nil || n != h.Rows {
			t.Fatalf("accepted chunk iterates %d of %d rows: %v", n, h.Rows, it.Err())
		}
	})
}

// FuzzScanTuples checks ScanTuples against TupleIter on arbitrary bytes.
func FuzzScanTuples(f *testing.F) {
	b := NewRowBuilder("public.sample", 5)
	for _, r := range sampleRows() {
		b.AppendRow(r)
	}
	f.Add(b.raw, 5)
	f.Add([]byte{0, 0, 0, 0, 0xff, 0xff}, 0)
	f.Fuzz(func(t *testing.T, buf []byte, columns int) {
		complete, n, err := ScanTuples(buf, columns)
		if complete < 0 || complete > len(buf) || n < 0 {
			t.Fatalf("ScanTuples = %d, %d", complete, n)
		}
		if columns < 0 || columns > MaxColumns {
			return
		}
		it := NewTupleIter(buf[:complete], columns)
		m := 0
		for it.Next() {
			m++
		}
		if it.Err() != nil || m != n {
			t.Fatalf("iterator saw %d tuples (%v), ScanTuples %d (%v)", m, it.Err(), n, err)
		}
	})
}
