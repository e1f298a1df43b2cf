package sqlite

import (
	"context"
	"database/sql"

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
	defer ins.Close()
	total, err := sqlkit.LoadRows(ctx, ch, td, len(cols), func(values [][]byte) error { return ins.Add(ctx, values) }, progress)
	if err != nil {
		return 0, err
	}
	if err := ins.Flush(ctx); err != nil {
		return 0, err
	}
	return total, nil
}

// newInserter returns the multi-row INSERT loader of one table.
func newInserter(conn *sql.Conn, table, name string, cols []column) *sqlkit.Inserter {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.quoted
	}
	in := sqlkit.NewInserter(conn, sqlkit.InserterConfig{Table: table, Rel: quoteIdent(name), Columns: names,
		Rows: loadBatchRows, MaxParams: maxVariables, Classify: classify,
		Decode: func(i int, data []byte) (any, error) {
			arg, err := cols[i].FromChunk(data)
			if err != nil {
				return nil, refuseValue(table, &cols[i], err)
			}
			return arg, nil
		}})
	return in
}
