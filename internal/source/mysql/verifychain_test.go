package mysql

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/source"
)

// appendIncremental commits records as the chain's next incremental, ending
// at end.
func (f *fixture) appendIncremental(recs []*chain.Change, end string, n int) string {
	f.t.Helper()
	ctx := context.Background()
	cat, err := f.ch.LoadCatalog(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	b := chain.NewChangeBuilder()
	var txs int64
	for _, r := range recs {
		if err := b.Append(r); err != nil {
			f.t.Fatal(err)
		}
		if r.Op == chain.OpCommit {
			txs++
		}
	}
	data, err := b.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	ref, err := f.ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey(fmt.Sprintf("inc-%d", n), "changes-000000.chunk")}, data, b.Records(), int64(b.RawLen()))
	if err != nil {
		f.t.Fatal(err)
	}
	tip := cat.Tip()
	m := &chain.Manifest{FormatVersion: chain.ManifestFormatVersion, Kind: chain.KindIncremental, Parent: tip.ID, Source: cat.Source,
		StartPosition: tip.EndPosition, EndPosition: end, CreatedAt: tip.CreatedAt.Add(1e9 * 60 * 1),
		Chunks: []chain.ChunkRef{ref}, Changes: b.Records() - 2*txs, Transactions: txs, ApplyIdentity: true}
	if err := f.ch.PutManifest(ctx, m); err != nil {
		f.t.Fatal(err)
	}
	next := cat.Next()
	if err := next.AppendIncremental(m); err != nil {
		f.t.Fatal(err)
	}
	if err := f.ch.CommitCatalog(ctx, next); err != nil {
		f.t.Fatal(err)
	}
	return m.ID
}

func (f *fixture) findings() []chain.Finding {
	f.t.Helper()
	cat, err := f.ch.LoadCatalog(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := f.ch.SeveredTransactions(context.Background(), cat, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// verify-chain judges a MySQL-family chain by shapes A and C: a window cut
// inside a transaction, and an end position that is not where the last
// stored transaction ends. A transaction delivered again (shape B) is left
// to the apply marks on these chains.
func TestVerifyChainOnAMySQLChain(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	m := f.full(source.FullOptions{})
	f.exec("INSERT INTO t VALUES (1)" + ";\n" + "INSERT INTO t VALUES (2), (3)" + ";\n" + "INSERT INTO t VALUES (4)")
	_, win, recs := f.capture(m.EndPosition, m.Schema)
	if win.Transactions != 3 || len(recs) != 10 {
		t.Fatalf("window %+v, %d records", win, len(recs))
	}
	// The first transaction's end is where the second starts.
	firstEnd := fmt.Sprintf("%s:%d", m.EndPosition[:indexColon(m.EndPosition)], uint32(recs[2].EndLSN))
	f.appendIncremental(recs[:3], firstEnd, 1)
	if got := f.findings(); len(got) != 0 {
		t.Fatalf("a clean MySQL chain has findings: %v", got)
	}
	// Cut inside the second transaction: shape A.
	cutEnd := fmt.Sprintf("%s:%d", m.EndPosition[:indexColon(m.EndPosition)], uint32(recs[4].LSN))
	a := f.appendIncremental(recs[3:5], cutEnd, 2)
	// (It holds no complete transaction yet ends past its start, so shape
	// C is reported beside it.)
	got := f.findings()
	split := false
	for _, fd := range got {
		split = split || (fd.Shape == chain.ShapeSplit && fd.Links[0] == a && fd.Tx == recs[3].Tx)
	}
	if !split {
		t.Fatalf("findings %v, want shape A in %s", got, a)
	}
	// An end past the last stored commit: shape C.
	g := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	gm := g.full(source.FullOptions{})
	g.exec("INSERT INTO t VALUES (1)" + ";\n" + "INSERT INTO t VALUES (2)")
	_, _, grecs := g.capture(gm.EndPosition, gm.Schema)
	c := g.appendIncremental(grecs[:3], fmt.Sprintf("%s:%d", gm.EndPosition[:indexColon(gm.EndPosition)], uint32(grecs[len(grecs)-1].EndLSN)), 1)
	got = g.findings()
	if len(got) != 1 || got[0].Shape != chain.ShapeIncomplete || got[0].Links[0] != c {
		t.Fatalf("findings %v, want shape C in %s", got, c)
	}
	// The same transaction delivered again is not judged here (shape B).
	h := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	hm := h.full(source.FullOptions{})
	h.exec("INSERT INTO t VALUES (1)")
	_, _, hrecs := h.capture(hm.EndPosition, hm.Schema)
	end := fmt.Sprintf("%s:%d", hm.EndPosition[:indexColon(hm.EndPosition)], uint32(hrecs[2].EndLSN))
	h.appendIncremental(hrecs, end, 1)
	h.appendIncremental(hrecs, end, 2)
	for _, fd := range h.findings() {
		if fd.Shape == chain.ShapeRedelivered {
			t.Fatalf("shape B judged on a MySQL chain: %v", fd)
		}
	}
}

func indexColon(pos string) int {
	for i := len(pos) - 1; i >= 0; i-- {
		if pos[i] == ':' {
			return i
		}
	}
	return -1
}

// A position in a binlog the server no longer has is lost.
func TestLogHealthOfAPurgedBinlog(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	m := f.full(source.FullOptions{})
	cat, _ := f.ch.LoadCatalog(context.Background())
	p, _ := parsePosition(m.EndPosition)
	p.file = p.file[:len(p.file)-6] + "000000"
	_, err := f.src.OpenCapture(context.Background(), source.CaptureOptions{Source: cat.Source, Start: p.String(), Schema: m.Schema})
	if err == nil || errcodeOf(err) != "SLUICE-E-SOURCE-LOG-LOST" {
		t.Fatalf("capture from a purged binlog: %v", err)
	}
	pos, _ := parsePosition(m.EndPosition)
	h, err := binlogHealth(context.Background(), testDB(t, f), pos)
	if err != nil || h.State != source.LogOK || h.RetainedBytes < 0 {
		t.Fatalf("health %+v %v", h, err)
	}
}

func TestBinlogState(t *testing.T) {
	for _, tc := range []struct {
		idx, files int
		expire     int64
		want       source.LogState
	}{
		{0, 3, 86400, source.LogAtRisk}, // the oldest, and binlogs expire
		{1, 3, 86400, source.LogOK},     // an older one goes first
		{0, 3, 0, source.LogOK},         // nothing expires
		{0, 1, 86400, source.LogOK},     // the only binlog, being written
	} {
		if got, _ := binlogState(tc.idx, tc.files, tc.expire); got != tc.want {
			t.Errorf("binlog %d of %d, expire %d: %s, want %s", tc.idx, tc.files, tc.expire, got, tc.want)
		}
	}
}
