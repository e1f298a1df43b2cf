package sqlite

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/target/targettest"
	"github.com/sluicehq/sluice/internal/value"
)

func TestConformance(t *testing.T) {
	targettest.Run(t, targettest.Harness{
		New: func(t *testing.T) target.Target { return openTarget(t) },
		Pwned: func(t *testing.T, tgt target.Target) bool {
			var n int
			if err := tgt.(*Target).DB().QueryRow(`SELECT count(*) FROM sqlite_master WHERE name LIKE '%pwned%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		},
		Read: func(t *testing.T, tgt target.Target, tb *chain.Table) [][]value.Value {
			rows, err := tgt.(*Target).ReadRows(context.Background(), tb)
			if err != nil {
				t.Fatal(err)
			}
			return rows
		},
		Refusal: func(k value.Kind, text string) errcode.Code {
			if k.Name == value.Float && (strings.EqualFold(text, "NaN") || text == "-0") {
				return errcode.TargetValueRefused
			}
			if k.Name == value.Int && k.Unsigned {
				// An unsigned value beyond INTEGER's signed 64 bits.
				if n, err := strconv.ParseUint(text, 10, 64); err == nil && n > math.MaxInt64 {
					return errcode.TargetValueRefused
				}
			}
			return ""
		},
	})
}

func TestSQLiteREALs(t *testing.T) {
	tg := openTarget(t)
	exec(t, tg, `CREATE TABLE f (x REAL)`)
	for _, c := range []struct{ in, want float64 }{
		{math.Inf(1), math.Inf(1)}, {math.Inf(-1), math.Inf(-1)}, {5e-324, 5e-324}, {math.Copysign(0, -1), 0},
	} {
		exec(t, tg, `DELETE FROM f`)
		if _, err := tg.db.Exec(`INSERT INTO f VALUES (?)`, c.in); err != nil {
			t.Fatal(err)
		}
		var got float64
		if err := tg.db.QueryRow(`SELECT x FROM f`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want || math.Signbit(got) != math.Signbit(c.want) {
			t.Errorf("%v reads back as %v, want %v", c.in, got, c.want)
		}
	}
}
