package mysql

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/target/targettest"
	"github.com/sluicehq/sluice/internal/value"
)

// MariaDB passes the target conformance suite.
func TestConformance(t *testing.T) {
	targettest.Run(t, targettest.Harness{
		New: func(t *testing.T) target.Target { return openTarget(t) },
		Pwned: func(t *testing.T, tgt target.Target) bool {
			var n int
			if err := tgt.(*Target).DB().QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE '%pwned%'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		},
		Read: func(t *testing.T, tgt target.Target, tb *chain.Table) [][]value.Value {
			t.Helper()
			rows, err := tgt.(*Target).ReadRows(context.Background(), tb)
			if err != nil {
				t.Fatal(err)
			}
			return rows
		},
		Refusal: refusedHere,
	})
}

// refusedHere is what the mapping refuses of the suite's special values:
// NaN and the infinities of decimals and floats, negative zero, and the
// dates and timestamps MySQL has no year for.
func refusedHere(k value.Kind, text string) errcode.Code {
	lower := strings.ToLower(text)
	switch k.Name {
	case value.Decimal, value.Float:
		if lower == "nan" || strings.HasSuffix(lower, "infinity") || text == "-0" {
			return errcode.TargetValueRefused
		}
	case value.Date, value.Timestamp, value.TimestampTZ:
		if strings.HasSuffix(lower, "infinity") || strings.HasSuffix(text, " BC") {
			return errcode.TargetValueRefused
		}
	}
	return ""
}
