package sqlite

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

var pairsTable = chain.Table{Schema: "public", Name: "pairs", PrimaryKey: []string{"k1", "k2"},
	Columns: []chain.Column{notNull(col("k1", "text", 25)), notNull(col("k2", "bigint", 20)), col("v", "text", 25)}}

var strictTable = chain.Table{Schema: "public", Name: "strict", PrimaryKey: []string{"id"},
	Columns: []chain.Column{notNull(col("id", "bigint", 20)), notNull(col("name", "text", 25)), col("x", "double precision", 701)}}

// batchSizes lists the row counts of the multi-row statements the lane
// prepared for a table, by kind ('i', 'd' or 'u').
func batchSizes(l target.Lane, table string, kind byte) []int {
	ts := l.(*lane).app.tables[table]
	var out []int
	for k := range ts.stmts {
		if len(k) >= 4 && k[0] == '#' && k[1] == kind {
			out = append(out, int(k[len(k)-2])<<8|int(k[len(k)-1]))
		}
	}
	slices.Sort(out)
	return out
}

func upd(table string, old, next []chain.Value) chain.Change {
	return chain.Change{Op: chain.OpUpdate, Table: table, OldKind: 'K', Old: old, New: next}
}

func del(table string, old []chain.Value) chain.Change {
	return chain.Change{Op: chain.OpDelete, Table: table, OldKind: 'K', Old: old}
}

func TestBatchLargerThanTheParameterLimit(t *testing.T) {
	// 200 columns: a statement carries at most 32766/200 = 163 rows.
	wide := chain.Table{Schema: "public", Name: "wide", PrimaryKey: []string{"c0"}}
	for i := range 200 {
		c := col("c"+strconv.Itoa(i), "bigint", 20)
		if i == 0 {
			c = notNull(c)
		}
		wide.Columns = append(wide.Columns, c)
	}
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, created(wide)...))
	var recs []chain.Change
	for r := range 1000 {
		vals := make([]string, 200)
		for i := range vals {
			vals[i] = strconv.Itoa(r*1000 + i)
		}
		recs = append(recs, ins("public.wide", txt(vals...)...))
	}
	applyAll(t, l, chaintest.Txn(2, recs...))
	wantRows(t, tg, "SELECT count(*), sum(c199 - c0) FROM wide", "1000|199000")
	// 4096 held rows at most go out together; here 1000 = 6×163 + 16 + 4 + 2.
	if got := batchSizes(l, "public.wide", 'i'); !slices.Equal(got, []int{2, 4, 16, 163}) {
		t.Errorf("insert statements of %v rows", got)
	}
}

func TestBatchManyNarrowRows(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, created(itemsTable)...))
	var recs []chain.Change
	for i := range 5000 {
		recs = append(recs, ins("public.items", txt(strconv.Itoa(i), "n"+strconv.Itoa(i), "\x00")...))
	}
	for i := 0; i < 5000; i += 3 {
		recs = append(recs, del("public.items", txt(strconv.Itoa(i), "\x00", "\x00")))
	}
	applyAll(t, l, chaintest.Txn(2, recs...))
	wantRows(t, tg, "SELECT count(*), sum(id) FROM items", "3333|8331667")
	if got := batchSizes(l, "public.items", 'd'); len(got) == 0 || got[len(got)-1] != batchRows {
		t.Errorf("delete statements of %v rows", got)
	}
}

func TestBatchCompositeKeys(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, created(pairsTable)...))
	var recs []chain.Change
	for i := range 40 {
		recs = append(recs, ins("public.pairs", txt("k"+strconv.Itoa(i%4), strconv.Itoa(i), "v")...))
	}
	for i := range 40 {
		key := txt("k"+strconv.Itoa(i%4), strconv.Itoa(i), "\x00")
		switch i % 4 {
		case 0:
			recs = append(recs, del("public.pairs", key))
		case 1:
			recs = append(recs, upd("public.pairs", key, txt("k"+strconv.Itoa(i%4), strconv.Itoa(i), "u")))
		case 2: // the key moves: k2 + 1000
			recs = append(recs, upd("public.pairs", key, txt("k2", strconv.Itoa(i+1000), "moved")))
		}
	}
	applyAll(t, l, chaintest.Txn(2, recs...))
	wantRows(t, tg, "SELECT v, count(*) FROM pairs GROUP BY v ORDER BY v", "moved|10", "u|10", "v|10")
	wantRows(t, tg, "SELECT count(*) FROM pairs WHERE k2 % 4 = 0", "0")
	if batchSizes(l, "public.pairs", 'd') == nil || batchSizes(l, "public.pairs", 'u') == nil {
		t.Error("no multi-row delete or update on a composite key")
	}
}

