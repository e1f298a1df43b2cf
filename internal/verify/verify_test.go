package verify

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/value"
)

var intText = []value.Kind{{Name: value.Int, Width: 32}, {Name: value.Text}}

func row(id int64, v string) []value.Value {
	if v == "NULL" {
		return []value.Value{{Int: id}, {Null: true}}
	}
	return []value.Value{{Int: id}, {Text: v}}
}

func digestOf(rows ...[]value.Value) *Digest {
	var d Digest
	for _, r := range rows {
		d.Add(intText, r)
	}
	return &d
}

func TestDigestIsOrderIndependentAndCountsDuplicates(t *testing.T) {
	a := digestOf(row(1, "a"), row(2, "b"), row(3, "NULL"))
	b := digestOf(row(3, "NULL"), row(1, "a"), row(2, "b"))
	if !a.Equal(b) || a.Sum() != b.Sum() {
		t.Fatal("the same rows in another order digest differently")
	}
	// A row twice is not the same as once, nor as not at all (as XOR
	// would have it).
	once, twice, thrice := digestOf(row(1, "a")), digestOf(row(1, "a"), row(1, "a")), digestOf(row(1, "a"), row(1, "a"), row(1, "a"))
	if once.Sum() == twice.Sum() || digestOf().Sum() == twice.Sum() || once.Sum() == thrice.Sum() {
		t.Fatal("a duplicated row cancels out")
	}
	// NULL, the empty string and the text "NULL" are three values.
	if digestOf(row(1, "NULL")).Sum() == digestOf(row(1, "")).Sum() ||
		digestOf([]value.Value{{Int: 1}, {Text: "NULL"}}).Sum() == digestOf(row(1, "NULL")).Sum() {
		t.Fatal("NULL digests like a string")
	}
	// Values are framed: ("ab", "c") is not ("a", "bc").
	k := []value.Kind{{Name: value.Text}, {Name: value.Text}}
	var x, y Digest
	x.Add(k, []value.Value{{Text: "ab"}, {Text: "c"}})
	y.Add(k, []value.Value{{Text: "a"}, {Text: "bc"}})
	if x.Sum() == y.Sum() {
		t.Fatal("values run into each other")
	}
}

func TestDigestNormalisesByKind(t *testing.T) {
	// A timestamp read from two engines as the same instant digests alike.
	k := []value.Kind{{Name: value.TimestampTZ}}
	at := time.Date(2026, 2, 28, 23, 59, 59, 999999000, time.UTC)
	var a, b Digest
	a.Add(k, []value.Value{{Time: at}})
	b.Add(k, []value.Value{{Time: at.In(time.FixedZone("x", 5*3600))}})
	if a.Sum() != b.Sum() {
		t.Fatal("the same instant digests differently")
	}
	b.Add(k, []value.Value{{Time: at}})
	a.Add(k, []value.Value{{Time: at.Add(time.Microsecond)}})
	if a.Sum() == b.Sum() {
		t.Fatal("different instants digest alike")
	}
}

// fake is a snapshot of tables held in memory (our own interface, not a
// database's).
type fake struct {
	schema *chain.Schema
	tables map[string][][]value.Value
}

func (f *fake) Schema(context.Context) (*chain.Schema, error) { return f.schema, nil }

func (f *fake) Count(_ context.Context, tb *chain.Table) (int64, bool, error) {
	r, ok := f.tables[tb.QualifiedName()]
	return int64(len(r)), ok, nil
}

func (f *fake) Scan(_ context.Context, tb *chain.Table, fn func([]value.Value) error) error {
	for _, r := range f.tables[tb.QualifiedName()] {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (f *fake) Close(context.Context) error { return nil }

func table(name string) chain.Table {
	return chain.Table{Schema: "public", Name: name, Columns: []chain.Column{
		{Name: "id", Type: "integer", TypeOID: 23}, {Name: "v", Type: "text", TypeOID: 25}}}
}

func TestCompareNamesEachDifference(t *testing.T) {
	schema := &chain.Schema{Tables: []chain.Table{table("same"), table("changed"), table("missing_row"), table("dup"), table("gone"), table("other")}}
	parent := table("parted")
	parent.PartitionKey = "RANGE (id)"
	schema.Tables = append(schema.Tables, parent)
	src := &fake{schema: schema, tables: map[string][][]value.Value{
		"public.same":        {row(1, "a"), row(2, "b")},
		"public.changed":     {row(1, "a"), row(2, "b")},
		"public.missing_row": {row(1, "a"), row(2, "b")},
		"public.dup":         {row(1, "a"), row(1, "a")},
		"public.gone":        {row(1, "a")},
		"public.other":       {row(1, "a")},
	}}
	dst := &fake{tables: map[string][][]value.Value{
		"public.same":        {row(2, "b"), row(1, "a")},
		"public.changed":     {row(1, "a"), row(2, "B")},
		"public.missing_row": {row(1, "a")},
		"public.dup":         {row(1, "a"), row(1, "a"), row(1, "a")},
		"public.other":       {row(1, "a")},
	}}
	rep, err := Compare(context.Background(), src, dst, Options{Depth: DepthChecksum, Filter: Filter{Exclude: []string{"oth*"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tb := range rep.Tables {
		got[tb.Name] = tb.Status
	}
	want := map[string]string{"public.same": StatusEqual, "public.changed": StatusChecksum, "public.missing_row": StatusCount,
		"public.dup": StatusCount, "public.gone": StatusMissing}
	if fmt.Sprint(got) != fmt.Sprint(want) || rep.Differences != 4 || rep.Equal() {
		t.Fatalf("statuses %v, differences %d; want %v", got, rep.Differences, want)
	}
	if strings.Join(rep.Skipped, ",") != "public.other,public.parted" {
		t.Fatalf("skipped %v", rep.Skipped)
	}

	// At count depth only counts and presence are compared.
	rep, err = Compare(context.Background(), src, dst, Options{Depth: DepthCount, Filter: Filter{Include: []string{"public.same", "changed"}}})
	if err != nil || rep.Differences != 0 || len(rep.Tables) != 2 || rep.Tables[0].SourceChecksum != "" {
		t.Fatalf("count depth: %+v, %v", rep, err)
	}
}

func TestFilter(t *testing.T) {
	tb := table("orders")
	tb.Schema = "shop"
	for _, c := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{Include: []string{"orders"}}, true},
		{Filter{Include: []string{"public.orders"}}, false},
		{Filter{Include: []string{"shop.*"}}, true},
		{Filter{Exclude: []string{"ord*"}}, false},
		{Filter{Include: []string{"shop.*"}, Exclude: []string{"shop.orders"}}, false},
	} {
		if got := c.f.Match(&tb); got != c.want {
			t.Errorf("%+v matches shop.orders: %v, want %v", c.f, got, c.want)
		}
	}
	if (Filter{Include: []string{"["}}).Validate() == nil {
		t.Error("a malformed pattern validates")
	}
}
