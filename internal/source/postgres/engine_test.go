package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/testenv"
)

func TestTheEngineRegistersItsNames(t *testing.T) {
	for _, name := range []string{"postgres", "postgresql", "pg", ""} {
		if canon, ok := source.Canonical(name); !ok || canon != EngineName {
			t.Errorf("Canonical(%q) = %q, %t", name, canon, ok)
		}
	}
	if tr, err := source.TraitsOf("pg"); err != nil || tr.NotCarried != NotCarried {
		t.Errorf("TraitsOf(pg) = %+v, %v", tr, err)
	}
}

func TestOpenTakesOnlyTheDriversOptions(t *testing.T) {
	ctx := context.Background()
	src, err := source.Open(ctx, "pg", "postgres://app@db/app", map[string]string{
		OptionPublication: "pub", OptionSlotName: "slot", OptionSetReplicaIdentity: IdentityAuto,
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := src.(*engine); e.publication != "pub" || e.slotName != "slot" || e.identity != IdentityAuto || src.Engine() != EngineName {
		t.Errorf("opened %+v", e)
	}
	_, err = source.Open(ctx, "postgres", "postgres://app@db/app", map[string]string{"server_id": "7", "gtid": "x"})
	if !errcode.Is(err, errcode.ConfigInvalid) || !strings.Contains(err.Error(), "gtid, server_id") {
		t.Errorf("unknown options: %v", err)
	}
	// A slot does not follow a failover on PostgreSQL 15: the refusal says
	// so and what to do.
	_, err = source.Open(ctx, "postgres", "postgres://app@db/app", map[string]string{optionFollowFailover: "true"})
	if e, ok := errcode.As(err); !ok || e.Code != errcode.ConfigInvalid || errcode.ExitStatus(err) != 2 ||
		!strings.Contains(err.Error(), "does not survive a failover") || !strings.Contains(e.HintText(), "new chain") {
		t.Errorf("--follow-failover on PostgreSQL: %v", err)
	}
}

func TestOpenCaptureNeedsTheChainSlot(t *testing.T) {
	src, err := source.Open(context.Background(), "postgres", "postgres://app@db.invalid/app", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.OpenCapture(context.Background(), source.CaptureOptions{Source: chain.SourceInfo{Engine: EngineName}, Start: "0/100"})
	if e, ok := errcode.As(err); !ok || e.Code != errcode.SourceAnchorMissing || e.Formerly != errcode.SlotMissing {
		t.Errorf("a chain without a slot: %v, want SLUICE-E-SOURCE-ANCHOR-MISSING (formerly SLUICE-E-SLOT-MISSING)", err)
	}
}

func TestLogStateOfEachWalStatus(t *testing.T) {
	for status, want := range map[string]source.LogState{
		"reserved": source.LogOK, "extended": source.LogOK, "": source.LogOK,
		"unreserved": source.LogAtRisk, "lost": source.LogLost,
	} {
		if got := logState(status); got != want {
			t.Errorf("wal_status %q: %s, want %s", status, got, want)
		}
	}
}

func TestTheEngineThroughTheInterfaces(t *testing.T) {
	db := testenv.CreateDB(t, "engine")
	testenv.Exec(t, db, `CREATE TABLE public.t (id int PRIMARY KEY, v text)`)
	testenv.Exec(t, db, `INSERT INTO public.t VALUES (1, 'a')`)
	ctx := context.Background()
	ch := openChain(t)
	src, err := source.Open(ctx, "postgresql", testenv.DSN(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var last source.Progress
	m, err := src.FullBackup(ctx, ch, source.FullOptions{ChainLog: true, AttemptID: "a1", Progress: func(p source.Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	admin := testenv.Admin(t)
	defer admin.Close(ctx)
	t.Cleanup(func() { _, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, m.Source.Slot) })
	// The full committed the chain itself.
	cat, err := ch.LoadCatalog(ctx)
	if err != nil || cat.Tip().ID != m.ID || m.Source.Engine != src.Engine() || m.Source.Slot == "" {
		t.Fatalf("catalog %+v, %v after the full %s", cat, err, m.ID)
	}
	if last.TablesDone != 1 || last.Rows != 1 {
		t.Errorf("last progress %+v", last)
	}

	testenv.Exec(t, db, `INSERT INTO public.t VALUES (2, 'b')`)
	capt, err := src.OpenCapture(ctx, source.CaptureOptions{Source: m.Source, Start: m.EndPosition, Schema: m.Schema})
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	until, err := capt.CurrentPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var reported []source.LogHealth
	win, err := capt.Next(ctx, source.Limits{Until: until, Log: func(h source.LogHealth) { reported = append(reported, h) }}, func(c *chain.Change) error {
		if c.Op == chain.OpInsert {
			got = append(got, string(c.New[1].Data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if win.Transactions != 1 || len(got) != 1 || got[0] != "b" {
		t.Fatalf("window %+v delivered %q, want the one insert", win, got)
	}
	if len(reported) == 0 || reported[0].State != source.LogOK || reported[0].WalStatus == "" {
		t.Errorf("log health reported in the window: %+v", reported)
	}
	if err := capt.Confirm(ctx, win.End); err != nil {
		t.Fatal(err)
	}
	h, err := capt.LogHealth(ctx)
	if err != nil || h.State != source.LogOK || !h.Active || h.WalStatus == "" {
		t.Errorf("log health %+v, %v", h, err)
	}
}
