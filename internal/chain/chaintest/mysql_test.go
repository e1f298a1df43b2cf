package chaintest

import (
	"testing"

	"github.com/sluicehq/sluice/internal/value"
)

// Every value of the MySQL fixture is in the form the contract fixes: what
// value.EncodePGText writes for what value.DecodePGText reads from it.
func TestMySQLKindsRowsAreCanonical(t *testing.T) {
	tb := MySQLKindsTable()
	rows := append(MySQLKindsRows, nil)
	rows[len(rows)-1] = make([]string, len(tb.Columns))
	for j := range tb.Columns {
		rows[len(rows)-1][j] = "\x00"
	}
	rows[len(rows)-1][9] = MySQLUint64Max
	for i, r := range rows {
		if len(r) != len(tb.Columns) {
			t.Fatalf("row %d has %d values for %d columns", i, len(r), len(tb.Columns))
		}
		for j, text := range r {
			if text == "\x00" {
				continue
			}
			c := tb.Columns[j]
			v, err := value.DecodePGText(c.NeutralKind(), []byte(text))
			if err != nil {
				t.Errorf("row %d %s: %v", i, c.Name, err)
				continue
			}
			out, err := value.EncodePGText(c.NeutralKind(), v)
			if err != nil || string(out) != text {
				t.Errorf("row %d %s: %q encodes back as %q (%v)", i, c.Name, text, out, err)
			}
		}
	}
	if !tb.Foreign() || tb.Columns[9].Name != "biu" {
		t.Fatalf("fixture shape changed: %+v", tb.Columns[9])
	}
}
