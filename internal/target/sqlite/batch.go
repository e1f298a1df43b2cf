package sqlite

import (
	"context"
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
)

// Held rows go out as multi-row statements of at most batchRows rows, and
// of at most maxParams values (SQLITE_MAX_VARIABLE_NUMBER, 32766 in the
// SQLite modernc.org/sqlite builds in). The applier sends everything it
// holds once pendingRows rows or about pendingBytes of values are held.
const (
	batchRows    = 256
	maxParams    = 32766
	pendingRows  = 4096
	pendingBytes = 8 << 20
)

// batching lets the applier hold row changes back where it may (see
// batchable); the benchmark turns it off to compare with one statement a
// change.
var batching = true

// heldRows are the held changes of one kind of one table: each row's
// statement arguments, width a row, and its change, for messages.
type heldRows struct {
	op    chain.Op
	width int
	args  []any
	refs  []changeRef
}

// changeRef names a held change in messages.
type changeRef struct {
	tx      string
	xid     uint32
	ordinal uint32
}

func refOf(c *chain.Change) changeRef { return changeRef{tx: c.Tx, xid: c.XID, ordinal: c.Ordinal} }

func (r changeRef) where() string {
	return txName(&chain.Change{Tx: r.tx, XID: r.xid}) + ", change " + strconv.FormatUint(uint64(r.ordinal), 10)
}

func (h *heldRows) rows() int { return len(h.refs) }

func (h *heldRows) reset() {
	clear(h.args)
	h.args = h.args[:0]
	h.refs = h.refs[:0]
}

// heldUpdates are a table's held updates that set the same columns (set,
// key columns excluded); a row's arguments are its key values, then the
// values it sets.
type heldUpdates struct {
	mask string
	set  []int
	heldRows
}

// group is one table's held changes. Changes to distinct rows of a table
// whose one unique constraint is its key commute while nothing else looks
// (no foreign key is enforced on the lane's connection and no trigger is
// defined: see batchable), so the applier may send them later than the
// changes after them to other rows and tables. It never holds one row
// twice: keys holds the key of every held row, and a change to a row of
// it sends the group first, so the changes to one row keep the source's
// order. A keyless table holds its inserts only.
type group struct {
	ts      *tableState
	inserts heldRows
	deletes heldRows
	updates []*heldUpdates
	keys    map[string]struct{}
}

// reset empties the group; its batches of updates stay, empty, for the
// next updates setting their columns.
func (g *group) reset() {
	g.inserts.reset()
	g.deletes.reset()
	for _, u := range g.updates {
		u.reset()
	}
	clear(g.keys)
}

func (g *group) empty() bool {
	if g.inserts.rows() > 0 || g.deletes.rows() > 0 {
		return false
	}
	for _, u := range g.updates {
		if u.rows() > 0 {
			return false
		}
	}
	return true
}

// groupOf returns ts's group, or nil; with make, it makes a missing one.
func (a *applier) groupOf(ts *tableState, make bool) *group {
	for _, g := range a.groups {
		if g.ts == ts {
			return g
		}
	}
	if !make {
		return nil
	}
	g := &group{ts: ts, keys: map[string]struct{}{}}
	a.groups = append(a.groups, g)
	return g
}

// holds reports whether the applier holds any change.
func (a *applier) holds() bool { return a.heldRows > 0 }

// hold adds a change whose statement arguments a.args holds to the batch
// pick returns of ts's group; key indexes the key's values among them (nil
// for a keyless table). When the group holds the row already, it sends
// the group first.
func (a *applier) hold(ctx context.Context, q execer, ts *tableState, c *chain.Change, pick func(*group) *heldRows, key []int) error {
	k := ""
	if key != nil {
		a.keyText = appendKeyText(a.keyText[:0], a.args, key)
		k = string(a.keyText)
	}
	g := a.groupOf(ts, true)
	if _, ok := g.keys[k]; ok && key != nil {
		if err := a.send(ctx, q, g); err != nil {
			a.dropArgs()
			return err
		}
	}
	h := pick(g)
	h.op, h.width = c.Op, len(a.args)
	h.args = append(h.args, a.args...)
	h.refs = append(h.refs, refOf(c))
	for _, v := range c.New {
		a.heldBytes += len(v.Data) + 16
	}
	for _, v := range c.Old {
		a.heldBytes += len(v.Data) + 16
	}
	a.dropArgs()
	if key != nil {
		g.keys[k] = struct{}{}
	}
	a.heldRows++
	switch {
	case a.heldRows >= pendingRows || a.heldBytes >= pendingBytes:
		return a.flush(ctx, q)
	case h.rows() >= rowsPerStatement(h.width):
		return a.send(ctx, q, g)
	}
	return nil
}

// holdUpdate holds an update that keeps its row's key (img holds the
// key's values) among the table's held updates setting the same columns:
// its key values, then the values it sets. One that sets nothing but its
// key, to the same values, changes nothing.
func (a *applier) holdUpdate(ctx context.Context, q execer, ts *tableState, c *chain.Change, img []chain.Value) error {
	key := ts.keys[0]
	set := a.setFlags(c)
	for _, k := range key {
		set[k] = false
	}
	var n int
	if a.maskBuf, n = sqlkit.AppendMask(a.maskBuf[:0], set); n == 0 {
		return nil
	}
	if err := a.gather(ts, c, img, key); err != nil {
		return err
	}
	for i, f := range set {
		if f {
			if err := a.arg(ts, c, i, c.New[i]); err != nil {
				a.dropArgs()
				return err
			}
		}
	}
	// set and the mask stay valid through hold: sending a group uses
	// neither a.setBuf nor a.maskBuf.
	return a.hold(ctx, q, ts, c, func(g *group) *heldRows { return &g.updatesOf(a.maskBuf, set).heldRows }, ts.leading())
}