func TestBatchRefusedValueNamesItsChange(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, created(strictTable)...))
	recs := chaintest.Txn(2,
		ins("public.strict", txt("1", "a", "1.5")...),
		ins("public.strict", txt("2", "b", "2.5")...),
		ins("public.strict", txt("3", "c", "NaN")...))
	ctx := context.Background()
	var err error
	for i := range recs {
		if err = l.Apply(ctx, &recs[i]); err != nil {
			break
		}
	}
	wantCode(t, err, errcode.TargetValueRefused)
	for _, part := range []string{"public.strict", "xid 2, change 2", "column x", "NaN"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %q", err, part)
		}
	}
	wantRows(t, tg, "SELECT count(*) FROM strict", "0")
}

func TestBatchConstraintFailureNamesItsChange(t *testing.T) {
	for _, c := range []struct {
		name string
		bad  chain.Change
		op   string
	}{
		{"insert", ins("public.strict", txt("7", "\x00", "1")...), "insert"},
		{"update", upd("public.strict", txt("3", "\x00", "\x00"), txt("3", "\x00", "2")), "update"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := openTarget(t)
			l := openLane(t, tg, nil, nil)
			var seed []chain.Change
			for i := range 5 {
				seed = append(seed, ins("public.strict", txt(strconv.Itoa(i), "s", "0")...))
			}
			applyAll(t, l, chaintest.Txn(1, append(created(strictTable), seed...)...))
			var recs []chain.Change
			for i := 10; i < 20; i++ {
				recs = append(recs, ins("public.strict", txt(strconv.Itoa(i), "n", "0")...))
			}
			recs = append(recs, upd("public.strict", txt("1", "\x00", "\x00"), txt("1", "one", "1")), c.bad,
				upd("public.strict", txt("2", "\x00", "\x00"), txt("2", "two", "1")))
			ctx := context.Background()
			txn := chaintest.Txn(2, recs...)
			for i := range txn {
				if err := l.Apply(ctx, &txn[i]); err != nil {
					t.Fatal(err)
				}
			}
			err := l.Commit(ctx, target.Commit{})
			if err == nil {
				t.Fatal("a NULL in a NOT NULL column committed")
			}
			want := "apply " + c.op + " to public.strict (xid 2, change 11)"
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "NOT NULL") {
				t.Errorf("error %q, want it to name %q", err, want)
			}
			wantRows(t, tg, "SELECT count(*), group_concat(name) FROM strict", "5|s,s,s,s,s")
		})
	}
}

func TestBatchKeylessInsertsThenDelete(t *testing.T) {
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	row := txt("2026-05-01", "same")
	applyAll(t, l, chaintest.Txn(1, append(created(logTable),
		ins("public.log", row...), ins("public.log", row...), ins("public.log", txt("2026-05-02", "other")...),
		chain.Change{Op: chain.OpDelete, Table: "public.log", OldKind: 'O', Old: row},
		chain.Change{Op: chain.OpDelete, Table: "public.log", OldKind: 'O', Old: txt("2026-05-02", "other")},
		ins("public.log", txt("2026-05-02", "other")...))...))
	wantRows(t, tg, "SELECT at, msg FROM log ORDER BY rowid", "2026-05-01|same", "2026-05-02|other")
	if got := batchSizes(l, "public.log", 'i'); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("keyless insert statements of %v rows", got)
	}
}

func TestBatchNothingHeldWhereOrderShows(t *testing.T) {
	unique := itemsTable
	unique.Name = "uitems"
	unique.Indexes = []chain.Index{{Name: "uitems_name", Columns: []string{"name"}, Unique: true}}
	tg := openTarget(t)
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, created(unique, itemsTable)...))
	// Two rows swap names: a second unique index would see them collide
	// if the updates were reordered.
	applyAll(t, l, chaintest.Txn(2, ins("public.uitems", txt("1", "a", "\x00")...), ins("public.uitems", txt("2", "b", "\x00")...),
		upd("public.uitems", txt("1", "\x00", "\x00"), txt("1", "c", "\x00")),
		upd("public.uitems", txt("2", "\x00", "\x00"), txt("2", "a", "\x00"))))
	wantRows(t, tg, "SELECT id, name FROM uitems ORDER BY id", "1|c", "2|a")
	if got := batchSizes(l, "public.uitems", 'i'); got != nil {
		t.Errorf("a table with a second unique index batched inserts of %v rows", got)
	}

	// A trigger anywhere turns holding back off for a new lane.
	exec(t, tg, `CREATE TRIGGER items_seen AFTER INSERT ON uitems BEGIN SELECT 1; END`)
	l2 := openLane(t, tg, &chain.Schema{Tables: []chain.Table{unique, itemsTable}}, nil)
	applyAll(t, l2, chaintest.Txn(3, ins("public.items", txt("1", "a", "\x00")...), ins("public.items", txt("2", "b", "\x00")...)))
	if got := batchSizes(l2, "public.items", 'i'); got != nil {
		t.Errorf("inserts batched with a trigger defined: %v", got)
	}
	wantRows(t, tg, "SELECT count(*) FROM items", "2")
}

