package postgres

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// A target database whose own settings read text differently (XML as
// documents only, day-first dates, sql_standard intervals, another zone)
// still reads the chain's text values as the source printed them: an XML
// fragment, an ISO 8601 interval with a negative day, money in the C
// locale.
func TestApplyReadsTextUnderTheChainsSettings(t *testing.T) {
	db := testenv.CreateDB(t, "textsettings")
	for _, s := range []string{"xmloption = document", "DateStyle = 'SQL, DMY'", "IntervalStyle = 'sql_standard'", "TimeZone = 'Asia/Kathmandu'"} {
		testenv.Exec(t, db, fmt.Sprintf("ALTER DATABASE %s SET %s", pgx.Identifier{db}.Sanitize(), s))
	}
	testenv.Exec(t, db, `CREATE TABLE public.t (id int PRIMARY KEY, x xml, iv interval, m money, tz timestamptz)`)
	conn, err := connect(t.Context(), testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(t.Context()) })
	schema := &chain.Schema{Tables: []chain.Table{{Schema: "public", Name: "t", PrimaryKey: []string{"id"}, Columns: []chain.Column{
		{Name: "id", Type: "integer", TypeOID: 23, NotNull: true},
		{Name: "x", Type: "xml", TypeOID: 142},
		{Name: "iv", Type: "interval", TypeOID: 1186},
		{Name: "m", Type: "money", TypeOID: 790},
		{Name: "tz", Type: "timestamp with time zone", TypeOID: 1184},
	}}}}
	text := func(s string) chain.Value { return chain.Value{Kind: chain.ValueText, Data: []byte(s)} }
	applyTx(t, conn, newApplier(schema), chain.Change{Op: chain.OpInsert, Table: "public.t", Identified: true,
		New: []chain.Value{text("1"), text("text only <a/>"), text("P-1DT2H3M4S"), text("$1,234.56"), text("2000-02-13 01:02:03.456789+00")}})
	got := rowsOf(t, conn, `SELECT x::text, iv = '-1 day 2 hours 3 minutes 4 seconds'::interval, m = 1234.56::money,
		tz = '2000-02-13 01:02:03.456789+00'::timestamptz FROM public.t`)
	if len(got) != 1 || got[0] != "text only <a/>|t|t|t" {
		t.Fatalf("applied row reads %q", got)
	}
}
