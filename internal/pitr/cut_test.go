package pitr_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/pitr"
)

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// at stamps a transaction Txn made with commit time t.
func at(t time.Time, txn []chain.Change) []chain.Change {
	txn[0].CommitTime = t.UnixMicro()
	txn[len(txn)-1].CommitTime = t.UnixMicro()
	return txn
}

// history is a chain of two segments: the first full, an incremental of
// three transactions (committed at t0+1s, +2s, +3s, in chunks of three
// records), one of a transaction at t0+4s, a rotated full, and an
// incremental of a transaction at t0+5s.
type history struct {
	ch    *chain.Chain
	cat   *chain.Catalog
	links []*chain.Manifest // fulls and incrementals in chain order
}

func newHistory(t *testing.T) *history {
	t.Helper()
	s, err := blobstore.Open(context.Background(), "file://"+t.TempDir(), blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := chain.Open(s)
	b := chaintest.NewBuilder(t, ch, t0)
	b.PerChunk = 3
	h := &history{ch: ch}
	first := b.Cat.Tip()
	firstFull, err := ch.GetManifest(context.Background(), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.links = append(h.links, firstFull)
	var recs []chain.Change
	recs = append(recs, at(t0.Add(time.Second), b.Txn(chaintest.Insert(2, "two"), chaintest.Insert(3, "three")))...)
	recs = append(recs, at(t0.Add(2*time.Second), b.Txn(chaintest.Update(2, "deux")))...)
	recs = append(recs, at(t0.Add(3*time.Second), b.Txn(chaintest.Delete(3)))...)
	h.links = append(h.links, b.Incremental(recs))
	h.links = append(h.links, b.Incremental(at(t0.Add(4*time.Second), b.Txn(chaintest.Insert(4, "four")))))
	h.links = append(h.links, b.Rotate())
	h.links = append(h.links, b.Incremental(at(t0.Add(5*time.Second), b.Txn(chaintest.Insert(5, "five")))))
	h.cat = b.Cat
	return h
}

// commitLSNs returns the commit LSN of each transaction of incremental m.
func (h *history) commitLSNs(t *testing.T, m *chain.Manifest) []uint64 {
	t.Helper()
	var out []uint64
	err := h.ch.WalkIncremental(context.Background(), m, func(c *chain.Change) error {
		if c.Op == chain.OpCommit {
			out = append(out, c.CommitLSN)
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *history) find(t *testing.T, p pitr.Point) (pitr.Cut, error) {
	t.Helper()
	return pitr.Find(context.Background(), h.ch, h.cat, p)
}

func ids(ls []chain.Link) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.ID
	}
	return out
}

func sameIDs(got []chain.Link, want ...*chain.Manifest) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].ID != want[i].ID {
			return false
		}
	}
	return true
}

