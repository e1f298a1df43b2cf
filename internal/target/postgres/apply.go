package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
)

// Limits of one pipelined batch: Apply sends the queued statements once
// either is reached. The bytes count the values held back and the
// parameters queued (a held row's values are in both once its set
// statement is queued, and pgx copies the batch once more into its write
// buffer), so they bound a lane's memory whatever the rows' width.
const (
	applyBatchStatements = 1000
	applyBatchBytes      = 4 << 20
)

// applierSeq numbers appliers so that the prepared statements of two
// appliers on one connection never share a name.
var applierSeq atomic.Uint64

// applier applies change records to a PostgreSQL target inside the caller's
// transaction. It tracks the table definitions as the changes go (a schema
// change record updates them) and turns each row change into a prepared
// statement, cached per table, operation and column set. Statements are
// queued and sent in pipelined batches; Apply sends a batch when it is full
// and Flush sends what is left, so call Flush before committing.
//
// Row images are over a table's supplied columns (every column that is not
// generated, in table order). Values go as text-format parameters whose
// types PostgreSQL infers, so every type's own input function reads them.
//
// On a keyed table (a primary key, else a unique, non-partial,
// non-expression index over NOT NULL columns) an insert is an upsert on the
// key, so applying it again converges; updates and deletes find the row by
// its old key. On a keyless table updates and deletes need the whole old row
// (REPLICA IDENTITY FULL) and change exactly one matching row. An update or
// delete that finds no row changes nothing and is counted (see Unmatched).
//
// An applier is not safe for concurrent use. After an error the transaction
// is in an unknown state: roll it back and start over with a new applier.
type applier struct {
	base      *chain.Schema
	userTypes *ddlcheck.Names // the user types the chain records so far
	tables    map[string]*tableState
	known     map[string]bool // schemas (namespaces) known to exist on the target

	id    uint64
	seq   uint64
	names []string // every statement name handed out, for Release

	queue   []entry
	spans   []span
	arena   []byte
	params  [][]byte
	keyBuf  []byte
	setBuf  []bool
	matBuf  []bool
	err     error
	missing int64
	// arbiters are the live target's insert arbiters by table (UseArbiters).
	arbiters map[string][]string
	// groups hold back row changes per table, queued as set statements
	// (batch.go); heldRows counts the rows they hold, whose values are
	// spans of held into heldArena until the flush that sends them ends.
	groups    []*group
	holdBack  bool // HoldBack
	failedAt  int  // the queue entry the last send failed at, or -1
	heldRows  int
	held      []span
	heldArena []byte
	colBuf    []int
}

// tableState is the applier's view of one table and its statements.
type tableState struct {
	def    *chain.Table
	rel    string // quoted qualified name
	cols   []chain.Column
	names  []string // quoted supplied column names
	always []bool   // GENERATED ALWAYS AS IDENTITY, per supplied column
	// keys are the candidate keys as indexes into cols: the primary key
	// first, then qualifying unique indexes. Empty for a keyless table.
	keys [][]int
	// arbiter is the ON CONFLICT arbiter of an insert, as indexes into
	// cols: the live target's key when the broker judged one (UseArbiters),
	// else keys[0].
	arbiter    []int
	overriding bool // an identity ALWAYS column is supplied
	stmts      map[string]*stmt
	// all is 0, 1, … len(cols)-1; batch caches batchable (1 yes, -1 no);
	// sets are the set statements by shape (setSQL).
	all   []int
	batch int8
	sets  map[string]string
}

// stmt is one prepared statement of the applier.
type stmt struct {
	name   string
	sql    string
	ready  bool // prepared on the connection
	queued bool // its Prepare is in the current batch
	// count says the statement updates or deletes a row that should exist.
	count bool
}

type entryKind uint8

const (
	entryPrepare entryKind = iota
	entryExec
	entrySQL
	entryDeallocate
	// entryParams runs sql, unprepared, with the parameters of the span.
	entryParams
)

// entry is one queued request of the next batch.
type entry struct {
	kind    entryKind
	op      chain.Op
	st      *stmt
	sql     string // entrySQL: the statement; entryDeallocate: the name
	table   string
	first   int32 // first parameter span
	n       int32 // parameter count
	xid     uint32
	tx      string // the source transaction's opaque ID, when it has one
	ordinal uint32
	// rows is how many rows a set statement of held changes carries (0:
	// one); held are those rows, of width values each, for diagnose.
	rows  int32
	held  []heldRow
	width int32
	// count is st.count for an entryParams.
	count bool
}

// txName names a source transaction in a message: by its opaque ID (a
// MySQL-family source's GTID) when it has one, else by its XID.
func txName(xid uint32, tx string) string {
	if tx != "" {
		return "transaction " + tx
	}
	return fmt.Sprintf("xid %d", xid)
}

