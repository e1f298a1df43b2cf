package target

import (
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
)

// A foreign key recorded from a MySQL-family source names its table with
// back-quotes: it stays when that table is taken and goes when it is not.
func TestSubsetSchemaReadsBackQuotedForeignKeys(t *testing.T) {
	schema := &chain.Schema{Tables: []chain.Table{
		{Schema: "shop", Name: "customers"},
		{Schema: "shop", Name: "orders", Constraints: []chain.Constraint{
			{Name: "orders_customer_fk", Type: "f", Definition: "FOREIGN KEY (`customer_id`) REFERENCES `shop`.`customers` (`id`)"},
		}},
		{Schema: "shop", Name: "audit"},
	}}
	for _, tc := range []struct {
		exclude string
		keep    int
	}{{"shop.audit", 1}, {"shop.customers", 0}} {
		sel, err := Subset{ExcludeTables: []string{tc.exclude}}.Select(schema)
		if err != nil {
			t.Fatal(err)
		}
		out, left := sel.Schema(schema)
		if len(left) != 1 || left[0] != tc.exclude {
			t.Fatalf("left out %v, want %s", left, tc.exclude)
		}
		for _, tb := range out.Tables {
			if tb.Name == "orders" && len(tb.Constraints) != tc.keep {
				t.Errorf("excluding %s: orders keeps %d foreign keys, want %d", tc.exclude, len(tb.Constraints), tc.keep)
			}
		}
	}
}
