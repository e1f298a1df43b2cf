package chainview

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Record is one line of an incremental as Inspect reports it: a
// transaction's begin or commit, or one change. Its JSON field names are
// stable (docs/operations.md, "Browse a chain").
type Record struct {
	// Op is "begin", "commit", "insert", "update", "delete", "truncate" or
	// "schema".
	Op string `json:"op"`
	// CommitTime is the commit time of the record's transaction.
	CommitTime *time.Time `json:"commit_time,omitempty"`
	// XID and CommitLSN name a PostgreSQL source transaction; GTID names a
	// MySQL-family one. All are absent for a change without identity.
	XID       uint32 `json:"xid,omitempty"`
	CommitLSN string `json:"commit_lsn,omitempty"`
	GTID      string `json:"gtid,omitempty"`
	// Ordinal is the change's place in its transaction, from 0 (changes
	// with an identity only).
	Ordinal *uint32 `json:"ordinal,omitempty"`
	// Table is the qualified table of a row or schema change.
	Table string `json:"table,omitempty"`
	// Tables are the tables a truncate empties.
	Tables []string `json:"tables,omitempty"`
	// Key holds the values of the key columns that name the changed row
	// (absent when the recorded schema gives the table no key, or the
	// image does not carry it whole).
	Key []ColumnValue `json:"key,omitempty"`
	// Changed are the columns the change sets: every column of an insert;
	// of an update the columns whose value differs from the old row when
	// the source recorded the whole old row, else every column it carries
	// except the key columns that kept their value and those the source
	// left out.
	Changed []ColumnValue `json:"changed,omitempty"`
	// Columns, on a schema change, lists the table's new columns with their
	// types ("name type").
	Columns []string `json:"columns,omitempty"`
}

// ColumnValue is one column of a change. Value is nil for SQL NULL; Old is
// set on an update's changed column when the old row is known.
type ColumnValue struct {
	// Column is the column's name ("#i" when the recorded schema does not
	// name the i-th supplied column).
	Column string `json:"column"`
	// Value is the column's text (the new value of a change).
	Value *string `json:"value"`
	// Old is the value before an update, when the old row is known.
	Old *string `json:"old,omitempty"`
	// OldNull is true when Old is known and is SQL NULL.
	OldNull bool `json:"old_null,omitempty"`
}

// TableView is one table of a full as Inspect reports it.
type TableView struct {
	// Table is the qualified table name.
	Table string `json:"table"`
	// Rows is the table's row count in the full.
	Rows int64 `json:"rows"`
	// Chunks and StoredBytes are the number and stored size of its chunks.
	Chunks      int   `json:"chunks"`
	StoredBytes int64 `json:"stored_bytes"`
}

// LinkInfo says which link Inspect reads.
type LinkInfo struct {
	// Link is the catalog's entry for it.
	Link chain.Link
	// Segment is the index of its segment.
	Segment int
	// Engine is the chain's source engine.
	Engine string
}

// Visitor receives what Inspect reads, in order: a full's tables, or an
// incremental's records. The Record and its slices are only valid during
// the call.
type Visitor struct {
	// Link is called first, with the link found.
	Link func(LinkInfo) error
	// Table is called per table of a full.
	Table func(TableView) error
	// Record is called per record of an incremental.
	Record func(*Record) error
}

// FindLink returns the link of cat that id names: its whole ID, or a
// prefix of at least 6 characters that only one link's ID starts with. An
// ID no link has is errcode.LinkNotFound; a prefix several share is a
// usage error.
func FindLink(cat *chain.Catalog, id string) (chain.Link, int, error) {
	if l, si, ok := cat.Find(id); ok {
		return l, si, nil
	}
	var found []chain.Link
	seg := -1
	if len(id) >= 6 {
		for si, s := range cat.Segments {
			for _, l := range append([]chain.Link{s.Full}, s.Incrementals...) {
				if strings.HasPrefix(l.ID, id) {
					found, seg = append(found, l), si
				}
			}
		}
	}
	switch len(found) {
	case 0:
		return chain.Link{}, -1, errcode.New(errcode.LinkNotFound, "catalog generation %d of chain %s has no link %s", cat.Generation, cat.ChainID, id)
	case 1:
		return found[0], seg, nil
	}
	return chain.Link{}, -1, errcode.New(errcode.Usage, "%d links start with %s: give more of the ID", len(found), id)
}