// span locates one parameter in the arena; n < 0 is NULL.
type span struct{ off, n int32 }

// newApplier returns an Applier that starts from the table definitions of
// schema, which it does not modify.
func newApplier(schema *chain.Schema) *applier {
	base, err := checkedSchema(schema)
	a := &applier{
		base:      base,
		userTypes: ddlcheck.NamesOf(schema),
		err:       err,
		tables:    map[string]*tableState{},
		known:     map[string]bool{"public": true},
		id:        applierSeq.Add(1),
		arena:     make([]byte, 0, 64<<10),
	}
	if a.base == nil {
		a.base = &chain.Schema{}
	}
	for _, n := range a.base.Schemas {
		a.known[n] = true
	}
	for i := range a.base.Tables {
		t := &a.base.Tables[i]
		a.tables[t.QualifiedName()] = newTableState(t)
		a.known[t.Schema] = true
	}
	return a
}

// UseArbiters makes each named table's inserts arbitrate on the given
// columns: the key the broker's judgment found on the live target table,
// which may differ from the chain's recorded key (a target keyed by a
// unique index where the source had a primary key, say). A table whose
// columns the rows do not all supply keeps the chain's key.
func (a *applier) UseArbiters(arbiters map[string][]string) {
	a.arbiters = arbiters
	for name, ts := range a.tables {
		ts.useArbiter(arbiters[name])
	}
}

func (ts *tableState) useArbiter(cols []string) {
	ts.arbiter = nil
	if len(cols) == 0 || len(ts.keys) == 0 {
		return
	}
	idx := make([]int, 0, len(cols))
	for _, c := range cols {
		i := slices.IndexFunc(ts.cols, func(col chain.Column) bool { return col.Name == c })
		if i < 0 {
			return
		}
		idx = append(idx, i)
	}
	ts.arbiter = idx
}

func newTableState(t *chain.Table) *tableState {
	ts := &tableState{def: t, rel: ident(t.Schema, t.Name), stmts: map[string]*stmt{}}
	ts.cols = t.SuppliedColumns()
	for i, c := range ts.cols {
		ts.all = append(ts.all, i)
		ts.names = append(ts.names, ident(c.Name))
		ts.always = append(ts.always, c.Identity == "a")
		ts.overriding = ts.overriding || c.Identity == "a"
	}
	ts.keys = t.CandidateKeys()
	return ts
}

