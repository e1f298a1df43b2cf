package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
	"github.com/sluicehq/sluice/internal/value"
)

var _ readback.Reader = (*Target)(nil)

// snapshot is one InnoDB consistent snapshot on a connection of its own.
type snapshot struct {
	t    *Target
	conn *sql.Conn
}

// OpenSnapshot starts a consistent, read-only snapshot of the target
// database (REPEATABLE READ, WITH CONSISTENT SNAPSHOT), for a comparison
// (`sluice verify`). Values read back by the rules ReadRows follows.
func (t *Target) OpenSnapshot(ctx context.Context) (readback.Snapshot, error) {
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return nil, classify(err, "connect for a snapshot")
	}
	for _, q := range []string{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close()
			return nil, classify(err, "begin a snapshot")
		}
	}
	return &snapshot{t: t, conn: conn}, nil
}

func (s *snapshot) Count(ctx context.Context, tb *chain.Table) (int64, bool, error) {
	var tables int
	if err := s.conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", tableName(tb)).Scan(&tables); err != nil {
		return 0, false, classify(err, "look up "+tableName(tb))
	}
	if tables == 0 {
		return 0, false, nil
	}
	var n int64
	if err := s.conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+quoteIdent(tableName(tb))).Scan(&n); err != nil {
		return 0, true, classify(err, "count "+tableName(tb))
	}
	return n, true, nil
}

// Scan reads the table through a prepared statement, so floats arrive in
// their binary form, exactly, and decodes each value as ReadRows does.
func (s *snapshot) Scan(ctx context.Context, tb *chain.Table, fn func([]value.Value) error) error {
	byName := map[string]column{}
	for _, c := range storedColumns(tb, s.t.flavor) {
		byName[c.name] = c
	}
	names := make([]string, len(tb.Columns))
	cols := make([]column, len(tb.Columns))
	for i, c := range tb.Columns {
		names[i] = quoteIdent(c.Name)
		col, ok := byName[c.Name]
		if !ok {
			col = column{Column: sqlkit.Column{Kind: kindOf(c)}}
		}
		cols[i] = col
	}
	st, err := s.conn.PrepareContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+quoteIdent(tableName(tb)))
	if err != nil {
		return classify(err, "read "+tableName(tb))
	}
	defer st.Close()
	r, err := st.QueryContext(ctx)
	if err != nil {
		return classify(err, "read "+tableName(tb))
	}
	defer r.Close()
	raw := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	row := make([]value.Value, len(names))
	for r.Next() {
		clear(raw)
		if err := r.Scan(ptrs...); err != nil {
			return classify(err, "read "+tableName(tb))
		}
		for i, x := range raw {
			v, err := cols[i].readStored(x)
			if err != nil {
				return fmt.Errorf("read %s.%s = %#v: %w", tb.Name, tb.Columns[i].Name, x, err)
			}
			row[i] = v
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	return classify(r.Err(), "read "+tableName(tb))
}

func (s *snapshot) Close(ctx context.Context) error {
	_, _ = s.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	return s.conn.Close()
}