// Inspect reads link id of the chain (FindLink) and hands v, in order, the
// link, then per table of a full its row and chunk counts, or every record
// of an incremental, decoded chunk by chunk with the chain's change decoder
// (chain.WalkIncremental) so a large link is never held whole. table, when
// not empty, keeps only that qualified table's tables or changes (and the
// begin and commit of transactions that hold one).
func Inspect(ctx context.Context, ch *chain.Chain, id, table string, v Visitor) error {
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return err
	}
	l, si, err := FindLink(cat, id)
	if err != nil {
		return err
	}
	m, err := ch.LinkManifest(ctx, cat, l.ID)
	if err != nil {
		return fmt.Errorf("read the manifest of link %s: %w", l.ID, err)
	}
	if v.Link != nil {
		if err := v.Link(LinkInfo{Link: l, Segment: si, Engine: m.Source.Engine}); err != nil {
			return err
		}
	}
	if m.Kind == chain.KindFull {
		for _, t := range m.Tables {
			if table != "" && t.Table != table {
				continue
			}
			tv := TableView{Table: t.Table, Rows: t.Rows, Chunks: len(t.Chunks)}
			for _, c := range t.Chunks {
				tv.StoredBytes += c.Size
			}
			if v.Table != nil {
				if err := v.Table(tv); err != nil {
					return err
				}
			}
		}
		return nil
	}
	schema, err := schemaBefore(ctx, ch, cat, l.ID)
	if err != nil {
		return err
	}
	w := newWalker(schema, m.Source.Engine, table, v.Record)
	if err := ch.WalkIncremental(ctx, m, w.visit, nil); err != nil {
		return fmt.Errorf("read incremental %s: %w", l.ID, err)
	}
	return nil
}

// schemaBefore returns the recorded schema in force before incremental
// id: the newest one its segment's links before it record.
func schemaBefore(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, id string) (*chain.Schema, error) {
	path, err := cat.Path(id)
	if err != nil {
		return nil, err
	}
	if len(path) < 2 {
		return nil, errcode.New(errcode.ChainInvalid, "incremental %s follows no full in its segment", id)
	}
	s, err := ch.SchemaAt(ctx, cat, path[len(path)-2].ID)
	if err != nil {
		return nil, fmt.Errorf("read the schema before incremental %s: %w", id, err)
	}
	return s, nil
}

// walker turns an incremental's records into Records, following its
// schema changes.
type walker struct {
	tables map[string]*tableKeys
	engine string
	filter string
	emit   func(*Record) error

	begin   *chain.Change // the open transaction's begin, until emitted
	emitted bool          // the open transaction's begin was emitted
	when    *time.Time    // the open transaction's commit time
	rec     Record
}

// tableKeys is what a walker needs of a table: its supplied columns' names
// and its candidate keys.
type tableKeys struct {
	columns []string
	keys    [][]int
}

func newWalker(s *chain.Schema, engine, filter string, emit func(*Record) error) *walker {
	w := &walker{tables: map[string]*tableKeys{}, engine: engine, filter: filter, emit: emit}
	if s != nil {
		for i := range s.Tables {
			w.learn(&s.Tables[i])
		}
	}
	return w
}

func (w *walker) learn(t *chain.Table) {
	tk := &tableKeys{keys: t.CandidateKeys()}
	for _, c := range t.SuppliedColumns() {
		tk.columns = append(tk.columns, c.Name)
	}
	w.tables[t.QualifiedName()] = tk
}

func (w *walker) visit(c *chain.Change) error {
	switch c.Op {
	case chain.OpBegin:
		b := c.Clone()
		w.begin, w.emitted, w.when = b, false, nil
		if c.CommitTime != 0 {
			t := CommitTime(c)
			w.when = &t
		}
		if w.filter == "" {
			return w.flushBegin()
		}
		return nil
	case chain.OpCommit:
		out := w.emitted
		w.begin, w.emitted = nil, false
		if !out {
			return nil
		}
		w.fill(c, "commit")
		if c.CommitTime != 0 {
			t := CommitTime(c)
			w.rec.CommitTime = &t
		}
		return w.send()
	case chain.OpSchema:
		if c.Schema != nil {
			defer w.learn(c.Schema)
		}
	}
	if w.filter != "" && !w.touches(c) {
		return nil
	}
	if err := w.flushBegin(); err != nil {
		return err
	}
	w.change(c)
	return w.send()
}

