package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
	"github.com/sluicehq/sluice/internal/value"
	"github.com/sluicehq/sluice/internal/value/portable"
)

// ReadRows reads a restored table back as neutral values, ordered by its
// first column, decoding each stored value by the rules of
// docs/sqlite-target.md: what a comparison with the source (or another
// target) normalizes by kind.
func (t *Target) ReadRows(ctx context.Context, tb *chain.Table) ([][]value.Value, error) {
	var out [][]value.Value
	err := scanTable(ctx, t.db, tb, " ORDER BY 1", func(row []value.Value) error {
		out = append(out, slices.Clone(row))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanTable reads every row of the table for tb on q (after the query,
// suffix: an ORDER BY, or nothing), decoding each stored value by its
// column's kind, and calls fn with each row (valid only during the call).
func scanTable(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, tb *chain.Table, suffix string, fn func([]value.Value) error) error {
	names := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		names[i] = quoteIdent(c.Name)
	}
	r, err := q.QueryContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+quoteIdent(tableName(tb))+suffix)
	if err != nil {
		return classify(err, "read "+tableName(tb))
	}
	defer r.Close()
	err = sqlkit.EachRow(r, len(names), func(i int, x any) (value.Value, error) {
		v, err := readStored(kindOf(tb.Columns[i]), x)
		if err != nil {
			return v, fmt.Errorf("read %s.%s = %#v: %w", tb.Name, tb.Columns[i].Name, x, err)
		}
		return v, nil
	}, fn)
	if err != nil {
		return classify(err, "read "+tableName(tb))
	}
	return nil
}

// readStored decodes one stored value of kind k.
func readStored(k value.Kind, x any) (value.Value, error) {
	switch v := x.(type) {
	case nil:
		return value.Value{Null: true}, nil
	case int64:
		switch k.Name {
		case value.Int:
			return value.Value{Int: v, Uint: uint64(v)}, nil
		case value.Bool:
			return value.Value{Bool: v != 0}, nil
		case value.Float:
			return value.Value{Float: float64(v)}, nil
		}
	case float64:
		if k.Name == value.Float {
			return value.Value{Float: v}, nil
		}
	case []byte:
		if k.Name == value.Bytes {
			return value.Value{Bytes: v}, nil
		}
	case string:
		return portable.ParseText(k, v)
	}
	return value.Value{}, fmt.Errorf("a %T stored for kind %s", x, k.Name)
}

var _ readback.ColumnReader = (*snapshot)(nil)

// Columns lists the stored columns of the target's table for tb, in the
// table's order (generated ones left out).
func (s *snapshot) Columns(ctx context.Context, tb *chain.Table) ([]string, bool, error) {
	names, err := sqlkit.Strings(ctx, s.conn, classify, "list the columns of "+tableName(tb), "SELECT name FROM pragma_table_xinfo(?) WHERE hidden = 0 ORDER BY cid", tableName(tb))
	return names, len(names) > 0, err
}

// TestSQLiteREALs pins what SQLite does to the REALs the rules rely on:
// it keeps infinities and the smallest subnormal, and turns a negative
// zero into 0 (which is why render refuses -0).
