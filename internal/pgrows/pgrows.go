// Package pgrows reads PostgreSQL tables as neutral values inside one
// REPEATABLE READ, READ ONLY transaction: the readback.Snapshot both PostgreSQL
// engine packages (the source and the target) hand out for their own
// databases. Values are read as text under the chain's text settings and
// decoded by each column's kind, as a PostgreSQL target reads a chain.
package pgrows

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/value"
)

// Snapshot is a readback.Snapshot over one PostgreSQL connection, which it
// owns and closes.
type Snapshot struct {
	conn     *pgx.Conn
	tx       pgx.Tx
	classify func(err error, what string) error
}

var _ readback.Snapshot = (*Snapshot)(nil)

// Begin starts the snapshot on conn; classify codes the errors of its reads
// by the side the connection is on (source or target). On failure conn is
// closed.
func Begin(ctx context.Context, conn *pgx.Conn, classify func(err error, what string) error) (*Snapshot, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, classify(err, "begin a snapshot")
	}
	for k, v := range chain.PostgresTextSettings() {
		if _, err := tx.Exec(ctx, "SELECT set_config($1, $2, true)", k, v); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, classify(err, "set "+k)
		}
	}
	return &Snapshot{conn: conn, tx: tx, classify: classify}, nil
}

// Tx is the snapshot's transaction, for reads of the engine's own (the
// source's schema).
func (s *Snapshot) Tx() pgx.Tx { return s.tx }

// qualified quotes tb's name.
func qualified(tb *chain.Table) string { return pgx.Identifier{tb.Schema, tb.Name}.Sanitize() }

// Count returns the table's row count, or found false when it does not exist.
func (s *Snapshot) Count(ctx context.Context, tb *chain.Table) (int64, bool, error) {
	var exists bool
	if err := s.tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qualified(tb)).Scan(&exists); err != nil {
		return 0, false, s.classify(err, "look up "+tb.QualifiedName())
	}
	if !exists {
		return 0, false, nil
	}
	var n int64
	if err := s.tx.QueryRow(ctx, "SELECT count(*) FROM "+qualified(tb)).Scan(&n); err != nil {
		return 0, true, s.classify(err, "count "+tb.QualifiedName())
	}
	return n, true, nil
}

// Scan reads every row of tb, each column as text decoded by its kind.
func (s *Snapshot) Scan(ctx context.Context, tb *chain.Table, fn func([]value.Value) error) error {
	cols := make([]string, len(tb.Columns))
	kinds := make([]value.Kind, len(tb.Columns))
	for i, c := range tb.Columns {
		cols[i] = pgx.Identifier{c.Name}.Sanitize()
		if !blankPadded(c) {
			cols[i] += "::text"
		}
		kinds[i] = c.NeutralKind()
	}
	r, err := s.tx.Query(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+qualified(tb), pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		return s.classify(err, "read "+tb.QualifiedName())
	}
	defer r.Close()
	row := make([]value.Value, len(cols))
	for r.Next() {
		for i, raw := range r.RawValues() {
			if raw == nil {
				row[i] = value.Value{Null: true}
				continue
			}
			v, err := value.DecodePGText(kinds[i], raw)
			if err != nil {
				return fmt.Errorf("read %s.%s: %w", tb.QualifiedName(), tb.Columns[i].Name, err)
			}
			row[i] = v
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	if err := r.Err(); err != nil {
		return s.classify(err, "read "+tb.QualifiedName())
	}
	return nil
}

var _ readback.ColumnReader = (*Snapshot)(nil)

// Columns lists the stored columns of tb's table, in the table's order
// (generated and dropped ones left out).
func (s *Snapshot) Columns(ctx context.Context, tb *chain.Table) ([]string, bool, error) {
	var exists bool
	if err := s.tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qualified(tb)).Scan(&exists); err != nil {
		return nil, false, s.classify(err, "look up "+tb.QualifiedName())
	}
	if !exists {
		return nil, false, nil
	}
	r, err := s.tx.Query(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0
		AND NOT attisdropped AND attgenerated = '' ORDER BY attnum`, qualified(tb))
	if err != nil {
		return nil, true, s.classify(err, "list the columns of "+tb.QualifiedName())
	}
	names, err := pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil {
		return nil, true, s.classify(err, "list the columns of "+tb.QualifiedName())
	}
	return names, true, nil
}

// blankPadded reports whether c is a character(n) column, whose padding a
// cast to text would strip: its own text output keeps it, as a full backup
// records it and every target stores it.
func blankPadded(c chain.Column) bool {
	return c.TypeOID == 1042 || c.Type == "bpchar" || c.Type == "character" || strings.HasPrefix(c.Type, "character(")
}

// Close ends the transaction and closes the connection.
func (s *Snapshot) Close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	_ = s.tx.Rollback(ctx)
	return s.conn.Close(ctx)
}
