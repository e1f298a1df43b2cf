package mysql

import (
	"context"
	"database/sql"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
)

// A load's INSERT carries up to loadBatchRows rows, fewer for a table so
// wide that they would bind more than maxPlaceholders parameters, and is
// sent early once its values pass loadBatchBytes, well inside the
// server's max_allowed_packet (16 MiB by default on MariaDB).
const (
	loadBatchRows   = 1000
	maxPlaceholders = 65535
	loadBatchBytes  = 4 << 20
)

// loadChunks inserts the rows of td's chunks into the table just created,
// inside conn's open transaction, and returns how many it inserted (s is
// the full's schema, for the enums it records). The next chunks are
// fetched and verified while the rows of the current one are decoded and
// inserted.
func loadChunks(ctx context.Context, conn *sql.Conn, ch *chain.Chain, s *chain.Schema, tb *chain.Table, td chain.TableData, f flavor, progress target.LoadProgress) (int64, error) {
	cols := storedColumns(withKinds(s, tb), f)
	var ins rowSink
	if f.localInfile && !forceInsertLoad {
		ins = newInfileLoader(ctx, conn, td.Table, tableName(tb), cols)
	} else {
		ins = newInserter(conn, td.Table, tableName(tb), cols)
	}
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

// rowSink is where a load writes a table's rows: a LOAD DATA LOCAL INFILE
// stream where the server allows it (infileLoader), multi-row INSERTs
// otherwise (inserter).
type rowSink interface {
	Add(ctx context.Context, values [][]byte) error
	Flush(ctx context.Context) error
	Close()
}

// forceInsertLoad makes every load use multi-row INSERTs (the benchmark
// compares both ways).
var forceInsertLoad bool

// newInserter returns the multi-row INSERT loader of one table.
func newInserter(conn *sql.Conn, table, name string, cols []column) *sqlkit.Inserter {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.quoted
	}
	in := sqlkit.NewInserter(conn, sqlkit.InserterConfig{Table: table, Rel: quoteIdent(name), Columns: names,
		Rows: loadBatchRows, MaxParams: maxPlaceholders, MaxBytes: loadBatchBytes, Classify: classify,
		Decode: func(i int, data []byte) (any, error) {
			arg, err := cols[i].FromChunk(data)
			if err != nil {
				return nil, refuseValue(table, &cols[i], err)
			}
			return arg, nil
		}})
	return in
}