// Schema returns the schema in force after the changes applied so far: the
// starting schema with each table's latest definition and the tables the
// changes created, in (schema, name) order.
func (a *applier) Schema() *chain.Schema {
	s := *a.base
	s.Tables = make([]chain.Table, 0, len(a.tables))
	for _, ts := range a.tables {
		s.Tables = append(s.Tables, *ts.def)
	}
	slices.SortFunc(s.Tables, func(x, y chain.Table) int {
		if c := strings.Compare(x.Schema, y.Schema); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	return &s
}

// Unmatched returns how many updates and deletes found no row to change on
// the target, among the statements sent so far.
func (a *applier) Unmatched() int64 { return a.missing }

// Apply applies one change inside tx. Begin and commit records are no-ops:
// the caller owns the transaction. The statement may only be queued; Flush
// sends the rest before the caller commits.
func (a *applier) Apply(ctx context.Context, tx pgx.Tx, c *chain.Change) error {
	if a.err != nil {
		return a.err
	}
	var err error
	switch c.Op {
	case chain.OpBegin, chain.OpCommit:
		return nil
	case chain.OpInsert:
		err = a.insert(c)
	case chain.OpUpdate:
		err = a.update(c)
	case chain.OpDelete:
		err = a.delete(c)
	case chain.OpTruncate:
		err = a.truncate(c)
	case chain.OpSchema:
		err = a.schema(c)
	default:
		err = fmt.Errorf("apply change: unknown operation %#x", byte(c.Op))
	}
	if err != nil {
		return err
	}
	if len(a.queue) >= applyBatchStatements || len(a.arena)+len(a.heldArena) >= applyBatchBytes {
		return a.Flush(ctx, tx)
	}
	return nil
}

// changeErr describes a change that cannot be applied (chain.ChangeError).
var changeErr = chain.ChangeError

// table returns the tracked table of a row change and checks its images.
func (a *applier) table(c *chain.Change) (*tableState, error) {
	ts := a.tables[c.Table]
	if ts == nil {
		return nil, changeErr(c, "the table has no recorded schema")
	}
	if err := chain.CheckImages(c, len(ts.cols)); err != nil {
		return nil, err
	}
	return ts, nil
}

// statement returns the cached statement for key (in a.keyBuf), building
// its SQL with build on first use.
func (a *applier) statement(ts *tableState, count bool, build func() string) *stmt {
	if st, ok := ts.stmts[string(a.keyBuf)]; ok {
		return st
	}
	a.seq++
	st := &stmt{name: "sluice_apply_" + strconv.FormatUint(a.id, 10) + "_" + strconv.FormatUint(a.seq, 10), sql: build(), count: count}
	a.names = append(a.names, st.name)
	ts.stmts[string(a.keyBuf)] = st
	return st
}

// exec queues st with the parameters already appended since first.
func (a *applier) exec(c *chain.Change, st *stmt, first int) {
	if !st.ready && !st.queued {
		st.queued = true
		a.queue = append(a.queue, entry{kind: entryPrepare, op: c.Op, st: st, table: c.Table, xid: c.XID, tx: c.Tx, ordinal: c.Ordinal})
	}
	a.queue = append(a.queue, entry{kind: entryExec, op: c.Op, st: st, table: c.Table,
		first: int32(first), n: int32(len(a.spans) - first), xid: c.XID, tx: c.Tx, ordinal: c.Ordinal})
}

// param appends one value as the next parameter.
func (a *applier) param(v chain.Value) {
	if v.Kind != chain.ValueText {
		a.spans = append(a.spans, span{n: -1})
		return
	}
	a.spans = append(a.spans, span{off: int32(len(a.arena)), n: int32(len(v.Data))})
	a.arena = append(a.arena, v.Data...)
}

// setMask appends to a.keyBuf '*' when every flag is set, else '#' and a
// bitmap of the set flags, and reports how many are set.
func (a *applier) setMask(flags []bool) int {
	n := 0
	for _, f := range flags {
		if f {
			n++
		}
	}
	if n == len(flags) {
		a.keyBuf = append(a.keyBuf, '*')
		return n
	}
	a.keyBuf = append(a.keyBuf, '#')
	for i := 0; i < len(flags); i += 8 {
		var b byte
		for j := i; j < len(flags) && j < i+8; j++ {
			if flags[j] {
				b |= 1 << (j - i)
			}
		}
		a.keyBuf = append(a.keyBuf, b)
	}
	return n
}

func (a *applier) insert(c *chain.Change) error {
	ts, err := a.table(c)
	if err != nil {
		return err
	}
	if len(c.New) == 0 && len(ts.cols) > 0 {
		return changeErr(c, "no new row image")
	}
	for i, v := range c.New {
		if v.Kind == chain.ValueUnchanged {
			return changeErr(c, "column %s is marked unchanged in an insert", ts.cols[i].Name)
		}
	}
	if a.batchable(ts) {
		a.hold(ts, c, 'I', c.New, nil)
		return nil
	}
	a.keyBuf = append(a.keyBuf[:0], 'I')
	st := a.statement(ts, false, func() string { return insertSQL(ts) })
	first := len(a.spans)
	for _, v := range c.New {
		a.param(v)
	}
	a.exec(c, st, first)
	return nil
}

func insertSQL(ts *tableState) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(ts.rel)
	b.WriteString(" (")
	b.WriteString(strings.Join(ts.names, ", "))
	b.WriteString(")")
	if ts.overriding {
		b.WriteString(" OVERRIDING SYSTEM VALUE")
	}
	b.WriteString(" VALUES (")
	for i := range ts.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(i+1))
	}
	b.WriteString(")")
	b.WriteString(conflictSQL(ts))
	return b.String()
}

// conflictSQL is an insert's ON CONFLICT clause: an upsert on the arbiter
// (the judged live key, else the chain's), "" on a keyless table.
func conflictSQL(ts *tableState) string {
	if len(ts.keys) == 0 {
		return ""
	}
	var b strings.Builder
	key := ts.keys[0]
	if ts.arbiter != nil {
		key = ts.arbiter
	}
	b.WriteString(" ON CONFLICT (")
	for i, k := range key {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(ts.names[k])
	}
	b.WriteString(") DO ")
	var set []string
	for i, n := range ts.names {
		if !slices.Contains(key, i) && !ts.always[i] {
			set = append(set, n+" = EXCLUDED."+n)
		}
	}
	if len(set) == 0 {
		b.WriteString("NOTHING")
	} else {
		b.WriteString("UPDATE SET ")
		b.WriteString(strings.Join(set, ", "))
	}
	return b.String()
}

