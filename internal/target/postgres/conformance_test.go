package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/target/targettest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/value"
)

// PostgreSQL passes the target conformance suite.
func TestConformance(t *testing.T) {
	targettest.Run(t, targettest.Harness{
		New: func(t *testing.T) target.Target {
			db := testenv.CreateDB(t, "conform")
			tgt, err := Open(context.Background(), testenv.DSN(db))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tgt.Close(context.Background()) })
			return tgt
		},
		Pwned: func(t *testing.T, tgt target.Target) bool {
			var n int
			if err := tgt.(*Target).Conn().QueryRow(context.Background(), `SELECT count(*) FROM pg_class WHERE relname LIKE '%pwned%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		},
		Read: func(t *testing.T, tgt target.Target, tb *chain.Table) [][]value.Value {
			t.Helper()
			conn := tgt.(*Target).Conn()
			cols := make([]string, len(tb.Columns))
			for i, c := range tb.Columns {
				cols[i] = ident(c.Name) + "::text"
			}
			rows, err := conn.Query(context.Background(), "SELECT "+strings.Join(cols, ", ")+" FROM "+ident(tb.Schema, tb.Name)+" ORDER BY 1, 2")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out [][]value.Value
			for rows.Next() {
				texts := make([]*string, len(cols))
				dest := make([]any, len(cols))
				for i := range texts {
					dest[i] = &texts[i]
				}
				if err := rows.Scan(dest...); err != nil {
					t.Fatal(err)
				}
				row := make([]value.Value, len(cols))
				for i, s := range texts {
					if s == nil {
						row[i] = value.Value{Null: true}
						continue
					}
					c := tb.Columns[i]
					v, err := value.DecodePGText(value.FromPostgres(c.Type, c.TypeOID), []byte(*s))
					if err != nil {
						t.Fatalf("%s.%s = %q: %v", tb.Name, c.Name, *s, err)
					}
					row[i] = v
				}
				out = append(out, row)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		},
		// PostgreSQL holds every value a PostgreSQL source records.
		Refusal: func(value.Kind, string) errcode.Code { return "" },
	})
}
