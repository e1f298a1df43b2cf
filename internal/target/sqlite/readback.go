package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
	"github.com/sluicehq/sluice/internal/value"
	"github.com/sluicehq/sluice/internal/value/portable"
)

// ReadRows reads a restored table back as neutral values, ordered by its
// first column, decoding each stored value by the rules of
// docs/sqlite-target.md: what a comparison with the source (or another
// target) normalizes by kind.
func (t *Target) ReadRows(ctx context.Context, tb *chain.Table) ([][]value.Value, error) {
	names := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		names[i] = quoteIdent(c.Name)
	}
	r, err := t.db.QueryContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+quoteIdent(tableName(tb))+" ORDER BY 1")
	if err != nil {
		return nil, classify(err, "read "+tableName(tb))
	}
	defer r.Close()
	out, err := sqlkit.ScanValues(r, len(names), func(i int, x any) (value.Value, error) {
		v, err := readStored(kindOf(tb.Columns[i]), x)
		if err != nil {
			return v, fmt.Errorf("read %s.%s = %#v: %w", tb.Name, tb.Columns[i].Name, x, err)
		}
		return v, nil
	})
	if err != nil {
		return nil, classify(err, "read "+tableName(tb))
	}
	return out, nil
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

// TestSQLiteREALs pins what SQLite does to the REALs the rules rely on:
// it keeps infinities and the smallest subnormal, and turns a negative
// zero into 0 (which is why render refuses -0).
