package postgres

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/value"
)

// The applier holds back up to groupRows rows of one table before it
// queues them as set statements, and up to heldRows rows in all.
const (
	groupRows = 1000
	heldRows  = 4000
)

// group is one table's held-back inserts, deletes and key-keeping updates,
// queued as one statement each over arrays of their values (unnest), so
// the target runs one statement for many rows instead of one a row.
// Changes to distinct rows of a table whose one unique index is its key
// commute (the broker's session does not fire triggers or foreign keys,
// session_replication_role replica), so a table's held changes may go
// after its other changes and the other tables', but never the changes to
// one row: keys holds every held row's key, and a change to one of those
// rows queues the group first. A keyless table holds its inserts only.
type group struct {
	ts      *tableState
	inserts arrays
	deletes arrays
	updates []*updateArrays
	keys    map[string]struct{}
}

// updateArrays are the held updates of one table that set the same
// columns: key columns first, then the set ones.
type updateArrays struct {
	mask string
	set  []int
	arrays
}

// arrays are held rows of some columns: each row's values as parameter
// spans in the applier's arena (so a failed set statement can be sent
// again a row at a time, see diagnose), and its change, for messages.
type arrays struct {
	width int // values a row
	rows  []heldRow
}

// heldRow is one held change: where its values start among the spans.
type heldRow struct {
	first   int32
	xid     uint32
	tx      string
	ordinal uint32
}

// add appends one row's values of the given columns of img.
func (a *applier) addRow(arr *arrays, c *chain.Change, cols []int, img []chain.Value) {
	arr.width = len(cols)
	arr.rows = append(arr.rows, heldRow{first: int32(len(a.held)), xid: c.XID, tx: c.Tx, ordinal: c.Ordinal})
	for _, i := range cols {
		v := img[i]
		if v.Kind != chain.ValueText {
			a.held = append(a.held, span{n: -1})
			continue
		}
		a.held = append(a.held, span{off: int32(len(a.heldArena)), n: int32(len(v.Data))})
		a.heldArena = append(a.heldArena, v.Data...)
	}
}

func (arr *arrays) reset() { arr.rows = arr.rows[:0] }