// rowKey chooses the key an update or delete locates its row by, and the
// image holding the key's values: the old image when there is one, else the
// new one. A key-only old image ('K') may carry a unique index's columns
// rather than the primary key's, so the first candidate it fully carries
// is taken.
func (ts *tableState) rowKey(c *chain.Change) (int, []chain.Value, error) {
	ki, img, ok := chain.KeyImage(c, ts.keys)
	switch {
	case img == nil:
		return 0, nil, changeErr(c, "no row image to find the row by")
	case !ok:
		return 0, nil, changeErr(c, "the row image carries no value for a key column")
	}
	return ki, img, nil
}

// growFlags returns (*buf)[:n], growing the buffer when needed.
func growFlags(buf *[]bool, n int) []bool {
	if cap(*buf) < n {
		*buf = make([]bool, n)
	}
	return (*buf)[:n]
}

// setFlags marks the columns an update sets: those the new image carries,
// except identity columns GENERATED ALWAYS, which only the source's
// sequence fills and PostgreSQL refuses to update.
func (a *applier) setFlags(ts *tableState, c *chain.Change) []bool {
	flags := growFlags(&a.setBuf, len(ts.cols))
	for i, v := range c.New {
		flags[i] = v.Kind != chain.ValueUnchanged && !ts.always[i]
	}
	return flags
}

func (a *applier) update(c *chain.Change) error {
	ts, err := a.table(c)
	if err != nil {
		return err
	}
	if len(c.New) == 0 && len(ts.cols) > 0 {
		return changeErr(c, "no new row image")
	}
	if len(ts.keys) == 0 {
		a.queueTable(ts)
		return a.keylessUpdate(ts, c)
	}
	ki, img, err := ts.rowKey(c)
	if err != nil {
		return err
	}
	flags := a.setFlags(ts, c)
	if a.batchable(ts) && chain.SameKey(ts.keys[ki], img, c.New) {
		for _, k := range ts.keys[ki] {
			flags[k] = false
		}
		for _, f := range flags {
			if f {
				a.hold(ts, c, 'U', img, flags)
				return nil
			}
		}
		return nil // it sets only its key, to the same values
	}
	if a.batchable(ts) {
		a.queueHeld(ts, img, c.New)
	}
	a.keyBuf = append(a.keyBuf[:0], 'U', byte(ki), byte(ki>>8))
	if a.setMask(flags) == 0 {
		return nil // nothing the target may change
	}
	key := ts.keys[ki]
	st := a.statement(ts, true, func() string { return updateSQL(ts, flags, key) })
	first := len(a.spans)
	for i, v := range c.New {
		if flags[i] {
			a.param(v)
		}
	}
	for _, k := range key {
		a.param(img[k])
	}
	a.exec(c, st, first)
	return nil
}

func updateSQL(ts *tableState, set []bool, key []int) string {
	var b strings.Builder
	b.WriteString("UPDATE ")
	b.WriteString(ts.rel)
	b.WriteString(" SET ")
	n := 0
	for i, f := range set {
		if !f {
			continue
		}
		if n > 0 {
			b.WriteString(", ")
		}
		n++
		b.WriteString(ts.names[i] + " = $" + strconv.Itoa(n))
	}
	b.WriteString(" WHERE ")
	for i, k := range key {
		if i > 0 {
			b.WriteString(" AND ")
		}
		n++
		b.WriteString(ts.names[k] + " = $" + strconv.Itoa(n))
	}
	return b.String()
}

func (a *applier) delete(c *chain.Change) error {
	ts, err := a.table(c)
	if err != nil {
		return err
	}
	if len(ts.keys) == 0 {
		a.queueTable(ts)
		return a.keylessDelete(ts, c)
	}
	if c.OldKind == 0 {
		return changeErr(c, "a delete without an old row image")
	}
	ki, img, err := ts.rowKey(c)
	if err != nil {
		return err
	}
	if a.batchable(ts) {
		a.hold(ts, c, 'D', img, nil)
		return nil
	}
	key := ts.keys[ki]
	a.keyBuf = append(a.keyBuf[:0], 'D', byte(ki), byte(ki>>8))
	st := a.statement(ts, true, func() string {
		var b strings.Builder
		b.WriteString("DELETE FROM " + ts.rel + " WHERE ")
		for i, k := range key {
			if i > 0 {
				b.WriteString(" AND ")
			}
			b.WriteString(ts.names[k] + " = $" + strconv.Itoa(i+1))
		}
		return b.String()
	})
	first := len(a.spans)
	for _, k := range key {
		a.param(img[k])
	}
	a.exec(c, st, first)
	return nil
}

