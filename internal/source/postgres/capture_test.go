package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/testenv"
)

// textSettingsTable has a column of each type whose text form depends on
// the session's settings, and a composite of them, which travels as text
// in a full too.
const textSettingsTable = `
CREATE TYPE public.textish AS (iv interval, f float8, d date, b bytea);
CREATE TABLE public.t (id int PRIMARY KEY, iv interval, f4 float4, f8 float8, d date, ts timestamp, tz timestamptz,
	b bytea, m money, c public.textish);`

// textSettingsRows are values that a session with odd settings prints in a
// form another session reads differently, or not at all: a sql_standard
// interval with a negative day, a float rounded by extra_float_digits 0, a
// SQL-style day-first date, escaped bytea, and the smallest interval,
// whose postgres-style text PostgreSQL cannot read back.
const textSettingsRows = `
INSERT INTO public.t VALUES
 (%[1]d, '-1 day +02:03:04', 0.1, 0.1::float8 + 0.2, '2000-02-13', '2000-02-13 01:02:03.456789', '2000-02-13 01:02:03.456789+05:30',
  '\x00ff5c', 12.34, ROW('-1 day +02:03:04', 0.1::float8 + 0.2, '2000-02-13', '\x00ff5c')),
 (%[1]d + 1, '-178956970 years -8 months -2147483648 days -2562047788 hours -54.775808 seconds', 3.4028235e38, 2.225073858507201e-308,
  '4713-01-01 BC', '294276-12-31 23:59:59.999999', '4714-11-24 00:00:00+00 BC', '\x', -92233720368547758.08,
  ROW('-178956970 years -8 months -2147483648 days -2562047788 hours -54.775808 seconds', 4.9e-324, '5874897-12-31', '\x'))`

// textSettingsColumns are t's columns after id, in order.
var textSettingsColumns = []struct{ name, typ string }{
	{"iv", "interval"}, {"f4", "float4"}, {"f8", "float8"}, {"d", "date"}, {"ts", "timestamp"}, {"tz", "timestamptz"},
	{"b", "bytea"}, {"m", "money"}, {"c", "public.textish"},
}

// oddSettings gives a database session settings under which values print
// in forms a default session misreads.
func oddSettings(t *testing.T, db string) {
	t.Helper()
	for _, s := range []string{"IntervalStyle = 'sql_standard'", "DateStyle = 'SQL, DMY'", "extra_float_digits = 0",
		"bytea_output = 'escape'", "TimeZone = 'Asia/Kathmandu'"} {
		testenv.Exec(t, db, fmt.Sprintf("ALTER DATABASE %s SET %s", pgx.Identifier{db}.Sanitize(), s))
	}
}

// readerSession connects to db as a target would: with the server's
// default settings, whatever the database's own say.
func readerSession(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"IntervalStyle": "postgres", "DateStyle": "ISO, MDY", "extra_float_digits": "1",
		"bytea_output": "hex", "TimeZone": "UTC"} {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// requireReadsBack checks that the text value of column col of row id, as
// the chain carries it, reads back in a default session as the source's
// value.
func requireReadsBack(t *testing.T, conn *pgx.Conn, id int, col, typ string, text []byte) {
	t.Helper()
	var same bool
	err := conn.QueryRow(context.Background(),
		fmt.Sprintf(`SELECT row($1::text::%s)::text IS NOT DISTINCT FROM row(%s)::text FROM public.t WHERE id = $2`, typ, col), string(text), id).Scan(&same)
	if err != nil {
		t.Errorf("row %d column %s: the chain's text %q does not read back: %v", id, col, text, err)
		return
	}
	if !same {
		var want string
		_ = conn.QueryRow(context.Background(), fmt.Sprintf(`SELECT %s::text FROM public.t WHERE id = $1`, col), id).Scan(&want)
		t.Errorf("row %d column %s: the chain's text %q reads back as another value than the source's %q", id, col, text, want)
	}
}

// Values a full carries as text, and every value a capture reads from
// pgoutput, print under the chain's own session settings, not the source
// database's: a target reads them back as the same values whatever either
// side's configuration.
func TestTextValuesIgnoreTheSourceSessionSettings(t *testing.T) {
	db := testenv.CreateDB(t, "textsettings")
	oddSettings(t, db)
	testenv.Exec(t, db, textSettingsTable)
	testenv.Exec(t, db, fmt.Sprintf(textSettingsRows, 1))
	ctx := context.Background()
	ch := openChain(t)
	m, err := FullBackup(ctx, ch, FullBackupOptions{DSN: testenv.DSN(db), ChainSlot: true, AttemptID: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	admin := testenv.Admin(t)
	defer admin.Close(ctx)
	t.Cleanup(func() { _, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, m.Source.Slot) })
	reader := readerSession(t, db)

	// The full: the composite column is the one recorded as text.
	var table *chain.Table
	for i := range m.Schema.Tables {
		if m.Schema.Tables[i].QualifiedName() == "public.t" {
			table = &m.Schema.Tables[i]
		}
	}
	if table == nil || table.Columns[len(table.Columns)-1].Encoding != chain.EncodingText {
		t.Fatalf("public.t's composite column is not recorded as text: %+v", table)
	}
	for _, td := range m.Tables {
		if td.Table != "public.t" {
			continue
		}
		for _, ref := range td.Chunks {
			hdr, body, err := ch.ReadChunk(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			it := chain.NewTupleIter(body, hdr.Columns)
			for it.Next() {
				v := it.Values()
				id := int(int32(uint32(v[0][0])<<24 | uint32(v[0][1])<<16 | uint32(v[0][2])<<8 | uint32(v[0][3])))
				requireReadsBack(t, reader, id, "c", "public.textish", v[len(v)-1])
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
		}
	}

	// The capture: every value of a pgoutput tuple is text.
	testenv.Exec(t, db, fmt.Sprintf(textSettingsRows, 10))
	var until string
	if err := admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&until); err != nil {
		t.Fatal(err)
	}
	capt, err := OpenCapture(ctx, CaptureOptions{DSN: testenv.DSN(db), Slot: m.Source.Slot, Source: m.Source}, m.EndPosition, m.Schema)
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	inserts := 0
	_, err = capt.Next(ctx, source.Limits{Until: until}, func(c *chain.Change) error {
		if c.Op != chain.OpInsert || c.Table != "public.t" {
			return nil
		}
		inserts++
		var id int
		if _, err := fmt.Sscan(string(c.New[0].Data), &id); err != nil {
			return fmt.Errorf("id %q: %w", c.New[0].Data, err)
		}
		for i, col := range textSettingsColumns {
			requireReadsBack(t, reader, id, col.name, col.typ, c.New[i+1].Data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if inserts != 2 {
		t.Fatalf("captured %d inserts into public.t, want 2", inserts)
	}
}