// leading indexes the first len(key) arguments: the key's values, where
// a delete or an update holds them.
func (ts *tableState) leading() []int { return ts.series()[:len(ts.keys[0])] }

// series is 0, 1, … len(ts.cols)-1: every column, or every argument of a
// held insert.
func (ts *tableState) series() []int {
	if ts.seq == nil {
		ts.seq = make([]int, len(ts.cols))
		for i := range ts.seq {
			ts.seq[i] = i
		}
	}
	return ts.seq
}

// gather appends the values at cols of img to the held row's arguments;
// on a value the target refuses it forgets them all.
func (a *applier) gather(ts *tableState, c *chain.Change, img []chain.Value, cols []int) error {
	for _, i := range cols {
		if err := a.arg(ts, c, i, img[i]); err != nil {
			a.dropArgs()
			return err
		}
	}
	return nil
}

// dropArgs forgets the gathered arguments.
func (a *applier) dropArgs() {
	clear(a.args)
	a.args = a.args[:0]
}

// updatesOf returns g's batch of the updates setting the columns set
// flags (key columns excluded), making it when missing.
func (g *group) updatesOf(mask []byte, set []bool) *heldUpdates {
	for _, u := range g.updates {
		if u.mask == string(mask) {
			return u
		}
	}
	u := &heldUpdates{mask: string(mask)}
	for i, f := range set {
		if f {
			u.set = append(u.set, i)
		}
	}
	g.updates = append(g.updates, u)
	return u
}

// flushTable sends ts's held changes, if any.
func (a *applier) flushTable(ctx context.Context, q execer, ts *tableState) error {
	if g := a.groupOf(ts, false); g != nil {
		return a.send(ctx, q, g)
	}
	return nil
}

// flush sends every held change, table by table.
func (a *applier) flush(ctx context.Context, q execer) error {
	if !a.holds() {
		return nil
	}
	for _, g := range a.groups {
		if err := a.send(ctx, q, g); err != nil {
			return err
		}
	}
	a.heldRows, a.heldBytes = 0, 0
	return nil
}

// discard forgets what is held (the transaction is rolled back).
func (a *applier) discard() {
	for _, g := range a.groups {
		g.reset()
	}
	a.heldRows, a.heldBytes = 0, 0
}

// forget drops ts's group, which holds nothing (its table changes
// definition).
func (a *applier) forget(ts *tableState) {
	for i, g := range a.groups {
		if g.ts == ts {
			a.groups = append(a.groups[:i], a.groups[i+1:]...)
			return
		}
	}
}

// send runs a group's deletes, updates and inserts and empties it. Its
// rows have distinct keys, so their order does not matter.
func (a *applier) send(ctx context.Context, q execer, g *group) error {
	if g.empty() {
		return nil
	}
	n := g.inserts.rows() + g.deletes.rows()
	for _, u := range g.updates {
		n += u.rows()
	}
	defer func() {
		g.reset()
		a.heldRows -= n
		if a.heldRows <= 0 {
			a.heldRows, a.heldBytes = 0, 0
		}
	}()
	ts := g.ts
	if err := a.sendRows(ctx, q, ts, &g.deletes, []byte{'d'}, func(rows int) string { return deleteInSQL(ts, rows) }); err != nil {
		return err
	}
	for _, u := range g.updates {
		if err := a.sendRows(ctx, q, ts, &u.heldRows, append([]byte{'u'}, u.mask...), func(rows int) string { return updateFromSQL(ts, u.set, rows) }); err != nil {
			return err
		}
	}
	return a.sendRows(ctx, q, ts, &g.inserts, []byte{'i'}, func(rows int) string { return insertRowsSQL(ts, rows) })
}

// rowsPerStatement is how many rows of width values one statement
// carries at most.
func rowsPerStatement(width int) int {
	return max(1, min(batchRows, maxParams/max(width, 1)))
}

// chunk is how many of n rows (n > 0) the next statement carries: a full
// statement's worth while there is one, then the largest power of two
// that fits, so a table prepares at most one statement a power of two
// below the full size per shape.
func chunk(n, full int) int {
	if n >= full {
		return full
	}
	return 1 << (bits.Len(uint(n)) - 1)
}

// appendKeyText appends the statement arguments key indexes as bytes two
// keys share exactly when SQLite stores them as one value: a float that is
// a whole number counts as that integer, as an INTEGER column stores it.
func appendKeyText(b []byte, args []any, key []int) []byte {
	for _, i := range key {
		switch v := args[i].(type) {
		case nil:
			b = append(b, 'n')
		case int64:
			b = binary.BigEndian.AppendUint64(append(b, 'i'), uint64(v))
		case float64:
			if v == math.Trunc(v) && v >= math.MinInt64 && v < math.MaxInt64 {
				b = binary.BigEndian.AppendUint64(append(b, 'i'), uint64(int64(v)))
			} else {
				b = binary.BigEndian.AppendUint64(append(b, 'f'), math.Float64bits(v))
			}
		case string:
			b = append(binary.AppendUvarint(append(b, 's'), uint64(len(v))), v...)
		case []byte:
			b = append(binary.AppendUvarint(append(b, 'b'), uint64(len(v))), v...)
		default:
			// render returns no other type; keep such a key apart from all.
			b = append(b, '?')
		}
	}
	return b
}
