package mysql

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
)

// The applier holds back up to pendingRows rows (and about pendingBytes of
// values) before it sends them, and sends one statement per table and
// kind of at most batchRows rows.
const (
	batchRows    = 256
	pendingRows  = 1024
	pendingBytes = 4 << 20
)

// rowBatch is the rows of one multi-row statement being gathered: their
// arguments in order, and the first and last change, for messages.
type rowBatch struct {
	args     []any
	rows     int
	from, to changeRef
}

// changeRef names a change in messages, without formatting it until one
// is needed.
type changeRef struct {
	tx      string
	xid     uint32
	ordinal uint32
}

func (r changeRef) String() string {
	if r.tx != "" {
		return fmt.Sprintf("transaction %s, change %d", r.tx, r.ordinal)
	}
	return fmt.Sprintf("xid %d, change %d", r.xid, r.ordinal)
}

func (b *rowBatch) add(c *chain.Change) {
	ref := changeRef{tx: c.Tx, xid: c.XID, ordinal: c.Ordinal}
	if b.rows == 0 {
		b.from = ref
	}
	b.to = ref
	b.rows++
}

func (b *rowBatch) reset() {
	clear(b.args)
	b.args = b.args[:0]
	b.rows = 0
}

// group is one table's held-back inserts and deletes. Changes to distinct
// rows of a table whose one unique index is its key commute (the target
// has foreign key checks off), so inside a transaction the applier may
// send a table's inserts and deletes together, as a multi-row INSERT and
// a DELETE … IN, while its updates and the other tables' changes go ahead
// of them: keys holds the key of every row the group holds, and a change
// to one of those rows sends the group first, so the changes to one row
// keep the source's order. A keyless table groups only its inserts; its
// updates and deletes, which match whole rows, send the group first.
type group struct {
	ts      *tableState
	inserts rowBatch
	deletes rowBatch
	// updates are by the columns they set (updateBatch.mask), in the
	// order first seen.
	updates []*updateBatch
	keys    map[string]struct{}
}

// updateBatch is the held updates of one table that set the same columns.
type updateBatch struct {
	mask string
	set  []int // the columns set, key columns excluded
	rowBatch
}

