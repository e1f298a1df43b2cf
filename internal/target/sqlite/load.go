package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
)

// loadBatchRows is how many rows one INSERT of a load carries, fewer for a
// table so wide that they would bind more than maxVariables parameters.
// Measured on 100,000 rows of five columns: one row per statement loads at
// half the speed of 16 to 1024, which are within noise of each other.
const loadBatchRows = 128

// maxVariables is SQLite's default limit on the parameters of a statement.
const maxVariables = 32766

// loadChunks inserts the rows of td's chunks into the table just created,
// inside conn's open transaction, and returns how many it inserted (s is
// the full's schema, for the enums it records). A
// goroutine fetches and verifies the next chunks while the rows of the
// current one are decoded and inserted.
func loadChunks(ctx context.Context, conn *sql.Conn, ch *chain.Chain, s *chain.Schema, tb *chain.Table, td chain.TableData, progress target.LoadProgress) (int64, error) {
	cols := storedColumns(withKinds(s, tb))
	ins := newInserter(conn, td.Table, tableName(tb), cols)
	defer ins.close()
	total, err := sqlkit.LoadRows(ctx, ch, td, len(cols), func(values [][]byte) error { return ins.add(ctx, values) }, progress)
	if err != nil {
		return 0, err
	}
	if err := ins.flush(ctx); err != nil {
		return 0, err
	}
	return total, nil
}

// inserter batches rows into multi-row INSERT statements: a prepared one
// of full batches, and one for the rows left at the end.
type inserter struct {
	conn    *sql.Conn
	table   string // the recorded name, for messages
	rel     string // the quoted SQLite name
	cols    []column
	perStmt int
	full    *sql.Stmt
	args    []any
	pending int
}

func newInserter(conn *sql.Conn, table, name string, cols []column) *inserter {
	per := min(loadBatchRows, maxVariables/max(len(cols), 1))
	return &inserter{conn: conn, table: table, rel: quoteIdent(name), cols: cols, perStmt: per, args: make([]any, per*len(cols))}
}

// insertSQL is an INSERT of rows rows of every stored column.
func (in *inserter) insertSQL(rows int) string {
	names := make([]string, len(in.cols))
	for i, c := range in.cols {
		names[i] = c.quoted
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(in.cols)), ", ") + ")"
	return "INSERT INTO " + in.rel + " (" + strings.Join(names, ", ") + ") VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}

// add decodes one tuple into the batch, sending the batch when it is full.
func (in *inserter) add(ctx context.Context, values [][]byte) error {
	base := in.pending * len(in.cols)
	for i := range in.cols {
		c := &in.cols[i]
		arg, err := c.FromChunk(values[i])
		if err != nil {
			return refuseValue(in.table, c, err)
		}
		in.args[base+i] = arg
	}
	in.pending++
	if in.pending == in.perStmt {
		return in.flush(ctx)
	}
	return nil
}

// flush inserts the rows batched so far.
func (in *inserter) flush(ctx context.Context) error {
	if in.pending == 0 {
		return nil
	}
	st := in.full
	if in.pending < in.perStmt || st == nil {
		var err error
		st, err = in.conn.PrepareContext(ctx, in.insertSQL(in.pending))
		if err != nil {
			return classify(err, "prepare the insert into "+in.table)
		}
		if in.pending == in.perStmt {
			in.full = st
		} else {
			defer st.Close()
		}
	}
	args := in.args[:in.pending*len(in.cols)]
	_, err := st.ExecContext(ctx, args...)
	clear(args) // drop the references to the chunk's bytes
	in.pending = 0
	if err != nil {
		return classify(err, "insert into "+in.table)
	}
	return nil
}

func (in *inserter) close() {
	if in.full != nil {
		in.full.Close()
	}
}