// touches reports whether a change concerns the filtered table.
func (w *walker) touches(c *chain.Change) bool {
	if c.Op == chain.OpTruncate {
		for _, t := range c.Tables {
			if t == w.filter {
				return true
			}
		}
		return false
	}
	return c.Table == w.filter
}

// flushBegin emits the open transaction's begin once.
func (w *walker) flushBegin() error {
	if w.begin == nil || w.emitted {
		return nil
	}
	w.emitted = true
	w.fill(w.begin, "begin")
	return w.send()
}

func (w *walker) send() error {
	if w.emit == nil {
		return nil
	}
	return w.emit(&w.rec)
}

// fill starts the record of c: its op, transaction and commit time.
func (w *walker) fill(c *chain.Change, op string) {
	w.rec = Record{Op: op, CommitTime: w.when}
	if !c.Identified {
		return
	}
	if c.Tx != "" {
		w.rec.GTID = c.Tx
	} else {
		w.rec.XID = c.XID
		if c.CommitLSN != 0 {
			w.rec.CommitLSN = chain.FormatLSN(c.CommitLSN)
		}
	}
}

// change fills the record of a row, truncate or schema change.
func (w *walker) change(c *chain.Change) {
	op := c.Op.String()
	if c.Op == chain.OpSchema {
		op = "schema"
	}
	w.fill(c, op)
	if c.Identified {
		o := c.Ordinal
		w.rec.Ordinal = &o
	}
	switch c.Op {
	case chain.OpTruncate:
		w.rec.Tables = append([]string(nil), c.Tables...)
		return
	case chain.OpSchema:
		w.rec.Table = c.Table
		if c.Schema != nil {
			for _, col := range c.Schema.Columns {
				w.rec.Columns = append(w.rec.Columns, col.Name+" "+col.Type)
			}
		}
		return
	}
	w.rec.Table = c.Table
	tk := w.tables[c.Table]
	var names []string
	var key []int
	if tk != nil {
		names = tk.columns
		if ki, img, ok := chain.KeyImage(c, tk.keys); ok {
			key = tk.keys[ki]
			for _, k := range key {
				w.rec.Key = append(w.rec.Key, ColumnValue{Column: colName(names, k), Value: text(img[k])})
			}
		}
	}
	isKey := func(i int) bool {
		for _, k := range key {
			if k == i {
				return true
			}
		}
		return false
	}
	switch c.Op {
	case chain.OpInsert:
		for i, v := range c.New {
			if v.Kind != chain.ValueUnchanged {
				w.rec.Changed = append(w.rec.Changed, ColumnValue{Column: colName(names, i), Value: text(v)})
			}
		}
	case chain.OpUpdate:
		whole := c.OldKind == 'O' && len(c.Old) == len(c.New)
		keyMoved := c.OldKind != 0 && key != nil && !chain.SameKey(key, c.Old, c.New)
		for i, v := range c.New {
			if v.Kind == chain.ValueUnchanged {
				continue
			}
			cv := ColumnValue{Column: colName(names, i), Value: text(v)}
			switch {
			case whole:
				o := c.Old[i]
				if o.Kind == v.Kind && string(o.Data) == string(v.Data) {
					continue
				}
				if o.Kind == chain.ValueNull {
					cv.OldNull = true
				} else if o.Kind == chain.ValueText {
					cv.Old = text(o)
				}
			case isKey(i) && (!keyMoved || (i < len(c.Old) && c.Old[i].Kind == chain.ValueText && string(c.Old[i].Data) == string(v.Data))):
				continue // the key, or a column of a moved key that kept its value
			}
			w.rec.Changed = append(w.rec.Changed, cv)
		}
	}
}

// colName names supplied column i, or "#i" when the schema does not.
func colName(names []string, i int) string {
	if i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("#%d", i)
}

// text returns a value's text, nil for NULL.
func text(v chain.Value) *string {
	if v.Kind != chain.ValueText {
		return nil
	}
	s := string(v.Data)
	return &s
}
