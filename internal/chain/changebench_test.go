package chain

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// benchTable is a table of the benchmark's workload.
type benchTable struct {
	name string
	cols int
	full bool // replica identity full: updates and deletes carry the whole old row
}

// realisticChanges returns about n change records of an OLTP-like
// workload: transactions of 1 to 1000 changes (log-uniform, so most are
// small), each a Begin, inserts (60%), updates (30%) and deletes (10%) over
// tables of 5 to 10 text columns, and a Commit. Updates mostly carry no old
// image, some the old key ('K'), those of one table the whole old row
// ('O'); a fifth leave a TOASTed column unchanged.
func realisticChanges(n int) []Change {
	r := rand.New(rand.NewPCG(3, 4))
	tables := []benchTable{
		{"public.orders", 10, false}, {"public.order_items", 7, false}, {"public.customers", 9, false},
		{"public.payments", 8, false}, {"public.shipments", 6, false}, {"public.inventory", 5, false},
		{"public.sessions", 6, false}, {"audit.events", 8, true},
	}
	first := []string{"Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Frances", "Edsger", "Radia"}
	last := []string{"Lovelace", "Hopper", "Torvalds", "Liskov", "Thompson", "Hamilton", "Ritchie", "Allen", "Dijkstra", "Perlman"}
	words := []string{"deliver", "before", "noon", "fragile", "gift", "wrap", "call", "on", "arrival", "leave", "at", "door", "back", "entrance", "invoice", "attached"}
	status := []string{"pending", "paid", "shipped", "cancelled", "refunded"}
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	nextID := make([]int64, len(tables))
	for i := range nextID {
		nextID[i] = 1_000_000 * int64(i+1)
	}
	value := func(col int, id int64) Value {
		switch col {
		case 0:
			return tv(strconv.FormatInt(id, 10))
		case 1:
			return tv(strconv.Itoa(1 + r.IntN(100000)))
		case 2:
			return tv(fmt.Sprintf("%s.%s%d@example.com", first[r.IntN(10)], last[r.IntN(10)], r.IntN(1000)))
		case 3:
			return tv(status[r.IntN(len(status))])
		case 4:
			return tv(at.Add(time.Duration(r.IntN(1e6)) * time.Microsecond).Format("2006-01-02 15:04:05.999999-07"))
		case 5:
			return tv(fmt.Sprintf("%d.%02d", r.IntN(10000), r.IntN(100)))
		case 6:
			if r.IntN(4) == 0 {
				return nullV
			}
			s := words[r.IntN(len(words))]
			for range r.IntN(12) {
				s += " " + words[r.IntN(len(words))]
			}
			return tv(s)
		case 7:
			return tv(first[r.IntN(10)] + " " + last[r.IntN(10)])
		case 8:
			return tv(strconv.FormatBool(r.IntN(2) == 0))
		default:
			return tv(strconv.Itoa(r.IntN(50)))
		}
	}
	row := func(tb benchTable, id int64) []Value {
		vals := make([]Value, tb.cols)
		for c := range vals {
			vals[c] = value(c, id)
		}
		return vals
	}
	keyImage := func(tb benchTable, id int64) []Value {
		vals := make([]Value, tb.cols)
		vals[0] = tv(strconv.FormatInt(id, 10))
		for c := 1; c < tb.cols; c++ {
			vals[c] = nullV
		}
		return vals
	}
	out := make([]Change, 0, n+1000)
	xid := uint32(7_000_000)
	lsn := uint64(0x3_0000_0000)
	for len(out) < n {
		size := int(math.Exp(r.Float64() * math.Log(1000)))
		xid++
		at = at.Add(time.Duration(r.IntN(50_000)) * time.Microsecond)
		begin := len(out)
		commitTime := at.UnixMicro()
		out = append(out, Change{Op: OpBegin, XID: xid, LSN: lsn, CommitTime: commitTime, Identified: true})
		for ord := range size {
			lsn += uint64(40 + r.IntN(300))
			ti := r.IntN(len(tables))
			tb := tables[ti]
			c := Change{XID: xid, Ordinal: uint32(ord), LSN: lsn, Table: tb.name, Identified: true}
			switch k := r.IntN(10); {
			case k < 6:
				nextID[ti]++
				c.Op, c.New = OpInsert, row(tb, nextID[ti])
			case k < 9:
				id := nextID[ti] - int64(r.IntN(1000))
				c.Op, c.New = OpUpdate, row(tb, id)
				if r.IntN(5) == 0 && tb.cols > 6 {
					c.New[6] = unchangedV
				}
				switch {
				case tb.full:
					c.OldKind, c.Old = 'O', row(tb, id)
				case r.IntN(10) == 0:
					c.OldKind, c.Old = 'K', keyImage(tb, id+1)
				}
			default:
				id := nextID[ti] - int64(r.IntN(1000))
				c.Op, c.OldKind = OpDelete, 'K'
				c.Old = keyImage(tb, id)
				if tb.full {
					c.OldKind, c.Old = 'O', row(tb, id)
				}
			}
			out = append(out, c)
		}
		lsn += uint64(40 + r.IntN(100))
		commit := lsn
		lsn += 48
		out = append(out, Change{Op: OpCommit, XID: xid, LSN: commit, EndLSN: lsn, CommitTime: commitTime, Identified: true})
		for i := begin; i < len(out); i++ {
			out[i].CommitLSN = commit
		}
	}
	return out
}