func mustTime(t *testing.T, s string) pitr.Point {
	t.Helper()
	p, err := pitr.ParseTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A time between two transactions of one incremental stops inside it, on
// the begin of the first transaction left out.
func TestFindTimeInsideAnIncremental(t *testing.T) {
	h := newHistory(t)
	cut, err := h.find(t, mustTime(t, t0.Add(2500*time.Millisecond).Format(time.RFC3339Nano)))
	if err != nil {
		t.Fatal(err)
	}
	if cut.Full.ID != h.links[0].ID || !sameIDs(cut.Incrementals, h.links[1]) {
		t.Fatalf("cut: full %s, incrementals %v", cut.Full.ID, ids(cut.Incrementals))
	}
	// The first transaction is 4 records (begin, two inserts, commit), the
	// second 3: the third begins at record 7.
	if cut.Records != 7 {
		t.Errorf("records of the last incremental: %d, want 7", cut.Records)
	}
	if cut.Last == nil || !cut.Last.CommitTime.Equal(t0.Add(2*time.Second)) || cut.Last.Link != h.links[1].ID {
		t.Errorf("last transaction applied: %+v", cut.Last)
	}
	if cut.Next == nil || !cut.Next.CommitTime.Equal(t0.Add(3*time.Second)) {
		t.Errorf("first transaction left out: %+v", cut.Next)
	}
}

// A time equal to a transaction's commit time includes that transaction;
// the whole incrementals before it are taken without a cut.
func TestFindTimeIsInclusive(t *testing.T) {
	h := newHistory(t)
	cut, err := h.find(t, mustTime(t, t0.Add(4*time.Second).Format(time.RFC3339)))
	if err != nil {
		t.Fatal(err)
	}
	if cut.Full.ID != h.links[0].ID || !sameIDs(cut.Incrementals, h.links[1], h.links[2]) || cut.Records != -1 {
		t.Fatalf("cut: full %s, incrementals %v, records %d", cut.Full.ID, ids(cut.Incrementals), cut.Records)
	}
	if cut.Last == nil || !cut.Last.CommitTime.Equal(t0.Add(4*time.Second)) {
		t.Errorf("last transaction applied: %+v", cut.Last)
	}
	if cut.Next == nil || !cut.Next.CommitTime.Equal(t0.Add(5*time.Second)) || cut.Next.Link != h.links[4].ID {
		t.Errorf("first transaction left out: %+v", cut.Next)
	}
}

// A time in the newest segment starts from that segment's full.
func TestFindTimeInTheNewestSegment(t *testing.T) {
	h := newHistory(t)
	cut, err := h.find(t, mustTime(t, t0.Add(5*time.Second).Format(time.RFC3339)))
	if err != nil {
		t.Fatal(err)
	}
	if cut.Full.ID != h.links[3].ID || !sameIDs(cut.Incrementals, h.links[4]) || cut.Records != -1 || cut.Next != nil {
		t.Fatalf("cut: full %s, incrementals %v, records %d, next %+v", cut.Full.ID, ids(cut.Incrementals), cut.Records, cut.Next)
	}
	if got := ids(cut.Links()); len(got) != 2 || got[0] != h.links[3].ID {
		t.Errorf("links %v", got)
	}
}

// A time after the first full but before its first transaction restores
// the full alone.
func TestFindTimeBeforeTheFirstTransaction(t *testing.T) {
	h := newHistory(t)
	cut, err := h.find(t, mustTime(t, t0.Add(500*time.Millisecond).Format(time.RFC3339Nano)))
	if err != nil {
		t.Fatal(err)
	}
	if cut.Full.ID != h.links[0].ID || len(cut.Incrementals) != 0 || cut.Last != nil {
		t.Fatalf("cut: full %s, incrementals %v, last %+v", cut.Full.ID, ids(cut.Incrementals), cut.Last)
	}
	if cut.Next == nil || !cut.Next.CommitTime.Equal(t0.Add(time.Second)) {
		t.Errorf("first transaction left out: %+v", cut.Next)
	}
}

// A point outside what the chain covers is refused with its code, naming
// the range the chain does cover.
func TestFindRefusesPointsOutsideTheChain(t *testing.T) {
	h := newHistory(t)
	for name, p := range map[string]pitr.Point{
		"before the oldest full":          mustTime(t, t0.Add(-time.Hour).Format(time.RFC3339)),
		"after the newest transaction":    mustTime(t, t0.Add(time.Hour).Format(time.RFC3339)),
		"after the tip's end position":    {Position: mustPosition(t, "FFFF/0")},
		"before the oldest full position": {Position: mustPosition(t, "0/1")},
	} {
		_, err := h.find(t, p)
		if !errcode.Is(err, errcode.PointOutsideChain) {
			t.Errorf("%s: %v, want %s", name, err, errcode.PointOutsideChain)
		}
	}
}

func mustPosition(t *testing.T, s string) pitr.Position {
	t.Helper()
	p, err := pitr.ParsePosition("postgres", s)
	if err != nil {
		t.Fatal(err)
	}
	return p.Position
}

// An LSN includes the transaction whose commit record starts at it, and
// stops before the next one.
func TestFindPostgresPosition(t *testing.T) {
	h := newHistory(t)
	lsns := h.commitLSNs(t, h.links[1])
	if len(lsns) != 3 {
		t.Fatalf("commit LSNs %v", lsns)
	}
	p, err := pitr.ParsePosition("postgres", chain.FormatLSN(lsns[1]))
	if err != nil {
		t.Fatal(err)
	}
	cut, err := h.find(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if !sameIDs(cut.Incrementals, h.links[1]) || cut.Records != 7 || cut.Last == nil || cut.Last.Position != chain.FormatLSN(lsns[1]) {
		t.Fatalf("cut: incrementals %v, records %d, last %+v", ids(cut.Incrementals), cut.Records, cut.Last)
	}
	if cut.Next == nil || cut.Next.Position != chain.FormatLSN(lsns[2]) {
		t.Errorf("first transaction left out: %+v", cut.Next)
	}
}

// Malformed points are refused with PointInvalid before the chain is read.
func TestParseRefusesMalformedPoints(t *testing.T) {
	for _, s := range []string{"yesterday", "2026-12-05 10:00:00", "2026-12-05T10:00:00"} {
		if _, err := pitr.ParseTime(s); !errcode.Is(err, errcode.PointInvalid) {
			t.Errorf("--until %q: %v, want %s", s, err, errcode.PointInvalid)
		}
	}
	for _, c := range []struct{ engine, s string }{{"postgres", "16B3748"}, {"postgres", "x/y"}, {"oracle", "1"}} {
		if _, err := pitr.ParsePosition(c.engine, c.s); !errcode.Is(err, errcode.PointInvalid) {
			t.Errorf("--until-position %q of %s: %v, want %s", c.s, c.engine, err, errcode.PointInvalid)
		}
	}
	if _, err := pitr.ParseTime("2026-12-05T10:00:00+01:00"); err != nil {
		t.Errorf("a time with an offset: %v", err)
	}
}
