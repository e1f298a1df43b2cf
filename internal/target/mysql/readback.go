package mysql

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
// docs/mysql-target.md: what a comparison with the source (or another
// target) normalizes by kind. It reads through a prepared statement, so
// floats arrive in their binary form, exactly.
func (t *Target) ReadRows(ctx context.Context, tb *chain.Table) ([][]value.Value, error) {
	var out [][]value.Value
	err := t.scanTable(ctx, t.db, tb, " ORDER BY 1", func(row []value.Value) error {
		out = append(out, slices.Clone(row))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanTable reads every row of the table for tb on q (after the query,
// suffix: an ORDER BY, or nothing) through a prepared statement, so floats
// arrive in their binary form, exactly; it decodes each stored value by
// its column and calls fn with each row (valid only during the call).
func (t *Target) scanTable(ctx context.Context, q interface {
	PrepareContext(context.Context, string) (*sql.Stmt, error)
}, tb *chain.Table, suffix string, fn func([]value.Value) error) error {
	byName := map[string]column{}
	for _, c := range storedColumns(tb, t.flavor) {
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
	st, err := q.PrepareContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+quoteIdent(tableName(tb))+suffix)
	if err != nil {
		return classify(err, "read "+tableName(tb))
	}
	defer st.Close()
	r, err := st.QueryContext(ctx)
	if err != nil {
		return classify(err, "read "+tableName(tb))
	}
	defer r.Close()
	err = sqlkit.EachRow(r, len(names), func(i int, x any) (value.Value, error) {
		v, err := cols[i].readStored(x)
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

// readStored decodes one stored value of the column.
func (c *column) readStored(x any) (value.Value, error) {
	k := c.Kind
	switch v := x.(type) {
	case nil:
		return value.Value{Null: true}, nil
	case int64:
		switch k.Name {
		case value.Int:
			return value.Value{Int: v, Uint: uint64(v)}, nil
		case value.Bool:
			return value.Value{Bool: v != 0}, nil
		}
	case uint64:
		if k.Name == value.Int {
			return value.Value{Int: int64(v), Uint: v}, nil
		}
	case float32:
		if k.Name == value.Float {
			return value.Value{Float: float64(v)}, nil
		}
	case float64:
		if k.Name == value.Float {
			return value.Value{Float: v}, nil
		}
	case []byte:
		return c.readText(string(v))
	case string:
		return c.readText(v)
	}
	return value.Value{}, fmt.Errorf("a %T stored for kind %s", x, k.Name)
}

// readText decodes the text the server sent for a value of the column.
func (c *column) readText(s string) (value.Value, error) {
	k := c.Kind
	switch k.Name {
	case value.Bytes:
		return value.Value{Bytes: []byte(s)}, nil
	case value.Decimal:
		if c.unconstrained {
			s = dropScale(s)
		}
		return value.DecodePGText(k, []byte(s))
	case value.Timestamp, value.TimestampTZ:
		ts := k
		ts.Name = value.Timestamp
		return portable.ParseText(ts, s)
	case value.Time:
		if k.Zoned {
			return portable.ParseText(k, s)
		}
		us, err := portable.ParseClock(s)
		return value.Value{Micros: us}, err
	case value.UUID:
		return value.Value{Text: strings.ToLower(s)}, nil
	case value.Text, value.Enum, value.Other, value.JSON:
		return value.Value{Text: s}, nil
	}
	return portable.ParseText(k, s)
}

// dropScale removes a decimal text's trailing fraction zeros (and a point
// left bare): what DECIMAL(65,30) keeps of an unconstrained numeric.
func dropScale(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

var (
	_ readback.ColumnReader = (*snapshot)(nil)
	_ readback.Normaliser   = (*snapshot)(nil)
)

// Columns lists the stored columns of the target's table for tb, in the
// table's order (generated ones left out).
func (s *snapshot) Columns(ctx context.Context, tb *chain.Table) ([]string, bool, error) {
	names, err := sqlkit.Strings(ctx, s.conn, classify, "list the columns of "+tableName(tb), `SELECT COLUMN_NAME FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COALESCE(GENERATION_EXPRESSION, '') = ''
		ORDER BY ORDINAL_POSITION`, tableName(tb))
	return names, len(names) > 0, err
}

// Normalisers gives an unconstrained decimal column (stored as
// DECIMAL(65,30), docs/mysql-target.md) a function dropping its display
// scale, which that type does not keep; every other column reads back
// exactly.
func (s *snapshot) Normalisers(tb *chain.Table) []func(value.Value) value.Value {
	byName := map[string]column{}
	for _, c := range storedColumns(tb, s.t.flavor) {
		byName[c.name] = c
	}
	out := make([]func(value.Value) value.Value, len(tb.Columns))
	for i, c := range tb.Columns {
		if byName[c.Name].unconstrained {
			out[i] = func(v value.Value) value.Value {
				if !v.Null {
					v.Text = dropScale(v.Text)
				}
				return v
			}
		}
	}
	return out
}
