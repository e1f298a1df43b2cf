package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/source"
)

// A quiet binlog must not kill a capture: a window idles through more
// than one read timeout (the server's heartbeats keep the connection
// alive), ends empty, and the same capture then delivers the next
// transaction.
func TestQuietCaptureStaysAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("idles for longer than a read timeout")
	}
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	m := f.full(source.FullOptions{})
	ctx := context.Background()
	cat, _ := f.ch.LoadCatalog(ctx)
	capt, err := f.src.OpenCapture(ctx, source.CaptureOptions{Source: cat.Source, Start: m.EndPosition, Schema: m.Schema, Owner: "idle-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	drained, ticks := 0, 0
	start := time.Now()
	win, err := capt.Next(ctx, source.Limits{Idle: readTimeout + 3*heartbeat, Drained: func() { drained++ }, Tick: func() { ticks++ }},
		func(*chain.Change) error { t.Fatal("a change on a quiet database"); return nil })
	if err != nil {
		t.Fatalf("quiet window after %s: %v", time.Since(start), err)
	}
	if win.Transactions != 0 || win.End != m.EndPosition || drained == 0 || ticks < 5 {
		t.Fatalf("quiet window %+v, drained %d, ticks %d", win, drained, ticks)
	}
	f.exec("INSERT INTO t VALUES (1)")
	var got int
	win, err = capt.Next(ctx, source.Limits{Idle: 5 * time.Second, Duration: time.Second}, func(c *chain.Change) error {
		if c.Op == chain.OpInsert {
			got++
		}
		return nil
	})
	if err != nil || win.Transactions != 1 || got != 1 {
		t.Fatalf("window after the quiet one: %+v, %d inserts, %v", win, got, err)
	}
}

// A rotation's full is anchored where the old segment's last window ends:
// a window bounded Before that anchor delivers exactly the transactions
// the new full does not hold, and one from the anchor the rest.
func TestRotationSeam(t *testing.T) {
	f := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	m := f.full(source.FullOptions{})
	ctx := context.Background()
	cat, _ := f.ch.LoadCatalog(ctx)
	f.exec("INSERT INTO t VALUES (1)")
	rot, cleanup, err := f.src.RotationFull(ctx, f.ch, source.FullOptions{AttemptID: "rot"}, cat.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if rot.Rows != 1 || rot.Source != cat.Source {
		t.Fatalf("rotation full: %d rows, source %+v", rot.Rows, rot.Source)
	}
	f.exec("INSERT INTO t VALUES (2)")
	read := func(start, before string) []string {
		capt, err := f.src.OpenCapture(ctx, source.CaptureOptions{Source: cat.Source, Start: start, Schema: m.Schema})
		if err != nil {
			t.Fatal(err)
		}
		defer capt.Close()
		var out []string
		lim := source.Limits{Before: before, Idle: 3 * time.Second}
		if before == "" {
			lim.Until, _ = capt.CurrentPosition(ctx)
		}
		if _, err := capt.Next(ctx, lim, func(c *chain.Change) error {
			if c.Op == chain.OpInsert {
				out = append(out, renderChange(c))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := read(m.EndPosition, rot.EndPosition); len(got) != 1 || got[0] != "I "+f.db+".t 1" {
		t.Fatalf("before the rotation's anchor: %q", got)
	}
	if got := read(rot.EndPosition, ""); len(got) != 1 || got[0] != "I "+f.db+".t 2" {
		t.Fatalf("after the rotation's anchor: %q", got)
	}
	// With nothing written after the anchor, the window bounded before it
	// still ends (as soon as the stream reaches the anchor, not at Idle).
	quiet, qcleanup, err := f.src.RotationFull(ctx, f.ch, source.FullOptions{AttemptID: "rot2"}, cat.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer qcleanup()
	start := time.Now()
	if got := read(rot.EndPosition, quiet.EndPosition); len(got) != 1 || got[0] != "I "+f.db+".t 2" {
		t.Fatalf("before a quiet anchor: %q", got)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("the window before a quiet anchor took %s: it waited for a transaction after the anchor", waited)
	}
	other := newFixture(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	if _, _, err := other.src.RotationFull(ctx, f.ch, source.FullOptions{AttemptID: "x"}, cat.Source); errcodeOf(err) != "SLUICE-E-SOURCE-MISMATCH" {
		t.Fatalf("a rotation from another database: %v", err)
	}
}