// keylessOld checks that a change to a keyless table carries the whole old
// row and returns which of its columns the match compares.
func (a *applier) keylessOld(ts *tableState, c *chain.Change) ([]bool, error) {
	if c.OldKind != 'O' {
		return nil, changeErr(c, "table %s has no key and the change carries no whole old row (REPLICA IDENTITY FULL is needed to %s its rows)", c.Table, c.Op.String())
	}
	match := growFlags(&a.matBuf, len(ts.cols))
	some := false
	for i, v := range c.Old {
		match[i] = v.Kind != chain.ValueUnchanged
		some = some || match[i]
	}
	if !some {
		return nil, changeErr(c, "the old row image of keyless table %s has no comparable value", c.Table)
	}
	return match, nil
}

// matchSQL returns a condition selecting one row of a keyless table whose
// matched columns equal parameters $from… The comparison is of text forms
// (json has no equality operator), both produced by the target's output
// functions: the parameter is read as the column's type and printed again,
// so the source's text settings do not matter.
func matchSQL(ts *tableState, match []bool, from int) string {
	var b strings.Builder
	b.WriteString("ctid = (SELECT ctid FROM " + ts.rel + " WHERE ")
	n := 0
	for i, m := range match {
		if !m {
			continue
		}
		if n > 0 {
			b.WriteString(" AND ")
		}
		fmt.Fprintf(&b, "%s::text IS NOT DISTINCT FROM ($%d::%s)::text", ts.names[i], from+n, ts.cols[i].Type)
		n++
	}
	b.WriteString(" LIMIT 1)")
	return b.String()
}

func (a *applier) keylessUpdate(ts *tableState, c *chain.Change) error {
	match, err := a.keylessOld(ts, c)
	if err != nil {
		return err
	}
	set := a.setFlags(ts, c)
	a.keyBuf = append(a.keyBuf[:0], 'U', 0xff, 0xff)
	if a.setMask(set) == 0 {
		return nil
	}
	a.keyBuf = append(a.keyBuf, '/')
	a.setMask(match)
	st := a.statement(ts, true, func() string {
		var b strings.Builder
		b.WriteString("UPDATE " + ts.rel + " SET ")
		n := 0
		for i, f := range set {
			if f {
				if n > 0 {
					b.WriteString(", ")
				}
				n++
				b.WriteString(ts.names[i] + " = $" + strconv.Itoa(n))
			}
		}
		b.WriteString(" WHERE " + matchSQL(ts, match, n+1))
		return b.String()
	})
	first := len(a.spans)
	for i, v := range c.New {
		if set[i] {
			a.param(v)
		}
	}
	for i, v := range c.Old {
		if match[i] {
			a.param(v)
		}
	}
	a.exec(c, st, first)
	return nil
}

func (a *applier) keylessDelete(ts *tableState, c *chain.Change) error {
	match, err := a.keylessOld(ts, c)
	if err != nil {
		return err
	}
	a.keyBuf = append(a.keyBuf[:0], 'D', 0xff, 0xff)
	a.setMask(match)
	st := a.statement(ts, true, func() string {
		return "DELETE FROM " + ts.rel + " WHERE " + matchSQL(ts, match, 1)
	})
	first := len(a.spans)
	for i, v := range c.Old {
		if match[i] {
			a.param(v)
		}
	}
	a.exec(c, st, first)
	return nil
}

func (a *applier) truncate(c *chain.Change) error {
	a.queueGroups()
	rels := make([]string, len(c.Tables))
	for i, name := range c.Tables {
		ts := a.tables[name]
		if ts == nil {
			return fmt.Errorf("apply truncate of %s (%s, change %d): table %s has no recorded schema", strings.Join(c.Tables, ", "), txName(c.XID, c.Tx), c.Ordinal, name)
		}
		rels[i] = ts.rel
	}
	sql := "TRUNCATE TABLE " + strings.Join(rels, ", ")
	if c.TruncateFlags&2 != 0 {
		sql += " RESTART IDENTITY"
	}
	if c.TruncateFlags&1 != 0 {
		sql += " CASCADE"
	}
	a.queue = append(a.queue, entry{kind: entrySQL, op: c.Op, sql: sql, table: strings.Join(c.Tables, ", "), xid: c.XID, tx: c.Tx, ordinal: c.Ordinal})
	return nil
}

