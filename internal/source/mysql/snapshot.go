package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/value"
)

var _ readback.SourceReader = (*engine)(nil)

// sourceSnapshot is one consistent-snapshot transaction on the source, for
// a comparison (`sluice verify`): the schema and every row are read in it.
type sourceSnapshot struct {
	db    *sql.DB
	conn  *sql.Conn
	name  string
	facts map[string]*tableFacts
}

// OpenSourceSnapshot opens a REPEATABLE READ, READ ONLY consistent
// snapshot of the source database.
func (e *engine) OpenSourceSnapshot(ctx context.Context) (readback.SourceSnapshot, error) {
	db, err := connect(ctx, e.c, 1)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, classify(err, "connect to the source")
	}
	for _, stmt := range []string{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			conn.Close()
			db.Close()
			return nil, classify(err, "open a snapshot of the source")
		}
	}
	return &sourceSnapshot{db: db, conn: conn, name: e.c.database}, nil
}

// Schema reads the source's tables as a full backup records them.
func (s *sourceSnapshot) Schema(ctx context.Context) (*chain.Schema, error) {
	schema, facts, err := readSchema(ctx, s.conn, s.name)
	if err != nil {
		return nil, err
	}
	s.facts = facts
	return schema, nil
}

// Count returns the rows of the source's table for tb.
func (s *sourceSnapshot) Count(ctx context.Context, tb *chain.Table) (int64, bool, error) {
	var n int64
	err := s.conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+quoteName(s.name)+"."+quoteName(tb.Name)).Scan(&n)
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok && me.Number == erNoSuchTable {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, classify(err, "count the rows of "+tb.QualifiedName())
	}
	return n, true, nil
}

// erNoSuchTable is MySQL's error for a table that does not exist.
const erNoSuchTable = 1146

// Scan reads every row of tb as neutral values by the columns' kinds, the
// values decoded exactly as a full backup records them.
func (s *sourceSnapshot) Scan(ctx context.Context, tb *chain.Table, fn func([]value.Value) error) error {
	tf := s.facts[tb.Name]
	if tf == nil {
		fresh, err := readTables(ctx, s.conn, s.name, tb.Name)
		if err != nil {
			return err
		}
		if tf = fresh[tb.Name]; tf == nil {
			return fmt.Errorf("the source has no table %s", tb.QualifiedName())
		}
	}
	cols := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		cols[i] = quoteName(c.Name)
	}
	stmt, err := s.conn.PrepareContext(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+quoteName(s.name)+"."+quoteName(tb.Name))
	if err != nil {
		return classify(err, "read "+tb.QualifiedName())
	}
	defer stmt.Close()
	rows, err := stmt.QueryContext(ctx)
	if err != nil {
		return classify(err, "read "+tb.QualifiedName())
	}
	defer rows.Close()
	codecs := codecsOf(tf)
	if len(codecs) != len(cols) {
		return fmt.Errorf("table %s changed while it was compared", tb.QualifiedName())
	}
	scanned := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range ptrs {
		ptrs[i] = &scanned[i]
	}
	out := make([]value.Value, len(cols))
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return classify(err, "read "+tb.QualifiedName())
		}
		for i := range codecs {
			text, err := codecs[i].fromSQL(scanned[i])
			if err != nil {
				return err
			}
			if scanned[i] == nil {
				out[i] = value.Value{Null: true}
				continue
			}
			if out[i], err = value.DecodePGText(codecs[i].kind, text); err != nil {
				return fmt.Errorf("column %s: %w", codecs[i].where, err)
			}
		}
		if err := fn(out); err != nil {
			return err
		}
	}
	return classify(rows.Err(), "read "+tb.QualifiedName())
}

// Close ends the snapshot.
func (s *sourceSnapshot) Close(context.Context) error {
	s.conn.ExecContext(context.Background(), "ROLLBACK") //nolint:errcheck // the connection closes anyway
	s.conn.Close()
	return s.db.Close()
}
