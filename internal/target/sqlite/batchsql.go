package sqlite

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sendRows runs h's rows as multi-row statements of the given shape (a
// statement key: kind, and the update's column mask), preparing each size
// once per table and shape, and empties nothing (the group does).
func (a *applier) sendRows(ctx context.Context, q execer, ts *tableState, h *heldRows, shape []byte, build func(rows int) string) error {
	full := rowsPerStatement(h.width)
	for off := 0; off < h.rows(); {
		n := chunk(h.rows()-off, full)
		st, err := ts.stmts.Get(ctx, q, a.batchKey(shape, n), func() string { return build(n) }, classify)
		if err != nil {
			return err
		}
		if _, err := st.ExecContext(ctx, h.args[off*h.width:(off+n)*h.width]...); err != nil {
			return a.batchErr(ctx, q, ts, h, off, n, shape, build, err)
		}
		off += n
	}
	return nil
}

// batchKey is the statement key of a multi-row statement of shape and
// rows rows: no single-row statement's key starts with '#'.
func (a *applier) batchKey(shape []byte, rows int) []byte {
	a.keyBuf = append(append(a.keyBuf[:0], '#'), shape...)
	return binary.BigEndian.AppendUint16(a.keyBuf, uint16(rows))
}

// batchErr describes the failure err of the statement carrying rows
// off..off+n of h. When SQLite failed that statement alone (a constraint,
// a value it would not store), the rows run again one at a time inside a
// savepoint rolled back afterwards, and the error names the change that
// fails alone; otherwise it names the first and the last change.
func (a *applier) batchErr(ctx context.Context, q execer, ts *tableState, h *heldRows, off, n int, shape []byte, build func(rows int) string, err error) error {
	table := ts.def.QualifiedName()
	if n > 1 && ctx.Err() == nil && statementOnly(err) {
		if i, rowErr := a.diagnose(ctx, q, ts, h, off, n, shape, build); i >= 0 {
			off, n, err = i, 1, rowErr
		}
	}
	first, last := h.refs[off], h.refs[off+n-1]
	if n == 1 {
		return classify(err, fmt.Sprintf("apply %s to %s (%s)", h.op.String(), table, first.where()))
	}
	return classify(err, fmt.Sprintf("apply %d %ss to %s (%s to %s)", n, h.op.String(), table, first.where(), last.where()))
}

// diagnose runs rows off..off+n of h one at a time inside a savepoint,
// which it rolls back, and returns the first that fails and its error, or
// -1 when none does.
func (a *applier) diagnose(ctx context.Context, q execer, ts *tableState, h *heldRows, off, n int, shape []byte, build func(rows int) string) (int, error) {
	if _, err := q.ExecContext(ctx, "SAVEPOINT sluice_batch"); err != nil {
		return -1, nil
	}
	defer func() {
		// Rolling back to the savepoint keeps the transaction open; the
		// lane fails and rolls it back whole.
		_, _ = q.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO sluice_batch")
		_, _ = q.ExecContext(context.WithoutCancel(ctx), "RELEASE sluice_batch")
	}()
	st, err := ts.stmts.Get(ctx, q, a.batchKey(shape, 1), func() string { return build(1) }, classify)
	if err != nil {
		return -1, nil
	}
	for i := off; i < off+n; i++ {
		if _, err := st.ExecContext(ctx, h.args[i*h.width:(i+1)*h.width]...); err != nil {
			return i, err
		}
	}
	return -1, nil
}

// statementOnly reports whether err failed one statement and left the
// transaction as it was (SQLite rolls the whole transaction back on some
// errors: a full disk, I/O, an interrupt).
func statementOnly(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_RANGE:
		return true
	}
	return false
}

// placeholders is "(?, ?, …)" of width parameters, rows times, separated
// by commas.
func placeholders(width, rows int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}

// insertRowsSQL inserts rows rows of every stored column; on a keyed
// table, a row already there under its key is updated to it instead.
func insertRowsSQL(ts *tableState, rows int) string {
	names := make([]string, len(ts.cols))
	for i, c := range ts.cols {
		names[i] = c.quoted
	}
	s := "INSERT INTO " + ts.rel + " (" + strings.Join(names, ", ") + ") VALUES " + placeholders(len(ts.cols), rows)
	if ts.insKey == nil {
		return s
	}
	key := make([]string, len(ts.insKey))
	inKey := make([]bool, len(names))
	for i, k := range ts.insKey {
		key[i] = names[k]
		inKey[k] = true
	}
	var set []string
	for i, n := range names {
		if !inKey[i] {
			set = append(set, n+" = excluded."+n)
		}
	}
	s += " ON CONFLICT (" + strings.Join(key, ", ") + ") DO "
	if len(set) == 0 {
		return s + "NOTHING"
	}
	return s + "UPDATE SET " + strings.Join(set, ", ")
}

// deleteInSQL deletes the rows of rows keys (the table's one key): by IN
// over a list for a one-column key, by a row value IN a VALUES list for a
// longer one.
func deleteInSQL(ts *tableState, rows int) string {
	key := ts.keys[0]
	if len(key) == 1 {
		return "DELETE FROM " + ts.rel + " WHERE " + ts.cols[key[0]].quoted + " IN (" + strings.TrimSuffix(strings.Repeat("?, ", rows), ", ") + ")"
	}
	cols := make([]string, len(key))
	for i, k := range key {
		cols[i] = ts.cols[k].quoted
	}
	return "DELETE FROM " + ts.rel + " WHERE (" + strings.Join(cols, ", ") + ") IN (VALUES " + placeholders(len(key), rows) + ")"
}

// updateFromSQL updates rows rows by key, each to its own values of the
// set columns: the table joined to a VALUES list of each row's key values
// and then its set values (UPDATE … FROM).
func updateFromSQL(ts *tableState, set []int, rows int) string {
	key := ts.keys[0]
	assign := make([]string, len(set))
	for j, c := range set {
		assign[j] = ts.cols[c].quoted + " = sluice_v.column" + strconv.Itoa(len(key)+j+1)
	}
	match := make([]string, len(key))
	for j, k := range key {
		match[j] = "sluice_t." + ts.cols[k].quoted + " = sluice_v.column" + strconv.Itoa(j+1)
	}
	return "UPDATE " + ts.rel + " AS sluice_t SET " + strings.Join(assign, ", ") +
		" FROM (VALUES " + placeholders(len(key)+len(set), rows) + ") AS sluice_v WHERE " + strings.Join(match, " AND ")
}
