package postgres

import (
	"context"
	"maps"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/testenv"
)

// A capture reads the last values of the chain's sequences after a window:
// serial and identity sequences, a standalone one, and none for a sequence
// that has handed out nothing or was set back to hand out its value next.
func TestCaptureReadsTheSequencesOfTheChain(t *testing.T) {
	db := testenv.CreateDB(t, "seqs")
	testenv.Exec(t, db, `
		CREATE TABLE s (id serial PRIMARY KEY, v text);
		CREATE TABLE i (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
		CREATE SEQUENCE free START 100 INCREMENT 5;
		CREATE SEQUENCE untouched;
		CREATE SEQUENCE rewound;
		INSERT INTO s (v) VALUES ('a');`)
	ctx := context.Background()
	ch := openChain(t)
	m, err := FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, db, `
		INSERT INTO s (v) SELECT 'x' FROM generate_series(1, 2999);
		INSERT INTO i (v) SELECT 'y' FROM generate_series(1, 7);
		SELECT nextval('free'), nextval('free');
		SELECT setval('rewound', 50, false);`)
	// A sequence created after the full is not the chain's.
	testenv.Exec(t, db, `CREATE SEQUENCE later; SELECT nextval('later');`)
	admin := testenv.Admin(t)
	defer admin.Close(ctx)
	var until string
	if err := admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&until); err != nil {
		t.Fatal(err)
	}
	capt, err := OpenCapture(ctx, CaptureOptions{DSN: testenv.DSN(db), Slot: m.Source.Slot, Source: m.Source}, m.EndPosition, m.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	if _, err := capt.Next(ctx, source.Limits{Until: until}, func(*chain.Change) error { return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := capt.Sequences(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"public.s_id_seq": 3000, "public.i_id_seq": 7, "public.free": 105}
	if !maps.Equal(got, want) {
		t.Fatalf("sequences %v, want %v", got, want)
	}
}