const (
	benchChanges     = 200_000
	benchChangeChunk = 16 << 20 // the row chunks' default size
)

// encodeChangeChunks appends changes to b, cutting a chunk whenever the body
// reaches benchChangeChunk bytes, and returns the chunk files.
func encodeChangeChunks(tb testing.TB, b *ChangeBuilder, changes []Change, level zstd.EncoderLevel) (chunks [][]byte, raw int) {
	b.Reset()
	flush := func() {
		data, err := b.encode(level)
		if err != nil {
			tb.Fatal(err)
		}
		chunks = append(chunks, data)
		raw += b.RawLen()
		b.Reset()
	}
	for i := range changes {
		if err := b.Append(&changes[i]); err != nil {
			tb.Fatal(err)
		}
		if b.RawLen() >= benchChangeChunk {
			flush()
		}
	}
	if b.Records() > 0 {
		flush()
	}
	return chunks, raw
}

func reportChanges(b *testing.B, changes, raw, stored int) {
	b.ReportMetric(float64(changes)*float64(b.N)/b.Elapsed().Seconds(), "changes/s")
	b.ReportMetric(float64(stored)/float64(changes), "B/change")
	b.ReportMetric(float64(raw)/float64(changes), "rawB/change")
}

func BenchmarkChangeEncode(b *testing.B) {
	changes := realisticChanges(benchChanges)
	for _, lv := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		b.Run("level="+lv.String(), func(b *testing.B) {
			bld := NewChangeBuilder()
			var chunks [][]byte
			var raw int
			b.ReportAllocs()
			for b.Loop() {
				chunks, raw = encodeChangeChunks(b, bld, changes, lv)
			}
			stored := 0
			for _, c := range chunks {
				stored += len(c)
			}
			b.SetBytes(int64(raw))
			reportChanges(b, len(changes), raw, stored)
		})
	}
	// The record encoding alone, without compression.
	b.Run("append", func(b *testing.B) {
		bld := NewChangeBuilder()
		raw := 0
		b.ReportAllocs()
		for b.Loop() {
			bld.Reset()
			raw = 0
			for i := range changes {
				if err := bld.Append(&changes[i]); err != nil {
					b.Fatal(err)
				}
				if bld.RawLen() >= benchChangeChunk {
					raw += bld.RawLen()
					bld.Reset()
				}
			}
			raw += bld.RawLen()
		}
		b.SetBytes(int64(raw))
		reportChanges(b, len(changes), raw, raw)
	})
}

func BenchmarkChangeDecode(b *testing.B) {
	changes := realisticChanges(benchChanges)
	chunks, raw := encodeChangeChunks(b, NewChangeBuilder(), changes, chunkLevel)
	stored := 0
	for _, c := range chunks {
		stored += len(c)
	}
	// DecodeChunk (decompression and the framing check) and a full iteration,
	// as a reader of an incremental does.
	b.Run("chunk", func(b *testing.B) {
		var buf []byte
		it := &ChangeIter{}
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			for _, data := range chunks {
				_, body, err := DecodeChunkInto(buf, data)
				if err != nil {
					b.Fatal(err)
				}
				buf = body
				it.Reset(body)
				for it.Next() {
					n++
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
			if n != len(changes) {
				b.Fatalf("%d changes, want %d", n, len(changes))
			}
		}
		b.SetBytes(int64(raw))
		reportChanges(b, len(changes), raw, stored)
	})
	// The record decoding alone, over uncompressed bodies.
	b.Run("iterate", func(b *testing.B) {
		var bodies [][]byte
		for _, data := range chunks {
			_, body, err := DecodeChunk(data)
			if err != nil {
				b.Fatal(err)
			}
			bodies = append(bodies, body)
		}
		it := &ChangeIter{}
		b.ReportAllocs()
		for b.Loop() {
			for _, body := range bodies {
				it.Reset(body)
				for it.Next() {
				}
			}
		}
		b.SetBytes(int64(raw))
		reportChanges(b, len(changes), raw, stored)
	})
}
