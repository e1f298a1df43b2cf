package postgres

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/testenv"
)

// A run whose lease was taken over is fenced: its next transaction fails the
// lease check and cannot advance the position.
func TestZombieRunIsFenced(t *testing.T) {
	db := testenv.CreateDB(t, "fence")
	ctx := context.Background()
	dsn := testenv.DSN(db)
	conn, err := connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := ensureControlTables(ctx, conn); err != nil {
		t.Fatal(err)
	}
	tx, _ := conn.Begin(ctx)
	if err := writeState(ctx, tx, apply.Token{Engine: apply.EngineBroker, Stream: "s", ChainID: "c", LastApplied: "l1"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := claimStream(ctx, dsn, "s", "old-run"); err != nil {
		t.Fatal(err)
	}
	tx, _ = conn.Begin(ctx)
	if _, err := lockOwned(ctx, tx, "s", "old-run", false); err != nil {
		t.Fatalf("the owner must pass its own lease check: %v", err)
	}
	_ = tx.Rollback(ctx)

	// A new run claims the stream; the old one is now a zombie.
	if err := claimStream(ctx, dsn, "s", "new-run"); err != nil {
		t.Fatal(err)
	}
	tx, _ = conn.Begin(ctx)
	defer tx.Rollback(ctx)
	_, err = lockOwned(ctx, tx, "s", "old-run", true)
	if !errcode.Is(err, errcode.BrokerFenced) {
		t.Fatalf("want %s for the zombie, got %v", errcode.BrokerFenced, err)
	}
}

func TestMarkRangesRoundTrip(t *testing.T) {
	db := testenv.CreateDB(t, "marks")
	ctx := context.Background()
	conn, err := connect(ctx, testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := ensureControlTables(ctx, conn); err != nil {
		t.Fatal(err)
	}
	var b target.MarkBatch
	id := apply.Identity{XID: 7, CommitLSN: 1 << 40}
	for _, o := range []uint32{0, 1, 2, 5, 6, 9} {
		b.Add("link", id, o)
	}
	tx, _ := conn.Begin(ctx)
	if err := writeMarks(ctx, tx, "s", &b, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := readAllMarks(ctx, conn, "s")
	if err != nil {
		t.Fatal(err)
	}
	for o := uint32(0); o < 11; o++ {
		want := o <= 2 || o == 5 || o == 6 || o == 9
		if got := m[id] != nil && func() bool { _, ok := m[id][o]; return ok }(); got != want {
			t.Errorf("ordinal %d marked=%t, want %t", o, got, want)
		}
	}
}

// A target that still has the table restores once recorded their
// incrementals in loses it when the control tables are ensured; a table
// of the application that only bears its name is left alone.
func TestLegacyRestoreLinksTableDropped(t *testing.T) {
	ctx := context.Background()
	legacy := targetDB(t, `CREATE TABLE public.sluice_restore_links (chain_id text NOT NULL, link_id text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (chain_id, link_id));
		INSERT INTO public.sluice_restore_links (chain_id, link_id) VALUES ('c', 'i-1')`)
	if err := (&Target{conn: legacy}).State().EnsureControlTables(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(t, legacy, `SELECT to_regclass('public.sluice_restore_links') IS NULL`, "t")
	app := targetDB(t, `CREATE TABLE public.sluice_restore_links (id int PRIMARY KEY, note text); INSERT INTO public.sluice_restore_links VALUES (1, 'mine')`)
	if err := (&Target{conn: app}).State().EnsureControlTables(ctx); err != nil {
		t.Fatal(err)
	}
	wantRows(t, app, `SELECT note FROM public.sluice_restore_links`, "mine")
}