// appendElement appends a value as a quoted array element (NULL bare).
func appendElement(b []byte, data []byte, null bool) []byte {
	if null {
		return append(b, "NULL"...)
	}
	b = append(b, '"')
	for _, c := range data {
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return append(b, '"')
}

// batching turns the holding back on where HoldBack allows it (the
// benchmark compares both ways).
var batching = true

// batchable reports whether the applier may hold back ts's changes: it
// holds back at all (HoldBack: the session fires no triggers or foreign
// keys, which would see the rows out of order), and ts is a keyless table
// (its inserts) or one whose only unique index is its key (on a table with
// another, reordering two rows could make them collide on it), whose
// columns are no arrays (unnest would flatten them).
func (a *applier) batchable(ts *tableState) bool {
	if !batching || !a.holdBack {
		return false
	}
	if ts.batch != 0 {
		return ts.batch > 0
	}
	ok := len(ts.keys) <= 1 && uniqueIndexes(ts.def) <= 1
	for _, c := range ts.cols {
		if strings.HasSuffix(c.Type, "]") || c.NeutralKind().Name == value.Array {
			ok = false
		}
	}
	ts.batch = -1
	if ok {
		ts.batch = 1
	}
	return ok
}

// HoldBack lets the applier hold row changes back and send them as set
// statements, out of the source's order across rows (never within one).
// Call it only on a session that fires no triggers or foreign keys
// (session_replication_role = replica): they would see the reordering.
func (a *applier) HoldBack(on bool) { a.holdBack = on }

// uniqueIndexes counts t's unique indexes, its primary key included.
func uniqueIndexes(t *chain.Table) int {
	n := 0
	if len(t.PrimaryKey) > 0 {
		n++
	}
	for _, ix := range t.Indexes {
		if ix.Unique {
			n++
		}
	}
	return n
}

// groupOf returns ts's group, making it when missing.
func (a *applier) groupOf(ts *tableState) *group {
	for _, g := range a.groups {
		if g.ts == ts {
			return g
		}
	}
	g := &group{ts: ts, keys: map[string]struct{}{}}
	a.groups = append(a.groups, g)
	return g
}

// holding reports whether ts's group holds the row of key k.
func (a *applier) holding(ts *tableState, k string) bool {
	for _, g := range a.groups {
		if g.ts == ts {
			_, ok := g.keys[k]
			return ok
		}
	}
	return false
}

// hold adds an insert ('I'), a delete ('D') or a key-keeping update ('U',
// setting the flagged columns) to ts's group.
func (a *applier) hold(ts *tableState, c *chain.Change, kind byte, img []chain.Value, set []bool) {
	k := ""
	if len(ts.keys) == 1 {
		k = chain.KeyText(ts.keys[0], img)
		if a.holding(ts, k) {
			a.queueTable(ts)
		}
	}
	g := a.groupOf(ts)
	var arr *arrays
	switch kind {
	case 'I':
		arr = &g.inserts
		a.addRow(arr, c, ts.all, img)
	case 'D':
		arr = &g.deletes
		a.addRow(arr, c, ts.keys[0], img)
	default:
		a.keyBuf = append(a.keyBuf[:0], 'u')
		a.setMask(set)
		var u *updateArrays
		for _, x := range g.updates {
			if x.mask == string(a.keyBuf) {
				u = x
				break
			}
		}
		if u == nil {
			u = &updateArrays{mask: string(a.keyBuf)}
			for i, f := range set {
				if f {
					u.set = append(u.set, i)
				}
			}
			g.updates = append(g.updates, u)
		}
		arr = &u.arrays
		a.addRow(arr, c, append(append(a.colBuf[:0], ts.keys[0]...), u.set...), c.New)
	}
	if k != "" {
		g.keys[k] = struct{}{}
	}
	a.heldRows++
	if len(arr.rows) >= groupRows || a.heldRows >= heldRows {
		a.queueGroups()
	}
}

// queueTable queues ts's held changes, if any.
func (a *applier) queueTable(ts *tableState) {
	for _, g := range a.groups {
		if g.ts == ts {
			a.queueGroup(g)
		}
	}
}

// queueGroups queues every group's held changes, in the order the groups
// were made.
func (a *applier) queueGroups() {
	for _, g := range a.groups {
		a.queueGroup(g)
	}
	a.heldRows = 0
}

// queueGroup queues a group's deletes, updates and inserts as one set
// statement each and empties it.
func (a *applier) queueGroup(g *group) {
	ts := g.ts
	if len(g.deletes.rows) > 0 {
		a.queueSet(ts, ts.setSQL("d", func() string { return deleteSetSQL(ts) }), true, &g.deletes, chain.OpDelete)
	}
	for _, u := range g.updates {
		if len(u.rows) > 0 {
			a.queueSet(ts, ts.setSQL(u.mask, func() string { return updateSetSQL(ts, u.set) }), true, &u.arrays, chain.OpUpdate)
		}
	}
	if len(g.inserts.rows) > 0 {
		a.queueSet(ts, ts.setSQL("i", func() string { return insertSetSQL(ts) }), false, &g.inserts, chain.OpInsert)
	}
	g.updates = g.updates[:0]
	clear(g.keys)
}

// setSQL returns the table's set statement of that shape, building it on
// first use. Set statements are not prepared: each is planned for the
// rows it carries (a generic plan made while the table was small would
// keep scanning it whole as it grows).
func (ts *tableState) setSQL(shape string, build func() string) string {
	if ts.sets == nil {
		ts.sets = map[string]string{}
	}
	text, ok := ts.sets[shape]
	if !ok {
		text = build()
		ts.sets[shape] = text
	}
	return text
}

// queueSet queues the set statement text over the rows of arr, one array
// parameter a column; count says it updates or deletes rows that should
// exist.
func (a *applier) queueSet(ts *tableState, text string, count bool, arr *arrays, op chain.Op) {
	first := arr.rows[0]
	rows := slices.Clone(arr.rows)
	e := entry{kind: entryParams, op: op, sql: text, count: count, table: ts.def.QualifiedName(), xid: first.xid, tx: first.tx, ordinal: first.ordinal,
		rows: int32(len(rows)), held: rows, width: int32(arr.width)}
	e.first, e.n = a.arrayParams(rows, arr.width)
	a.queue = append(a.queue, e)
	arr.reset()
}

// arrayParams appends, for held rows of width values, one array literal a
// column to the arena as the next parameters, and returns where they are.
func (a *applier) arrayParams(rows []heldRow, width int) (first, n int32) {
	first = int32(len(a.spans))
	for j := 0; j < width; j++ {
		start := len(a.arena)
		a.arena = append(a.arena, '{')
		for r, row := range rows {
			if r > 0 {
				a.arena = append(a.arena, ',')
			}
			sp := a.held[int(row.first)+j]
			var data []byte
			if sp.n >= 0 {
				data = a.heldArena[sp.off : sp.off+sp.n]
			}
			a.arena = appendElement(a.arena, data, sp.n < 0)
		}
		a.arena = append(a.arena, '}')
		a.spans = append(a.spans, span{off: int32(start), n: int32(len(a.arena) - start)})
	}
	return first, int32(width)
}

// forgetGroup drops the group of the table of that qualified name (its
// definition changed; the group was queued before).
func (a *applier) forgetGroup(name string) {
	for i, g := range a.groups {
		if g.ts.def.QualifiedName() == name {
			a.groups = append(a.groups[:i], a.groups[i+1:]...)
			return
		}
	}
}

// unnestSQL is unnest over one array parameter a column, from $first, as
// v(c0, c1, …).
func unnestSQL(ts *tableState, cols []int) string {
	params := make([]string, len(cols))
	names := make([]string, len(cols))
	for j, i := range cols {
		params[j] = "$" + strconv.Itoa(j+1) + "::" + ts.cols[i].Type + "[]"
		names[j] = "c" + strconv.Itoa(j)
	}
	return "unnest(" + strings.Join(params, ", ") + ") AS v(" + strings.Join(names, ", ") + ")"
}

// insertSetSQL inserts the rows of the array parameters, one per column
// (an upsert on the key, as insertSQL).
func insertSetSQL(ts *tableState) string {
	var b strings.Builder
	b.WriteString("INSERT INTO " + ts.rel + " (" + strings.Join(ts.names, ", ") + ")")
	if ts.overriding {
		b.WriteString(" OVERRIDING SYSTEM VALUE")
	}
	sel := make([]string, len(ts.cols))
	for i := range ts.cols {
		sel[i] = "v.c" + strconv.Itoa(i)
	}
	b.WriteString(" SELECT " + strings.Join(sel, ", ") + " FROM " + unnestSQL(ts, ts.all))
	b.WriteString(conflictSQL(ts))
	return b.String()
}

// deleteSetSQL deletes the rows whose keys the array parameters hold.
func deleteSetSQL(ts *tableState) string {
	key := ts.keys[0]
	on := make([]string, len(key))
	for j, k := range key {
		on[j] = "t." + ts.names[k] + " = v.c" + strconv.Itoa(j)
	}
	return "DELETE FROM " + ts.rel + " AS t USING " + unnestSQL(ts, key) + " WHERE " + strings.Join(on, " AND ")
}

// updateSetSQL updates, by key, the set columns of the rows the array
// parameters hold (key columns first).
func updateSetSQL(ts *tableState, set []int) string {
	key := ts.keys[0]
	cols := append(append([]int{}, key...), set...)
	on := make([]string, len(key))
	for j, k := range key {
		on[j] = "t." + ts.names[k] + " = v.c" + strconv.Itoa(j)
	}
	assign := make([]string, len(set))
	for j, c := range set {
		assign[j] = ts.names[c] + " = v.c" + strconv.Itoa(len(key)+j)
	}
	return "UPDATE " + ts.rel + " AS t SET " + strings.Join(assign, ", ") + " FROM " + unnestSQL(ts, cols) + " WHERE " + strings.Join(on, " AND ")
}

// queueHeld queues ts's group when it holds the row an update names by
// its old key (img) or moves to by its new one.
func (a *applier) queueHeld(ts *tableState, img, next []chain.Value) {
	if len(ts.keys) != 1 {
		return
	}
	key := ts.keys[0]
	held := a.holding(ts, chain.KeyText(key, img))
	if !held && len(next) == len(ts.cols) {
		carried := true
		for _, k := range key {
			carried = carried && next[k].Kind == chain.ValueText
		}
		held = carried && a.holding(ts, chain.KeyText(key, next))
	}
	if held {
		a.queueTable(ts)
	}
}
