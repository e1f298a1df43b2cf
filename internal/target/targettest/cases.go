package targettest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/value"
)

// col is a recorded column of a PostgreSQL type.
func col(name, typ string, oid uint32) chain.Column {
	return chain.Column{Name: name, Type: typ, TypeOID: oid, Encoding: chain.EncodingBinary}
}

// typesTable has one column of every kind a PostgreSQL source records.
func typesTable() chain.Table {
	id := col("id", "bigint", 20)
	id.NotNull = true
	return chain.Table{Schema: "public", Name: "kinds", PrimaryKey: []string{"id"}, Columns: []chain.Column{
		id,
		col("i2", "smallint", 21), col("i4", "integer", 23), col("i8", "bigint", 20),
		col("num", "numeric", 1700), col("num_ps", "numeric(12,3)", 1700),
		col("f4", "real", 700), col("f8", "double precision", 701),
		col("b", "boolean", 16), col("t", "text", 25), col("vc", "character varying(10)", 1043),
		col("by", "bytea", 17), col("d", "date", 1082), col("tm", "time without time zone", 1083),
		col("ts", "timestamp without time zone", 1114), col("tz", "timestamp with time zone", 1184),
		col("iv", "interval", 1186), col("u", "uuid", 2950), col("j", "json", 114), col("jb", "jsonb", 3802),
		col("ai", "integer[]", 1007), col("at", "text[]", 1009),
	}}
}

