package apply

import (
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
)

func seamTable(name string, cols ...string) chain.Table {
	t := chain.Table{Schema: "public", Name: name, PrimaryKey: []string{"id"}}
	for _, c := range append([]string{"id"}, cols...) {
		t.Columns = append(t.Columns, chain.Column{Name: c, Type: "bigint"})
	}
	return t
}

// A table created at the end of a segment, one altered there, and a
// partition created with its parent reach the next segment only through
// its full: the seam brings each over, parents before partitions, and
// leaves the unchanged and the dropped alone.
func TestSeamChanges(t *testing.T) {
	part := seamTable("events_2026")
	part.PartitionOf, part.PartitionBound = "public.events", "FOR VALUES FROM (1) TO (10)"
	from := &chain.Schema{Tables: []chain.Table{seamTable("accounts", "balance"), seamTable("dropped"), seamTable("same", "v")}}
	to := &chain.Schema{Tables: []chain.Table{seamTable("accounts", "balance", "score"), part, seamTable("events"), seamTable("late", "v"), seamTable("same", "v")}}
	got := SeamChanges(from, to)
	var names []string
	for _, c := range got {
		if c.Op != chain.OpSchema || c.Schema == nil || c.Schema.QualifiedName() != c.Table || c.Identified {
			t.Fatalf("seam change %+v is not an unidentified schema change of its table", c)
		}
		names = append(names, c.Table)
	}
	want := []string{"public.accounts", "public.events", "public.late", "public.events_2026"}
	if len(names) != len(want) {
		t.Fatalf("seam changes %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("seam changes %v, want %v", names, want)
		}
	}
	if len(got[0].Schema.Columns) != 3 {
		t.Fatalf("accounts is brought to %d columns, want the full's 3", len(got[0].Schema.Columns))
	}
	if SeamChanges(to, to) != nil || SeamChanges(nil, to) != nil {
		t.Fatal("a seam between equal schemas, or from no schema, has changes")
	}
}