func TestBatchSentBeforeTrackAndTruncate(t *testing.T) {
	tg := openTarget(t)
	ctx := context.Background()
	l := openLane(t, tg, nil, nil)
	applyAll(t, l, chaintest.Txn(1, created(itemsTable, logTable)...))
	recs := chaintest.Txn(2, ins("public.items", txt("1", "a", "\x00")...), ins("public.log", txt("2026-01-01", "m")...),
		chain.Change{Op: chain.OpTruncate, Tables: []string{"public.log"}},
		ins("public.items", txt("2", "b", "\x00")...))
	for i := range recs {
		if err := l.Apply(ctx, &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !l.(*lane).app.holds() {
		t.Fatal("the lane holds nothing back")
	}
	rec := created(itemsTable)[0]
	l.Track(&rec)
	if l.(*lane).app.holds() {
		t.Fatal("rows held across Track")
	}
	if err := l.Commit(ctx, target.Commit{}); err != nil {
		t.Fatal(err)
	}
	wantRows(t, tg, "SELECT (SELECT group_concat(id) FROM items), (SELECT count(*) FROM log)", "1,2|0")
}

// TestBatchedEqualsOneByOne applies random mixed changes to three tables
// (one keyed, one on a composite key, one keyless), key changes and
// repeated keys among them, both ways, and compares the tables.
func TestBatchedEqualsOneByOne(t *testing.T) {
	recs := mixedChanges(rand.New(rand.NewPCG(7, 9)), 6000)
	dump := func(batched bool) string {
		batching = batched
		defer func() { batching = true }()
		tg := openTarget(t)
		l := openLane(t, tg, nil, nil)
		applyAll(t, l, chaintest.Txn(1, created(itemsTable, pairsTable, logTable)...))
		ctx := context.Background()
		for i := range recs {
			if err := l.Apply(ctx, &recs[i]); err != nil {
				t.Fatal(err)
			}
			if recs[i].Op == chain.OpCommit && i%3 == 0 {
				if err := l.Commit(ctx, target.Commit{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.Commit(ctx, target.Commit{}); err != nil {
			t.Fatal(err)
		}
		if batched && batchSizes(l, "public.items", 'u') == nil {
			t.Error("no batched update")
		}
		var b strings.Builder
		for _, q := range []string{
			"SELECT id, quote(name), quote(note) FROM items ORDER BY id",
			"SELECT k1, k2, quote(v) FROM pairs ORDER BY k1, k2",
			"SELECT at, msg, rowid FROM log ORDER BY rowid",
		} {
			rows, err := tg.db.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var x, y, z string
				if err := rows.Scan(&x, &y, &z); err != nil {
					t.Fatal(err)
				}
				b.WriteString(x + "|" + y + "|" + z + "\n")
			}
			rows.Close()
		}
		return b.String()
	}
	one, batched := dump(false), dump(true)
	if one != batched {
		t.Fatalf("batched apply differs from one statement a change:\n%.2000s\n---\n%.2000s", one, batched)
	}
	if strings.Count(one, "\n") < 100 {
		t.Fatalf("too few rows survive to compare: %d", strings.Count(one, "\n"))
	}
}

// mixedChanges returns transactions of 1–300 changes to items, pairs and
// log, interleaved, over a small key space so rows repeat.
func mixedChanges(r *rand.Rand, n int) []chain.Change {
	var out []chain.Change
	s := func(i int) string { return strconv.Itoa(i) }
	moved := 100000
	for xid := uint32(10); n > 0; xid++ {
		size := min(n, 1+r.IntN(300))
		n -= size
		txn := make([]chain.Change, 0, size)
		for range size {
			id := r.IntN(400)
			switch p := r.IntN(20); {
			case p < 6:
				txn = append(txn, ins("public.items", txt(s(id), "n"+s(r.IntN(9)), "x")...))
			case p < 9:
				txn = append(txn, upd("public.items", txt(s(id), "\x00", "\x00"), []chain.Value{txt(s(id))[0], txt("u" + s(r.IntN(9)))[0], toasted}))
			case p < 10:
				moved++ // to a key no row has had
				txn = append(txn, upd("public.items", txt(s(id), "\x00", "\x00"), txt(s(moved), "moved", "\x00")))
			case p < 11:
				txn = append(txn, del("public.items", txt(s(id), "\x00", "\x00")))
			case p < 14:
				txn = append(txn, ins("public.pairs", txt("k"+s(id%5), s(id), "v"+s(r.IntN(9)))...))
			case p < 15:
				txn = append(txn, upd("public.pairs", txt("k"+s(id%5), s(id), "\x00"), txt("k"+s(id%5), s(id), "w"+s(r.IntN(9)))))
			case p < 16:
				txn = append(txn, del("public.pairs", txt("k"+s(id%5), s(id), "\x00")))
			case p < 19:
				txn = append(txn, ins("public.log", txt("2026-01-0"+s(1+id%9), "m"+s(id%7))...))
			default:
				txn = append(txn, chain.Change{Op: chain.OpDelete, Table: "public.log", OldKind: 'O', Old: txt("2026-01-0"+s(1+id%9), "m"+s(id%7))})
			}
		}
		out = append(out, chaintest.Txn(xid, txn...)...)
	}
	return out
}
