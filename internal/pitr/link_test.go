package pitr_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/pitr"
)

func linkOf(h *history, m *chain.Manifest) chain.Link {
	for _, l := range h.cat.Links() {
		if l.ID == m.ID {
			return l
		}
	}
	panic("no link " + m.ID)
}

// Inside one incremental a point stops on the begin of the first
// transaction after it and says the point is reached; an incremental wholly
// before a time point is taken whole and the broker goes on.
func TestInLinkCutsOnATransactionBoundary(t *testing.T) {
	h := newHistory(t)
	ctx := context.Background()
	inc := linkOf(h, h.links[1])
	cut, err := pitr.InLink(ctx, h.ch, h.cat, inc, pitr.Point{Time: t0.Add(2500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	// Two transactions of 4 and 3 records come before the third's begin.
	if cut.Records != 7 || !cut.Reached || cut.Next == nil || cut.Last == nil {
		t.Fatalf("cut %+v, want 7 records, reached, with both sides named", cut)
	}
	if !cut.Next.CommitTime.Equal(t0.Add(3*time.Second)) || !cut.Last.CommitTime.Equal(t0.Add(2*time.Second)) {
		t.Errorf("last %v next %v, want the transactions at +2s and +3s", cut.Last.CommitTime, cut.Next.CommitTime)
	}
	cut, err = pitr.InLink(ctx, h.ch, h.cat, inc, pitr.Point{Time: t0.Add(3500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if cut.Records != -1 || cut.Reached || cut.Next != nil {
		t.Fatalf("cut %+v, want the incremental whole and the point not reached", cut)
	}
	cut, err = pitr.InLink(ctx, h.ch, h.cat, inc, pitr.Point{Time: t0.Add(500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if cut.Records != 0 || !cut.Reached || cut.Last != nil {
		t.Fatalf("cut %+v, want nothing of the incremental and the point reached", cut)
	}
	// A position at exactly the incremental's end is reached there.
	p, err := pitr.ParsePosition("postgres", inc.EndPosition)
	if err != nil {
		t.Fatal(err)
	}
	if cut, err = pitr.InLink(ctx, h.ch, h.cat, inc, p); err != nil || cut.Records != -1 || !cut.Reached {
		t.Fatalf("cut %+v, %v; want the whole incremental and the point reached", cut, err)
	}
}

// Passed names the first applied transaction after the point, from the
// link the position names or from the records applied inside the next.
func TestPassedNamesTheAppliedTransactionAfterThePoint(t *testing.T) {
	h := newHistory(t)
	ctx := context.Background()
	inc := h.links[1].ID
	point := pitr.Point{Time: t0.Add(2500 * time.Millisecond)}
	tx, err := pitr.Passed(ctx, h.ch, h.cat, inc, "", 0, point)
	if err != nil || tx == nil || !tx.CommitTime.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("position after %s: %+v, %v; want the transaction at +3s", inc, tx, err)
	}
	// Inside the incremental, through its first two transactions only.
	if tx, err = pitr.Passed(ctx, h.ch, h.cat, h.links[0].ID, inc, 7, point); err != nil || tx != nil {
		t.Fatalf("position at record 7 of %s: %+v, %v; want nothing past the point", inc, tx, err)
	}
	if tx, err = pitr.Passed(ctx, h.ch, h.cat, h.links[0].ID, inc, 10, point); err != nil || tx == nil {
		t.Fatalf("position at record 10 of %s: %+v, %v; want the transaction at +3s", inc, tx, err)
	}
	// The full before the first transaction at +1s is not past +0.5s.
	if tx, err = pitr.Passed(ctx, h.ch, h.cat, h.links[0].ID, "", 0, pitr.Point{Time: t0.Add(500 * time.Millisecond)}); err != nil || tx != nil {
		t.Fatalf("position at the first full: %+v, %v; want nothing past the point", tx, err)
	}
}
