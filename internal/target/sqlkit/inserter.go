package sqlkit

import (
	"context"
	"database/sql"
	"strings"
)

// Inserter loads rows into one table by multi-row INSERTs of "?"
// placeholders: a prepared statement of full batches, and one for the rows
// left when a batch is sent early (at the end, or past MaxBytes).
type Inserter struct {
	conn     *sql.Conn
	table    string // the recorded name, for messages
	sql      func(rows int) string
	ncols    int
	perStmt  int
	maxBytes int
	decode   func(i int, data []byte) (any, error)
	classify Classify
	full     *sql.Stmt
	args     []any
	pending  int
	bytes    int
}

// InserterConfig describes the table an Inserter loads.
type InserterConfig struct {
	// Table is the recorded name, for messages; Rel the quoted target
	// name; Columns the quoted column names, in row order.
	Table, Rel string
	Columns    []string
	// Rows is the most rows a statement carries, and MaxParams the most
	// parameters (the engine's limit); MaxBytes, when set, sends a batch
	// early once its values pass it.
	Rows, MaxParams, MaxBytes int
	// Decode turns column i's field of a row chunk into its argument, or
	// a refusal naming the table and column.
	Decode   func(i int, data []byte) (any, error)
	Classify Classify
}

// NewInserter returns an Inserter for cfg on conn, which holds the load's
// open transaction.
func NewInserter(conn *sql.Conn, cfg InserterConfig) *Inserter {
	n := len(cfg.Columns)
	per := min(cfg.Rows, cfg.MaxParams/max(n, 1))
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
	head := "INSERT INTO " + cfg.Rel + " (" + strings.Join(cfg.Columns, ", ") + ") VALUES "
	return &Inserter{conn: conn, table: cfg.Table, ncols: n, perStmt: per, maxBytes: cfg.MaxBytes, decode: cfg.Decode, classify: cfg.Classify,
		args: make([]any, per*n),
		sql:  func(rows int) string { return head + strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ") }}
}

// Add decodes one tuple into the batch, sending the batch when it is full.
func (in *Inserter) Add(ctx context.Context, values [][]byte) error {
	base := in.pending * in.ncols
	for i := 0; i < in.ncols; i++ {
		arg, err := in.decode(i, values[i])
		if err != nil {
			return err
		}
		in.args[base+i] = arg
		in.bytes += len(values[i]) + 8
	}
	in.pending++
	if in.pending == in.perStmt || (in.maxBytes > 0 && in.bytes >= in.maxBytes) {
		return in.Flush(ctx)
	}
	return nil
}

// Flush inserts the rows batched so far.
func (in *Inserter) Flush(ctx context.Context) error {
	if in.pending == 0 {
		return nil
	}
	st := in.full
	if in.pending < in.perStmt || st == nil {
		var err error
		st, err = in.conn.PrepareContext(ctx, in.sql(in.pending))
		if err != nil {
			return in.classify(err, "prepare the insert into "+in.table)
		}
		if in.pending == in.perStmt {
			in.full = st
		} else {
			defer st.Close()
		}
	}
	args := in.args[:in.pending*in.ncols]
	_, err := st.ExecContext(ctx, args...)
	clear(args) // drop the references to the chunk's bytes
	in.pending, in.bytes = 0, 0
	if err != nil {
		return in.classify(err, "insert into "+in.table)
	}
	return nil
}

// Close releases the prepared statement.
func (in *Inserter) Close() {
	if in.full != nil {
		in.full.Close()
	}
}
