package chain

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/internal/errcode"
)

// FuzzDecodeChangeChunk feeds arbitrary change bodies, wrapped in a chunk
// file declaring rows records, to DecodeChunk and to ChangeIter. Neither may
// panic or fail with an uncoded error; DecodeChunk must accept exactly the
// bodies the iterator reads to the end with rows records; and whatever is
// accepted must be accepted by ChangeBuilder.Append and read back the same.
//
// Run it with a short -fuzzminimizetime (e.g. 2s): minimizing a newly
// interesting input of a kilobyte or more otherwise takes the default full
// minute, during which the fuzzer reports 0 execs/s.
func FuzzDecodeChangeChunk(f *testing.F) {
	seed := func(changes []Change) {
		b := NewChangeBuilder()
		for i := range changes {
			if err := b.Append(&changes[i]); err != nil {
				f.Fatal(err)
			}
		}
		f.Add(b.raw, uint16(b.records))
	}
	seed(sampleChanges())
	seed(manyChanges(8))
	seed(fixtureChanges())
	seed(nil)
	f.Add(rec(OpInsert, fieldTable|fieldNew, 0, 3, "a.b", 1, ValueText, 1, "x"), uint16(1))
	if paths, _ := filepath.Glob("testdata/v1-changes/*.slck"); len(paths) > 0 {
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil {
				if h, body, err := DecodeChunk(data); err == nil {
					f.Add(body, uint16(h.Rows))
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, rows uint16) {
		it := NewChangeIter(body)
		var got []Change
		for it.Next() {
			got = append(got, cloneChange(it.Change()))
		}
		iterErr := it.Err()
		if iterErr != nil && !errcode.Is(iterErr, errcode.ChunkCorrupt) {
			t.Fatalf("uncoded iterator error: %v", iterErr)
		}

		w := NewChangeBuilder()
		w.raw, w.records = body, int64(rows)
		data, err := w.encode(zstd.SpeedFastest)
		if err != nil {
			t.Fatal(err)
		}
		h, dbody, err := DecodeChunk(data)
		accept := iterErr == nil && len(got) == int(rows)
		if (err == nil) != accept {
			t.Fatalf("DecodeChunk error %v, iterator error %v after %d of %d records", err, iterErr, len(got), rows)
		}
		if err != nil {
			if !errcode.Is(err, errcode.ChunkCorrupt) {
				t.Fatalf("uncoded error: %v", err)
			}
			return
		}
		if h.Kind != ChunkKindChanges || h.Rows != int64(rows) || string(dbody) != string(body) {
			t.Fatalf("accepted chunk header %+v", h)
		}

		b := NewChangeBuilder()
		for i := range got {
			if err := b.Append(&got[i]); err != nil {
				t.Fatalf("record %d was read but cannot be written: %v", i, err)
			}
		}
		it2 := NewChangeIter(b.raw)
		n := 0
		for ; it2.Next(); n++ {
			if d := sameChange(it2.Change(), &got[n]); d != "" {
				t.Fatalf("record %d rewritten: %s", n, d)
			}
		}
		if it2.Err() != nil || n != len(got) {
			t.Fatalf("rewritten body reads %d of %d records: %v", n, len(got), it2.Err())
		}
	})
}