// batchable reports whether the applier may hold back ts's inserts and
// deletes: a keyless table, or one whose only unique index is its key (on
// a table with another, reordering two rows could make them collide on
// it, and its inserts are never upserts).
func batchable(ts *tableState) bool {
	return !ts.guarded && len(ts.keys) <= 1
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

// hold adds an insert (kind 'I') or a delete ('D') to ts's group: its
// arguments (the whole new row, or the key values of img) and its key.
func (a *applier) hold(ctx context.Context, q execer, ts *tableState, c *chain.Change, kind byte, img []chain.Value) error {
	k := ""
	if len(ts.keys) == 1 {
		k = chain.KeyText(ts.keys[0], img)
		if a.holding(ts, k) {
			if err := a.flushTable(ctx, q, ts); err != nil {
				return err
			}
		}
	}
	g := a.groupOf(ts)
	b := &g.inserts
	cols := make([]int, 0, len(img))
	if kind == 'D' {
		b = &g.deletes
		cols = append(cols, ts.keys[0]...)
	} else {
		for i := range img {
			cols = append(cols, i)
		}
	}
	for _, i := range cols {
		if err := a.argInto(&b.args, ts, c, i, img[i]); err != nil {
			return err
		}
		a.pendingBytes += len(img[i].Data) + 8
	}
	b.add(c)
	if k != "" {
		g.keys[k] = struct{}{}
	}
	a.pendingRows++
	if b.rows >= batchRows || a.pendingRows >= pendingRows || a.pendingBytes >= pendingBytes {
		return a.flush(ctx, q)
	}
	return nil
}

// flushTable sends ts's group, if it holds anything.
func (a *applier) flushTable(ctx context.Context, q execer, ts *tableState) error {
	for _, g := range a.groups {
		if g.ts == ts {
			return a.send(ctx, q, g)
		}
	}
	return nil
}

// flush sends every group, in the order they were made.
func (a *applier) flush(ctx context.Context, q execer) error {
	for _, g := range a.groups {
		if err := a.send(ctx, q, g); err != nil {
			return err
		}
	}
	a.pendingRows, a.pendingBytes = 0, 0
	return nil
}

// send runs a group's deletes and inserts, one statement each, and
// empties it.
func (a *applier) send(ctx context.Context, q execer, g *group) error {
	defer g.reset()
	ts := g.ts
	if b := &g.deletes; b.rows > 0 {
		if err := a.sendRows(ctx, q, "delete", ts, b, deleteInSQL(ts, ts.keys[0], b.rows)); err != nil {
			return err
		}
	}
	for _, u := range g.updates {
		if u.rows > 0 {
			if err := a.sendRows(ctx, q, "update", ts, &u.rowBatch, updateJoinSQL(ts, ts.keys[0], u.set, u.rows)); err != nil {
				return err
			}
		}
	}
	if b := &g.inserts; b.rows > 0 {
		if err := a.sendRows(ctx, q, "insert", ts, b, a.insertSQL(ts, ts.insKey != nil, b.rows)); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) sendRows(ctx context.Context, q execer, op string, ts *tableState, b *rowBatch, stmt string) error {
	_, err := q.ExecContext(ctx, stmt, b.args...)
	if err == nil || retryable(err) {
		return err
	}
	return classify(err, fmt.Sprintf("apply %s of %d rows to %s (%s to %s)", op, b.rows, ts.def.QualifiedName(), b.from, b.to))
}

// reset empties the group.
func (g *group) reset() {
	g.inserts.reset()
	g.deletes.reset()
	for _, u := range g.updates {
		u.reset()
	}
	g.updates = g.updates[:0]
	clear(g.keys)
}

// discard forgets what the groups hold (the transaction rolled back).
func (a *applier) discard() {
	for _, g := range a.groups {
		g.reset()
	}
	a.pendingRows, a.pendingBytes = 0, 0
}

// forget drops ts's group (its table changed definition).
func (a *applier) forget(ts *tableState) {
	for i, g := range a.groups {
		if g.ts == ts {
			a.groups = append(a.groups[:i], a.groups[i+1:]...)
			return
		}
	}
}

// deleteInSQL deletes the rows of n key values.
func deleteInSQL(ts *tableState, key []int, n int) string {
	cols := make([]string, len(key))
	for i, k := range key {
		cols[i] = ts.cols[k].quoted
	}
	one := "?"
	lhs := cols[0]
	if len(key) > 1 {
		one = "(" + strings.TrimSuffix(strings.Repeat("?, ", len(key)), ", ") + ")"
		lhs = "(" + strings.Join(cols, ", ") + ")"
	}
	return "DELETE FROM " + ts.rel + " WHERE " + lhs + " IN (" + strings.TrimSuffix(strings.Repeat(one+", ", n), ", ") + ")"
}

// holdUpdate adds an update that keeps its row's key to ts's group, in
// the batch of the updates setting the same columns: its key values, then
// the values it sets.
func (a *applier) holdUpdate(ctx context.Context, q execer, ts *tableState, c *chain.Change, img []chain.Value) error {
	key := ts.keys[0]
	k := chain.KeyText(key, img)
	if a.holding(ts, k) {
		if err := a.flushTable(ctx, q, ts); err != nil {
			return err
		}
	}
	set := a.setFlags(c)
	for _, i := range key {
		set[i] = false
	}
	a.keyBuf, _ = sqlkit.AppendMask(a.keyBuf[:0], set)
	g := a.groupOf(ts)
	var u *updateBatch
	for _, b := range g.updates {
		if b.mask == string(a.keyBuf) {
			u = b
			break
		}
	}
	if u == nil {
		u = &updateBatch{mask: string(a.keyBuf)}
		for i, f := range set {
			if f {
				u.set = append(u.set, i)
			}
		}
		if len(u.set) == 0 {
			return nil // it sets only its key, to the same values
		}
		g.updates = append(g.updates, u)
	}
	for _, i := range key {
		if err := a.argInto(&u.args, ts, c, i, img[i]); err != nil {
			return err
		}
		a.pendingBytes += len(img[i].Data) + 8
	}
	for _, i := range u.set {
		if err := a.argInto(&u.args, ts, c, i, c.New[i]); err != nil {
			return err
		}
		a.pendingBytes += len(c.New[i].Data) + 8
	}
	u.add(c)
	g.keys[k] = struct{}{}
	a.pendingRows++
	if u.rows >= batchRows || a.pendingRows >= pendingRows || a.pendingBytes >= pendingBytes {
		return a.flush(ctx, q)
	}
	return nil
}

// updateJoinSQL updates n rows by key, each to its own values: the
// target joined to a derived table of the key and set values, one SELECT
// of placeholders a row.
func updateJoinSQL(ts *tableState, key, set []int, n int) string {
	width := len(key) + len(set)
	first := make([]string, width)
	for i := range first {
		first[i] = "? AS c" + strconv.Itoa(i)
	}
	rest := " UNION ALL SELECT " + strings.TrimSuffix(strings.Repeat("?, ", width), ", ")
	var on, assign []string
	for i, k := range key {
		on = append(on, "t."+ts.cols[k].quoted+" = v.c"+strconv.Itoa(i))
	}
	for j, c := range set {
		assign = append(assign, "t."+ts.cols[c].quoted+" = v.c"+strconv.Itoa(len(key)+j))
	}
	return "UPDATE " + ts.rel + " AS t JOIN (SELECT " + strings.Join(first, ", ") + strings.Repeat(rest, n-1) +
		") AS v ON " + strings.Join(on, " AND ") + " SET " + strings.Join(assign, ", ")
}
