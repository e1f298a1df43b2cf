package chain

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// realisticRows returns rows of an orders-like table (ints, text, numerics,
// timestamps, floats, NULLs) totalling about target bytes of framed tuples.
func realisticRows(target int) (rows [][][]byte, columns int) {
	r := rand.New(rand.NewPCG(1, 2))
	first := []string{"Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Frances", "Edsger", "Radia"}
	last := []string{"Lovelace", "Hopper", "Torvalds", "Liskov", "Thompson", "Hamilton", "Ritchie", "Allen", "Dijkstra", "Perlman"}
	words := []string{"deliver", "before", "noon", "fragile", "gift", "wrap", "call", "on", "arrival", "leave", "at", "door", "back", "entrance", "invoice", "attached"}
	status := []string{"pending", "paid", "shipped", "cancelled"}
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	size := 0
	for id := int64(1); size < target; id++ {
		at = at.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
		fn, ln := first[r.IntN(len(first))], last[r.IntN(len(last))]
		var note []byte
		if r.IntN(10) >= 3 {
			n := 2 + r.IntN(8)
			for i := range n {
				if i > 0 {
					note = append(note, ' ')
				}
				note = append(note, words[r.IntN(len(words))]...)
			}
		}
		row := [][]byte{
			pgInt8(id),
			pgInt4(int32(1 + r.IntN(100000))),
			pgText(fmt.Sprintf("%s.%s%d@example.com", fn, ln, r.IntN(1000))),
			pgText(fn + " " + ln),
			pgNumeric(fmt.Sprintf("%d.%02d", r.IntN(100000), r.IntN(100))),
			pgText(status[r.IntN(len(status))]),
			pgTimestamptz(at),
			pgFloat8(r.Float64() * 5),
			note,
			pgBool(r.IntN(2) == 0),
		}
		for _, v := range row {
			size += 4 + len(v)
		}
		size += 2
		rows = append(rows, row)
	}
	return rows, 10
}

const benchTarget = 8 << 20

func BenchmarkChunkEncode(b *testing.B) {
	rows, cols := realisticRows(benchTarget)
	for _, lv := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression} {
		b.Run("level="+lv.String(), func(b *testing.B) {
			bld := NewRowBuilder("public.orders", cols)
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				bld.Reset()
				for _, r := range rows {
					bld.AppendRow(r)
				}
				var err error
				if out, err = bld.encode(lv); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(bld.RawLen()))
			b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(bld.RawLen())/float64(len(out)), "ratio")
		})
	}
}

func BenchmarkChunkDecode(b *testing.B) {
	rows, cols := realisticRows(benchTarget)
	bld := NewRowBuilder("public.orders", cols)
	for _, r := range rows {
		bld.AppendRow(r)
	}
	data, err := bld.Encode()
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	it := &TupleIter{}
	b.ReportAllocs()
	b.SetBytes(int64(bld.RawLen()))
	for b.Loop() {
		h, body, err := DecodeChunkInto(buf, data)
		if err != nil {
			b.Fatal(err)
		}
		buf = body
		it.Reset(body, h.Columns)
		for it.Next() {
		}
	}
	b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(bld.RawLen())/float64(len(data)), "ratio")
}

func BenchmarkScanTuples(b *testing.B) {
	rows, cols := realisticRows(benchTarget)
	bld := NewRowBuilder("public.orders", cols)
	for _, r := range rows {
		bld.AppendRow(r)
	}
	b.SetBytes(int64(bld.RawLen()))
	for b.Loop() {
		if _, n, err := ScanTuples(bld.raw, cols); err != nil || n != len(rows) {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
