package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

func TestStateOnAFreshDatabase(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	st := tg.State()
	if _, found, err := st.ReadState(ctx, "s1"); err != nil || found {
		t.Fatalf("fresh database: found %v, %v", found, err)
	}
	if err := st.ReadMarks(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateState(ctx, "s1", nil); !errors.Is(err, target.ErrNoState) {
		t.Fatalf("update without a row: %v", err)
	}
	if err := st.EnsureControlTables(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateState(ctx, "s1", nil); !errors.Is(err, target.ErrNoState) {
		t.Fatalf("update without a row: %v", err)
	}
}

func TestReplaceAndUpdateState(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	st := tg.State()
	if err := st.ReplaceState(ctx, "s1", &target.StateRow{Token: "a", Checksum: "1"}); err != nil {
		t.Fatal(err)
	}
	exec(t, tg, `INSERT INTO sluice_cdc_apply_marks (stream_id, link_id, xid, commit_lsn, first_ordinal, ranges) VALUES ('s1', 'l', 1, 2, 0, '[0,3]'), ('s2', 'l', 1, 2, 0, '[0,3]')`)
	err := st.UpdateState(ctx, "s1", func(r target.StateRow) (target.StateRow, error) {
		if r.Token != "a" {
			t.Errorf("update sees %+v", r)
		}
		return target.StateRow{Token: "b", Checksum: "2"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if row, found, err := st.ReadState(ctx, "s1"); err != nil || !found || row.Token != "b" {
		t.Fatalf("after update: %+v %v %v", row, found, err)
	}
	// Replacing clears the stream's marks, and only its own.
	if err := st.ReplaceState(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := st.ReadState(ctx, "s1"); found {
		t.Fatal("the row survived ReplaceState(nil)")
	}
	wantRows(t, tg, "SELECT stream_id FROM sluice_cdc_apply_marks", "s2")

	exec(t, tg, `INSERT INTO sluice_cdc_apply_marks (stream_id, link_id, xid, commit_lsn, first_ordinal, ranges) VALUES ('s3', 'l', 1, 2, 0, '[0')`)
	wantCode(t, st.ReadMarks(ctx, "s3", nil), errcode.ApplyMarksUnavailable)
}

func TestOpenDSNs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, dsn := range []string{
		filepath.Join(dir, "plain.db"),
		"sqlite://" + filepath.Join(dir, "scheme.db"),
		"file:" + filepath.Join(dir, "uri.db") + "?cache=private",
	} {
		tg, err := target.Open(ctx, "sqlite3", dsn, nil)
		if err != nil {
			t.Fatalf("%s: %v", dsn, err)
		}
		var mode string
		if err := tg.(*Target).db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("%s: journal mode %q, %v", dsn, mode, err)
		}
		if tg.MaxLanes() != 1 {
			t.Errorf("MaxLanes %d", tg.MaxLanes())
		}
		tg.Close(ctx)
	}
	for _, dsn := range []string{"", ":memory:", "file::memory:", "sqlite://", filepath.Join(dir, "a?b.db")} {
		_, err := Open(ctx, dsn)
		wantCode(t, err, errcode.ConfigInvalid)
	}
}

// A target that still has the table restores once recorded their
// incrementals in loses it when the control tables are ensured.
func TestLegacyRestoreLinksTableDropped(t *testing.T) {
	tg := openTarget(t)
	exec(t, tg, `CREATE TABLE sluice_restore_links (chain_id TEXT NOT NULL, link_id TEXT NOT NULL, applied_at TEXT NOT NULL, PRIMARY KEY (chain_id, link_id))`,
		`INSERT INTO sluice_restore_links VALUES ('c', 'i-1', '2026-01-01')`)
	if err := tg.State().EnsureControlTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg, `SELECT count(*) FROM sqlite_master WHERE name = 'sluice_restore_links'`, "0")
}