// schema applies a table's new definition: it creates an unknown table, or
// adds, drops and retypes columns of a known one, then tracks the new
// definition and forgets the table's statements.
func (a *applier) schema(c *chain.Change) error {
	def := c.Schema
	if def == nil || def.Name == "" {
		return changeErr(c, "schema change without a table definition")
	}
	name := def.QualifiedName()
	if c.Table != "" && c.Table != name {
		return changeErr(c, "the record names table %s but its definition is of %s", c.Table, name)
	}
	a.queueGroups()
	a.forgetGroup(name)
	if a.tables[name] == nil {
		noteForeign(def)
	}
	checked, err := a.checkedTable(def)
	if err != nil {
		return err
	}
	t := *checked
	ts := newTableState(&t)
	ts.useArbiter(a.arbiters[name])
	var ddl []string
	for _, u := range t.Types {
		// Types the chain first met with this table: created unless the
		// target has them (a re-applied record, or an operator's own).
		if !a.known[u.Schema] {
			ddl = append(ddl, "CREATE SCHEMA IF NOT EXISTS "+ident(u.Schema))
			a.known[u.Schema] = true
		}
		ddl = append(ddl, fmt.Sprintf("DO $sluice_type$ BEGIN IF to_regtype(%s) IS NULL THEN EXECUTE %s; END IF; END $sluice_type$",
			quoteLiteral(ident(u.Schema, u.Name)), quoteLiteral(u.Definition)))
	}
	if old := a.tables[name]; old == nil {
		if !a.known[t.Schema] {
			ddl = append(ddl, "CREATE SCHEMA IF NOT EXISTS "+ident(t.Schema))
		}
		if parent := a.partitioned(t.PartitionOf); parent != nil {
			// A partition new to the chain takes its columns, keys and
			// indexes from its partitioned table.
			ddl = append(ddl, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s PARTITION OF %s %s", ts.rel, parent.rel, t.PartitionBound))
		} else {
			ddl = append(ddl, createTableIfMissingSQL(ts)...)
		}
	} else {
		if stmt := alterTableSQL(old, ts); stmt != "" {
			ddl = append(ddl, stmt)
		}
		if old.def.PartitionOf != t.PartitionOf || old.def.PartitionBound != t.PartitionBound {
			// Detached, attached, or attached elsewhere on the source.
			if parent := a.partitioned(old.def.PartitionOf); parent != nil {
				ddl = append(ddl, fmt.Sprintf("ALTER TABLE %s DETACH PARTITION %s", parent.rel, ts.rel))
			}
			if parent := a.partitioned(t.PartitionOf); parent != nil {
				ddl = append(ddl, fmt.Sprintf("ALTER TABLE %s ATTACH PARTITION %s %s", parent.rel, ts.rel, t.PartitionBound))
			}
		}
		for _, st := range old.stmts {
			if st.ready || st.queued {
				a.queue = append(a.queue, entry{kind: entryDeallocate, op: c.Op, sql: st.name, table: name, xid: c.XID, tx: c.Tx, ordinal: c.Ordinal})
			}
		}
	}
	for _, sql := range ddl {
		a.queue = append(a.queue, entry{kind: entrySQL, op: c.Op, sql: sql, table: name, xid: c.XID, tx: c.Tx, ordinal: c.Ordinal})
	}
	a.tables[name] = ts
	a.known[t.Schema] = true
	return nil
}

// checkedTable is the table a schema change record defines, as this
// target builds it: its recorded texts checked and rendered again
// (ddlcheck.PostgresTable), then stored as a native table.
func (a *applier) checkedTable(def *chain.Table) (*chain.Table, error) {
	c, err := ddlcheck.PostgresTable(def, a.userTypes)
	if err != nil {
		return nil, err
	}
	return nativeTable(c), nil
}

// partitioned returns the tracked partitioned table of that qualified name,
// or nil (no name, unknown to the chain, or not partitioned: a chain written
// before partitioned tables were recorded knows its partitions as plain
// tables, and they stay so).
func (a *applier) partitioned(name string) *tableState {
	if name == "" {
		return nil
	}
	if p := a.tables[name]; p != nil && p.def.Partitioned() {
		return p
	}
	return nil
}

func columnDef(c chain.Column) string {
	def := ident(c.Name) + " " + c.Type
	switch {
	case c.Generated != "":
		def += " GENERATED ALWAYS AS (" + c.Generated + ") STORED"
	case c.Default != "" && !strings.Contains(c.Default, "nextval("):
		// The default fills the rows that exist when a column is added, as
		// it did on the source. Sequence defaults are left out: the rows
		// always carry those values, and the sequence is not on the target.
		def += " DEFAULT " + c.Default
	}
	return def
}

// createTableIfMissingSQL creates a table new to the chain: its columns,
// NOT NULL, its primary key, or else the unique index it is keyed by (an
// upsert needs one to name).
func createTableIfMissingSQL(ts *tableState) []string {
	t := ts.def
	defs := make([]string, 0, len(t.Columns)+1)
	for _, c := range t.Columns {
		d := columnDef(c)
		if c.NotNull {
			d += " NOT NULL"
		}
		defs = append(defs, d)
	}
	if len(t.PrimaryKey) > 0 {
		cols := make([]string, len(t.PrimaryKey))
		for i, c := range t.PrimaryKey {
			cols[i] = ident(c)
		}
		defs = append(defs, "PRIMARY KEY ("+strings.Join(cols, ", ")+")")
	}
	stmts := []string{"CREATE TABLE IF NOT EXISTS " + ts.rel + " (" + strings.Join(defs, ", ") + ")"}
	if len(t.PrimaryKey) == 0 && len(ts.keys) > 0 {
		for _, ix := range t.Indexes {
			if !ix.Unique || ix.Partial || ix.Expression || len(ix.Columns) == 0 {
				continue
			}
			cols := make([]string, len(ix.Columns))
			for i, c := range ix.Columns {
				cols[i] = ident(c)
			}
			stmts = append(stmts, "CREATE UNIQUE INDEX IF NOT EXISTS "+ident(ix.Name)+" ON "+ts.rel+" ("+strings.Join(cols, ", ")+")")
			break
		}
	}
	return stmts
}

// alterTableSQL returns the ALTER TABLE that turns old's columns into
// next's ("" when they match): vanished names are dropped, new names added,
// and changed types converted through their text form.
func alterTableSQL(old, next *tableState) string {
	prev := map[string]chain.Column{}
	for _, c := range old.def.Columns {
		prev[c.Name] = c
	}
	now := map[string]bool{}
	var drops, adds, types []string
	for _, c := range next.def.Columns {
		now[c.Name] = true
		p, ok := prev[c.Name]
		switch {
		case !ok:
			adds = append(adds, "ADD COLUMN IF NOT EXISTS "+columnDef(c))
		case p.Type != c.Type:
			alter := "ALTER COLUMN " + ident(c.Name) + " TYPE " + c.Type
			if c.Generated == "" {
				alter += " USING " + ident(c.Name) + "::text::" + c.Type
			}
			types = append(types, alter)
		}
	}
	for _, c := range old.def.Columns {
		if !now[c.Name] {
			drops = append(drops, "DROP COLUMN IF EXISTS "+ident(c.Name))
		}
	}
	actions := slices.Concat(drops, adds, types)
	if len(actions) == 0 {
		return ""
	}
	return "ALTER TABLE " + old.rel + " " + strings.Join(actions, ", ")
}

// Flush sends the queued statements in one pipelined batch and reads their
// results. Call it before committing tx.
func (a *applier) Flush(ctx context.Context, tx pgx.Tx) error {
	if a.err != nil {
		return a.err
	}
	a.queueGroups()
	if len(a.queue) == 0 {
		return nil
	}
	err := a.sendGuarded(ctx, tx.Conn().PgConn())
	for i := range a.queue {
		if a.queue[i].kind == entryPrepare {
			a.queue[i].st.queued = false
		}
	}
	clear(a.queue) // drop the references to statements
	a.queue, a.spans, a.arena = a.queue[:0], a.spans[:0], a.arena[:0]
	a.held, a.heldArena = a.held[:0], a.heldArena[:0]
	if err != nil {
		a.err = err
	}
	return err
}

// setSavepoint is the savepoint a flush carrying set statements starts
// with, so that a failed one can be sent again a row at a time.
const setSavepoint = "sluice_set"

// sendGuarded sends the queue; when it carries set statements of held
// rows, inside a savepoint, so that when one fails the flush can be rolled
// back to it and sent again with each set statement split into its rows
// (diagnose): the error then names the change that failed, as a statement
// a change would. The savepoint is released after the flush, one
// subtransaction a flush.
func (a *applier) sendGuarded(ctx context.Context, pc *pgconn.PgConn) error {
	sets := false
	for i := range a.queue {
		sets = sets || a.queue[i].rows > 0
	}
	if !sets {
		return a.send(ctx, pc)
	}
	missing := a.missing
	a.queue = slices.Insert(a.queue, 0, entry{kind: entrySQL, sql: "SAVEPOINT " + setSavepoint, table: "a savepoint"})
	a.queue = append(a.queue, entry{kind: entrySQL, sql: "RELEASE SAVEPOINT " + setSavepoint, table: "a savepoint"})
	err := a.send(ctx, pc)
	if err == nil || a.failedAt < 0 || a.queue[a.failedAt].rows == 0 || !diagnosable(err) {
		return err
	}
	a.missing = missing
	return a.diagnose(ctx, pc, err)
}

// diagnosable reports whether a failed flush can be rolled back to its
// savepoint and sent again: the server refused a statement (a broken
// connection or a cancelled context is final).
func diagnosable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// diagnose rolls the failed flush back to its savepoint and sends it again
// with every set statement split into one execution a row (one-element
// arrays), so that the first row that fails is the change the error names.
// When no row fails, the flush has been applied after all.
func (a *applier) diagnose(ctx context.Context, pc *pgconn.PgConn, cause error) error {
	if err := pc.Exec(ctx, "ROLLBACK TO SAVEPOINT "+setSavepoint+"; RELEASE SAVEPOINT "+setSavepoint).Close(); err != nil {
		return cause
	}
	orig := a.queue
	a.queue = nil
	for i := range orig {
		e := orig[i]
		switch {
		case e.kind == entrySQL && e.table == "a savepoint":
			continue
		case e.kind == entryPrepare && e.st.ready:
			continue // prepared before the failure: protocol-level, kept
		case e.kind == entryDeallocate && i < a.failedAt:
			continue // done before the failure, and not transactional
		case e.rows > 0:
			for _, row := range e.held {
				one := e
				one.xid, one.tx, one.ordinal, one.rows, one.held = row.xid, row.tx, row.ordinal, 1, nil
				one.first, one.n = a.arrayParams([]heldRow{row}, int(e.width))
				a.queue = append(a.queue, one)
			}
			continue
		}
		a.queue = append(a.queue, e)
	}
	err := a.send(ctx, pc)
	a.queue = orig
	return err
}

func (a *applier) send(ctx context.Context, pc *pgconn.PgConn) error {
	a.failedAt = -1
	p := pc.StartPipeline(ctx)
	for i := range a.queue {
		e := &a.queue[i]
		switch e.kind {
		case entryPrepare:
			p.SendPrepare(e.st.name, e.st.sql, nil)
		case entryExec, entryParams:
			params := a.params[:0]
			for _, s := range a.spans[e.first : e.first+e.n] {
				if s.n < 0 {
					params = append(params, nil)
				} else {
					params = append(params, a.arena[s.off:s.off+s.n:s.off+s.n])
				}
			}
			a.params = params
			if e.kind == entryParams {
				p.SendQueryParams(e.sql, params, nil, nil, nil)
			} else {
				p.SendQueryPrepared(e.st.name, params, nil, nil)
			}
		case entrySQL:
			p.SendQueryParams(e.sql, nil, nil, nil, nil)
		case entryDeallocate:
			p.SendDeallocate(e.sql)
		}
	}
	clear(a.params)
	if err := p.Sync(); err != nil {
		p.Close()
		return classify(err, "send changes to the target")
	}
	var failed error
	i := 0
	for failed == nil {
		res, err := p.GetResults()
		if err != nil {
			failed = err
			break
		}
		if _, ok := res.(*pgconn.PipelineSync); ok || res == nil {
			break
		}
		if i >= len(a.queue) {
			failed = errors.New("more results than requests")
			break
		}
		e := &a.queue[i]
		switch r := res.(type) {
		case *pgconn.StatementDescription:
			e.st.ready = true
		case *pgconn.ResultReader:
			tag, err := r.Close()
			if err != nil {
				failed = err
				break
			}
			if (e.kind == entryExec && e.st.count) || (e.kind == entryParams && e.count) {
				want := int64(max(e.rows, 1))
				if got := tag.RowsAffected(); got < want {
					a.missing += want - got
				}
			}
		}
		if failed == nil {
			i++
		}
	}
	cerr := p.Close()
	if failed == nil && cerr != nil {
		failed = cerr
	}
	if failed == nil {
		if i != len(a.queue) {
			return fmt.Errorf("apply changes: %d results for %d requests", i, len(a.queue))
		}
		return nil
	}
	if i < len(a.queue) {
		a.failedAt = i
		e := &a.queue[i]
		what := fmt.Sprintf("apply %s to %s (%s, change %d)", e.op.String(), e.table, txName(e.xid, e.tx), e.ordinal)
		if e.rows > 1 {
			what = fmt.Sprintf("apply %s of %d rows to %s (from %s, change %d)", e.op.String(), e.rows, e.table, txName(e.xid, e.tx), e.ordinal)
		}
		if e.kind == entryPrepare {
			what = fmt.Sprintf("prepare %s of %s for %s, change %d", e.op.String(), e.table, txName(e.xid, e.tx), e.ordinal)
		}
		return classify(failed, what)
	}
	return classify(failed, "apply changes")
}

// Release deallocates the statements the applier prepared on conn. Call it
// when the applier is no longer used and the connection stays open; conn
// must not be in the middle of a query.
func (a *applier) Release(ctx context.Context, conn *pgx.Conn) error {
	if len(a.names) == 0 {
		return nil
	}
	p := conn.PgConn().StartPipeline(ctx)
	for _, n := range a.names {
		p.SendDeallocate(n)
	}
	err := p.Sync()
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	a.names = nil
	for _, ts := range a.tables {
		clear(ts.stmts)
	}
	if err != nil {
		return classify(err, "deallocate apply statements")
	}
	return nil
}