// typeRows are rows of typesTable in PostgreSQL's text output; "\x00" is NULL.
var typeRows = [][]string{
	{"1", "-32768", "2147483647", "9223372036854775807", "12345678901234567890.12345", "123456789.125",
		"1.5", "-2.25e+100", "t", `héllo, "world" \ 日本`, "abc", `\x00ff10`, "2024-02-29", "23:59:59.999999",
		"2024-01-02 03:04:05.123456", "2024-01-02 03:04:05.123456+00", "1 year 2 mons 3 days 04:05:06.789",
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"a": [1, 2]}`, `{"a": [1, 2]}`, "{1,NULL,3}", `{"x y","",NULL,"q\"uote"}`},
	{"2", "0", "-2147483648", "-9223372036854775808", "-0.000000000000000001", "0.000",
		"0", "4.9e-324", "f", "", "z", `\x`, "0001-01-01", "00:00:00",
		"1970-01-01 00:00:00", "1970-01-01 00:00:00+00", "-00:00:01",
		"00000000-0000-0000-0000-000000000000", "null", "[]", "{}", "{}"},
	{"3", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00",
		"\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00", "\x00"},
}

// normalize renders a value of kind k in PostgreSQL's text form through the
// neutral value, so two spellings of one value compare equal.
func normalize(t *testing.T, k value.Kind, v value.Value) string {
	t.Helper()
	if v.Null {
		return "NULL"
	}
	b, err := value.EncodePGText(k, v)
	if err != nil {
		t.Fatalf("render %+v as %s: %v", v, k.Name, err)
	}
	return string(b)
}

// kindOf is a column's neutral kind, as a chain without recorded kinds
// derives it.
func kindOf(c chain.Column) value.Kind { return value.FromPostgres(c.Type, c.TypeOID) }

// expect decodes recorded text rows into normalized renderings, each
// column by the kind its PostgreSQL type gives.
func expect(t *testing.T, tb *chain.Table, rows [][]string) [][]string {
	t.Helper()
	return expectBy(t, tb, rows, kindOf)
}

// expectBy decodes recorded text rows into normalized renderings, each
// column by kind(column).
func expectBy(t *testing.T, tb *chain.Table, rows [][]string, kind func(chain.Column) value.Kind) [][]string {
	t.Helper()
	out := make([][]string, len(rows))
	for i, r := range rows {
		for j, text := range r {
			if text == "\x00" {
				out[i] = append(out[i], "NULL")
				continue
			}
			k := kind(tb.Columns[j])
			v, err := value.DecodePGText(k, []byte(text))
			if err != nil {
				t.Fatalf("fixture %s = %q: %v", tb.Columns[j].Name, text, err)
			}
			out[i] = append(out[i], normalize(t, k, v))
		}
	}
	return out
}

// got reads a table through the harness into normalized renderings.
func got(t *testing.T, h Harness, tgt target.Target, tb *chain.Table) [][]string {
	t.Helper()
	rows := h.Read(t, tgt, tb)
	out := make([][]string, len(rows))
	for i, r := range rows {
		if len(r) != len(tb.Columns) {
			t.Fatalf("row %d has %d values, the table %d columns", i, len(r), len(tb.Columns))
		}
		for j, v := range r {
			out[i] = append(out[i], normalize(t, kindOf(tb.Columns[j]), v))
		}
	}
	return out
}

func sameRows(t *testing.T, tb *chain.Table, got, want [][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s holds %d rows, want %d:\n%v", tb.Name, len(got), len(want), got)
	}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Errorf("%s row %d column %s: %q, want %q", tb.Name, i, tb.Columns[j].Name, got[i][j], want[i][j])
			}
		}
	}
}

func insert(tb *chain.Table, values ...string) chain.Change {
	return chain.Change{Op: chain.OpInsert, Table: tb.QualifiedName(), New: chaintest.Text(values...)}
}

func typesRoundTrip(t *testing.T, h Harness) {
	tb := typesTable()
	s := &chain.Schema{Tables: []chain.Table{tb}}
	tgt := h.New(t)
	restore(t, tgt, s)
	var changes []chain.Change
	for _, r := range typeRows {
		changes = append(changes, insert(&tb, r...))
	}
	ch, m := chaintest.WriteIncremental(t, chaintest.Txn(10, changes...), 100)
	if err := applyLinks(t, tgt, s, ch, m); err != nil {
		t.Fatal(err)
	}
	sameRows(t, &tb, got(t, h, tgt, &tb), expect(t, &tb, typeRows))
}

// specialValues applies, each in an incremental of its own, values some
// engines cannot hold exactly: each comes back unchanged, or is refused with
// the code the harness names — never rounded or NULLed.
func specialValues(t *testing.T, h Harness) {
	tb := typesTable()
	s := &chain.Schema{Tables: []chain.Table{tb}}
	cases := []struct{ column, text string }{
		{"num", "NaN"}, {"num", "Infinity"}, {"num", "-Infinity"},
		{"f8", "NaN"}, {"f8", "Infinity"}, {"f8", "-Infinity"}, {"f4", "-0"},
		{"d", "infinity"}, {"d", "-infinity"}, {"d", "0044-03-15 BC"},
		{"ts", "infinity"}, {"tz", "-infinity"},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%s=%s", tc.column, tc.text), func(t *testing.T) {
			tgt := h.New(t)
			restore(t, tgt, s)
			row := make([]string, len(tb.Columns))
			for j, c := range tb.Columns {
				row[j] = "\x00"
				if c.Name == tc.column {
					row[j] = tc.text
				}
			}
			row[0] = fmt.Sprint(100 + i)
			ch, m := chaintest.WriteIncremental(t, chaintest.Txn(20, insert(&tb, row...)), 100)
			err := applyLinks(t, tgt, s, ch, m)
			var k value.Kind
			for _, c := range tb.Columns {
				if c.Name == tc.column {
					k = kindOf(c)
				}
			}
			if code := h.Refusal(k, tc.text); code != "" {
				requireCode(t, err, code)
				if rows := h.Read(t, tgt, &tb); len(rows) != 0 {
					t.Errorf("a refused value left %d rows", len(rows))
				}
				if pos := position(t, tgt); pos.LastApplied != full || pos.InProgress != nil {
					t.Errorf("a refused incremental moved the position: %+v", pos)
				}
				return
			}
			if err != nil {
				t.Fatalf("the harness says the engine holds %s=%s: %v", tc.column, tc.text, err)
			}
			sameRows(t, &tb, got(t, h, tgt, &tb), expect(t, &tb, [][]string{row}))
		})
	}
}

// keyed is a table with a primary key; keyless has none.
func keyed() chain.Table {
	id := col("id", "integer", 23)
	id.NotNull = true
	return chain.Table{Schema: "public", Name: "keyed", PrimaryKey: []string{"id"}, Columns: []chain.Column{id, col("v", "text", 25)}}
}

func keyless() chain.Table {
	return chain.Table{Schema: "public", Name: "keyless", Columns: []chain.Column{col("a", "integer", 23), col("b", "text", 25)}}
}

func pair() (*chain.Schema, *chain.Table, *chain.Table) {
	s := &chain.Schema{Tables: []chain.Table{keyed(), keyless()}}
	return s, &s.Tables[0], &s.Tables[1]
}

// An insert applied again (a transaction without identity, delivered twice)
// converges on the key instead of failing or doubling the row.
func reappliedInsert(t *testing.T, h Harness) {
	s, k, _ := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	unidentified := func(v string) []chain.Change {
		recs := chaintest.Txn(30, insert(k, "1", v))
		for i := range recs {
			recs[i].Identified = false
		}
		return recs
	}
	ch := chaintest.Store(t)
	first := chaintest.AddIncremental(t, ch, unidentified("a"), 100)
	second := chaintest.AddIncremental(t, ch, append(unidentified("b"), chaintest.Txn(31, insert(k, "2", "c"))...), 100)
	if err := applyLinks(t, tgt, s, ch, first, second); err != nil {
		t.Fatal(err)
	}
	sameRows(t, k, got(t, h, tgt, k), expect(t, k, [][]string{{"1", "b"}, {"2", "c"}}))
}

// A transaction delivered again in the next incremental (same identity) is
// skipped by its marks, even on a keyless table, where applying it again
// would double the row.
func marksSkip(t *testing.T, h Harness) {
	s, _, kl := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	ch := chaintest.Store(t)
	tx := chaintest.Txn(40, insert(kl, "1", "x"), insert(kl, "1", "x"))
	first := chaintest.AddIncremental(t, ch, tx, 100)
	second := chaintest.AddIncremental(t, ch, append(append([]chain.Change{}, tx...), chaintest.Txn(41, insert(kl, "2", "y"))...), 100)
	if err := applyLinks(t, tgt, s, ch, first, second); err != nil {
		t.Fatal(err)
	}
	sameRows(t, kl, got(t, h, tgt, kl), expect(t, kl, [][]string{{"1", "x"}, {"1", "x"}, {"2", "y"}}))
	if pos := position(t, tgt); pos.LastApplied != second.ID {
		t.Errorf("position %+v, want past %s", pos, second.ID)
	}
}

// A transaction the target refuses takes the rows of the transactions
// before it, in the same apply transaction, and the position with it:
// nothing is half-written.
func commitTogether(t *testing.T, h Harness) {
	s, k, _ := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	recs := append(chaintest.Txn(50, insert(k, "1", "a")), chaintest.Txn(51, insert(k, "not a number", "b"))...)
	ch, m := chaintest.WriteIncremental(t, recs, 100)
	requireCode(t, applyLinks(t, tgt, s, ch, m), errcode.TargetValueRefused)
	if rows := got(t, h, tgt, k); len(rows) != 0 {
		t.Errorf("rows %v committed without their position", rows)
	}
	if pos := position(t, tgt); pos.LastApplied != full || pos.InProgress != nil {
		t.Errorf("position moved: %+v", pos)
	}
}

// Updates and deletes find their row by key on a keyed table and by the
// whole old row on a keyless one, where exactly one of two equal rows goes.
func updatesAndDeletes(t *testing.T, h Harness) {
	s, k, kl := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	recs := chaintest.Txn(60,
		insert(k, "1", "a"), insert(k, "2", "b"), insert(kl, "7", "x"), insert(kl, "7", "x"), insert(kl, "8", "y"))
	recs = append(recs, chaintest.Txn(61,
		chain.Change{Op: chain.OpUpdate, Table: k.QualifiedName(), New: chaintest.Text("1", "a2"), OldKind: 'K', Old: chaintest.Text("1", "\x00")},
		chain.Change{Op: chain.OpUpdate, Table: k.QualifiedName(), New: chaintest.Text("3", "b"), OldKind: 'K', Old: chaintest.Text("2", "\x00")},
		chain.Change{Op: chain.OpDelete, Table: kl.QualifiedName(), OldKind: 'O', Old: chaintest.Text("7", "x")},
		chain.Change{Op: chain.OpUpdate, Table: kl.QualifiedName(), New: chaintest.Text("8", "z"), OldKind: 'O', Old: chaintest.Text("8", "y")},
	)...)
	ch, m := chaintest.WriteIncremental(t, recs, 100)
	if err := applyLinks(t, tgt, s, ch, m); err != nil {
		t.Fatal(err)
	}
	sameRows(t, k, got(t, h, tgt, k), expect(t, k, [][]string{{"1", "a2"}, {"3", "b"}}))
	sameRows(t, kl, got(t, h, tgt, kl), expect(t, kl, [][]string{{"7", "x"}, {"8", "z"}}))
}

// The broker's judgment before an incremental: a keyed table arbitrates on
// its key; a keyless table replays exactly once through marks when the
// changes carry identities, and is refused when they do not.
func keyJudgments(t *testing.T, h Harness) {
	s, k, kl := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	ctx := context.Background()
	ch, m := chaintest.WriteIncremental(t, append(chaintest.Txn(70, insert(k, "1", "a")), chaintest.Txn(71, insert(kl, "1", "a"))...), 100)
	j, err := tgt.JudgeIncremental(ctx, ch, m, s, nil)
	if err != nil {
		t.Fatalf("identified changes to a keyed and a keyless table: %v", err)
	}
	if a := j.Arbiters[k.QualifiedName()]; len(a) != 1 || a[0] != "id" {
		t.Errorf("arbiters %v, want [id] for %s", j.Arbiters, k.QualifiedName())
	}
	recs := chaintest.Txn(72, insert(kl, "1", "a"))
	for i := range recs {
		recs[i].Identified = false
	}
	ch, m = chaintest.WriteIncremental(t, recs, 100)
	_, err = tgt.JudgeIncremental(ctx, ch, m, s, nil)
	requireCode(t, err, errcode.BrokerKeylessTable)
}

// A run whose stream another run took over cannot apply.
func fenced(t *testing.T, h Harness) {
	s, k, _ := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	ch, m := chaintest.WriteIncremental(t, chaintest.Txn(80, insert(k, "1", "a")), 100)
	_, err := applyWithOwner(t, tgt, s, ch, m, "run-0")
	requireCode(t, err, errcode.BrokerFenced)
	if rows := got(t, h, tgt, k); len(rows) != 0 {
		t.Errorf("a fenced run committed %v", rows)
	}
}

// A restore into tables that already hold rows is refused unless told to
// replace them.
func nonEmpty(t *testing.T, h Harness) {
	s, k, _ := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	ch, m := chaintest.WriteIncremental(t, chaintest.Txn(90, insert(k, "1", "a")), 100)
	if err := applyLinks(t, tgt, s, ch, m); err != nil {
		t.Fatal(err)
	}
	requireCode(t, tgt.Prepare(context.Background(), s, false), errcode.TargetNotEmpty)
	if err := tgt.Prepare(context.Background(), s, true); err != nil {
		t.Fatalf("prepare with replace: %v", err)
	}
}

// Changes to one row inside a source transaction keep their order however
// an engine batches them: a key deleted and inserted again, updated and
// deleted, ends as the source left it.
func repeatedKeys(t *testing.T, h Harness) {
	s, k, _ := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	upd := func(id, v string) chain.Change {
		return chain.Change{Op: chain.OpUpdate, Table: k.QualifiedName(), New: chaintest.Text(id, v), OldKind: 'K', Old: chaintest.Text(id, "\x00")}
	}
	del := func(id string) chain.Change {
		return chain.Change{Op: chain.OpDelete, Table: k.QualifiedName(), OldKind: 'K', Old: chaintest.Text(id, "\x00")}
	}
	recs := chaintest.Txn(100,
		insert(k, "1", "a"), del("1"), insert(k, "1", "b"),
		insert(k, "2", "a"), upd("2", "b"), del("2"), insert(k, "2", "c"),
		insert(k, "3", "a"), insert(k, "4", "a"), del("3"), upd("4", "d"), insert(k, "3", "e"), del("4"),
		insert(k, "5", "gone"), del("5"))
	ch, m := chaintest.WriteIncremental(t, recs, 100)
	if err := applyLinks(t, tgt, s, ch, m); err != nil {
		t.Fatal(err)
	}
	sameRows(t, k, got(t, h, tgt, k), expect(t, k, [][]string{{"1", "b"}, {"2", "c"}, {"3", "e"}}))
}

// An update that moves a row to another key, between inserts of both
// keys, lands where the source put it.
func keyChange(t *testing.T, h Harness) {
	s, k, _ := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	recs := chaintest.Txn(110,
		insert(k, "1", "a"), insert(k, "2", "b"),
		chain.Change{Op: chain.OpUpdate, Table: k.QualifiedName(), New: chaintest.Text("3", "a"), OldKind: 'K', Old: chaintest.Text("1", "\x00")},
		insert(k, "1", "again"),
		chain.Change{Op: chain.OpDelete, Table: k.QualifiedName(), OldKind: 'K', Old: chaintest.Text("2", "\x00")},
		insert(k, "2", "back"))
	ch, m := chaintest.WriteIncremental(t, recs, 100)
	if err := applyLinks(t, tgt, s, ch, m); err != nil {
		t.Fatal(err)
	}
	sameRows(t, k, got(t, h, tgt, k), expect(t, k, [][]string{{"1", "again"}, {"2", "back"}, {"3", "a"}}))
}

// A run interrupted inside a large transaction (its context cancelled
// while the engine holds rows back) commits nothing of it; the next run
// resumes from the last checkpoint and applies every change once, a
// keyless table's duplicate rows included.
func interruptedBatch(t *testing.T, h Harness) {
	s, k, kl := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	var recs []chain.Change
	var wantK, wantKL [][]string
	for x := range 6 {
		var txn []chain.Change
		for i := range 400 {
			id := fmt.Sprint(x*1000 + i)
			txn = append(txn, insert(k, id, "v"), insert(kl, "7", "dup"))
			wantK = append(wantK, []string{id, "v"})
			wantKL = append(wantKL, []string{"7", "dup"})
		}
		recs = append(recs, chaintest.Txn(uint32(200+x), txn...)...)
	}
	ch, m := chaintest.WriteIncremental(t, recs, 300)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := apply.ApplyIncremental(ctx, ch, m, s, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: full, CheckpointChanges: 1000,
		Progress: func(applied int64) {
			if applied >= 3000 {
				cancel()
			}
		}})
	cancel()
	if err == nil {
		t.Fatal("the interrupted run finished")
	}
	if _, err := apply.ApplyIncremental(context.Background(), ch, m, s, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: full, CheckpointChanges: 1000}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	sortRows := func(rows [][]string) [][]string {
		slices.SortFunc(rows, func(a, b []string) int { return strings.Compare(strings.Join(a, "|"), strings.Join(b, "|")) })
		return rows
	}
	sameRows(t, k, sortRows(got(t, h, tgt, k)), sortRows(expect(t, k, wantK)))
	sameRows(t, kl, got(t, h, tgt, kl), expect(t, kl, wantKL))
	if pos := position(t, tgt); pos.LastApplied != m.ID {
		t.Errorf("position %+v, want past %s", pos, m.ID)
	}
}

// The marks of many source transactions, written in one lane commit, read
// back exactly as they were written: identities by xid and commit LSN
// (past 2^63 too) and by an opaque transaction ID, ordinals as ranges. The
// same marks committed again change nothing, and a commit that prunes
// keeps only the named link's.
func marksRoundTrip(t *testing.T, h Harness) {
	s, _, _ := pair()
	tgt := h.New(t)
	restore(t, tgt, s)
	ctx := context.Background()
	lane, err := tgt.OpenLane(ctx, target.LaneConfig{Schema: s, Stream: "marks"})
	if err != nil {
		t.Fatal(err)
	}
	defer lane.Close(ctx)
	type mark struct {
		id          chain.Identity
		first, last uint32
	}
	batch := func(link string, from, n int) (*target.MarkBatch, []mark) {
		b := &target.MarkBatch{}
		var want []mark
		for i := from; i < from+n; i++ {
			id := chain.Identity{XID: uint32(i), CommitLSN: 1<<63 + uint64(i)*7}
			if i%3 == 0 {
				id = chain.Identity{Tx: fmt.Sprintf("0-1-%d", i)}
			}
			for o := uint32(0); o <= uint32(i%4); o++ {
				b.Add(link, id, o)
			}
			b.Add(link, id, 10)
			want = append(want, mark{id, 0, uint32(i % 4)}, mark{id, 10, 10})
		}
		return b, want
	}
	sorted := func(ms []mark) []mark {
		key := func(m mark) string {
			return fmt.Sprintf("%s/%020d/%010d/%010d", m.id.Tx, m.id.CommitLSN, m.id.XID, m.first)
		}
		out := slices.Clone(ms)
		slices.SortFunc(out, func(a, b mark) int { return strings.Compare(key(a), key(b)) })
		return out
	}
	read := func() []mark {
		t.Helper()
		var out []mark
		if err := tgt.State().ReadMarks(ctx, "marks", func(id chain.Identity, first, last uint32) { out = append(out, mark{id, first, last}) }); err != nil {
			t.Fatal(err)
		}
		return sorted(out)
	}
	row := &target.StateRow{Token: "token", Checksum: "checksum"}
	b, want := batch("link-a", 0, 1234)
	for range 2 {
		if err := lane.Commit(ctx, target.Commit{Marks: b, Position: row}); err != nil {
			t.Fatal(err)
		}
		if got := read(); !slices.Equal(got, sorted(want)) {
			t.Fatalf("read %d marks back, want the %d written (first differing: %v)", len(got), len(want), firstDiff(got, sorted(want)))
		}
	}
	b, want = batch("link-b", 5000, 3)
	if err := lane.Commit(ctx, target.Commit{Marks: b, Position: row, PruneMarksExcept: "link-b"}); err != nil {
		t.Fatal(err)
	}
	if got := read(); !slices.Equal(got, sorted(want)) {
		t.Fatalf("after the prune: %v, want only link-b's %v", got, want)
	}
}

// firstDiff is the first element where a and b differ, for a message.
func firstDiff[T comparable](a, b []T) any {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return []T{a[i], b[i]}
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}
