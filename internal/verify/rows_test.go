package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

// shaped is a fake target snapshot that also lists its tables' columns
// and normalises values as a target with storage rules would.
type shaped struct {
	fake
	columns map[string][]string
	norm    func(tb *chain.Table) []func(value.Value) value.Value
	scans   int
}

func (s *shaped) Columns(_ context.Context, tb *chain.Table) ([]string, bool, error) {
	c, ok := s.columns[tb.QualifiedName()]
	return c, ok, nil
}

func (s *shaped) Normalisers(tb *chain.Table) []func(value.Value) value.Value {
	if s.norm == nil {
		return nil
	}
	return s.norm(tb)
}

func (s *shaped) Scan(ctx context.Context, tb *chain.Table, fn func([]value.Value) error) error {
	s.scans++
	return s.fake.Scan(ctx, tb, fn)
}

func keyed(name string) chain.Table {
	tb := table(name)
	tb.PrimaryKey = []string{"id"}
	return tb
}

func rowsOf(n int, v func(i int) string) [][]value.Value {
	out := make([][]value.Value, n)
	for i := range out {
		out[i] = row(int64(i), v(i))
	}
	return out
}

func TestRowsDepthNamesEachDifferingRow(t *testing.T) {
	const n = 20000 // past one segment's leaf size, so narrowing takes passes
	same := func(i int) string { return fmt.Sprintf("v%d", i) }
	srcRows := rowsOf(n, same)
	dstRows := rowsOf(n, same)
	dstRows[4242] = row(4242, "changed")
	dstRows[77] = row(77, "NULL")
	dstRows = append(dstRows[:9000], dstRows[9001:]...) // 9000 missing
	dstRows = append(dstRows, row(n+5, "new"))          // an extra one
	schema := &chain.Schema{Tables: []chain.Table{keyed("big"), table("bag"), keyed("same")}}
	src := &fake{schema: schema, tables: map[string][][]value.Value{
		"public.big":  srcRows,
		"public.bag":  {row(1, "dup"), row(1, "dup"), row(2, "once"), row(3, "gone")},
		"public.same": rowsOf(3000, same),
	}}
	dst := &shaped{fake: fake{tables: map[string][][]value.Value{
		"public.big":  dstRows,
		"public.bag":  {row(1, "dup"), row(1, "dup"), row(1, "dup"), row(2, "once")},
		"public.same": rowsOf(3000, same),
	}}}
	rep, err := Compare(context.Background(), src, dst, Options{Depth: DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Table{}
	for _, tb := range rep.Tables {
		byName[tb.Name] = tb
	}
	big := byName["public.big"]
	var got []string
	for _, d := range big.Rows {
		got = append(got, FormatRow(big, d))
	}
	want := []string{
		`changed  id="4242": v source "v4242", target "changed"`,
		`changed  id="77": v source "v77", target NULL`,
		`missing  id="9000": on the source only (id="9000", v="v9000")`,
		`extra    id="20005": on the target only (id="20005", v="new")`,
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(got, "\n"), w) {
			t.Errorf("big: want %s among\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(big.Rows) != 4 || big.MoreRows || big.Status != StatusChecksum || big.Code != string(errcode.VerifyMismatch) {
		t.Fatalf("big: %d rows, more %v, status %s, code %s", len(big.Rows), big.MoreRows, big.Status, big.Code)
	}
	if strings.Join(big.Key, ",") != "id" || !strings.Contains(big.Detail, "4 differing row(s)") {
		t.Fatalf("big: key %v, detail %s", big.Key, big.Detail)
	}
	// A keyless table is a multiset: a row once more on the target, one
	// missing there.
	bag := byName["public.bag"]
	got = nil
	for _, d := range bag.Rows {
		got = append(got, FormatRow(bag, d))
	}
	if len(got) != 2 || !strings.Contains(strings.Join(got, "\n"), `extra    (id="1", v="dup"): source holds 2, target 3`) ||
		!strings.Contains(strings.Join(got, "\n"), `missing  (id="3", v="gone"): source holds 1, target 0`) {
		t.Fatalf("bag:\n%s", strings.Join(got, "\n"))
	}
	if s := byName["public.same"]; s.Status != StatusEqual || len(s.Rows) != 0 || s.SourceChecksum == "" || s.SourceChecksum != s.TargetChecksum {
		t.Fatalf("same: %+v", s)
	}
	// An equal table is read once a side; the big one a few times, never
	// held whole (passes: digests by segment, then the differing ones).
	if dst.scans > 3+3+1 {
		t.Fatalf("%d scans of the target", dst.scans)
	}

	// --max-rows bounds what is named, and says more may differ.
	rep, err = Compare(context.Background(), src, dst, Options{Depth: DepthRows, MaxRows: 2, Filter: Filter{Include: []string{"big"}}})
	if err != nil {
		t.Fatal(err)
	}
	if b := rep.Tables[0]; len(b.Rows) != 2 || !b.MoreRows || !strings.Contains(b.Detail, "raise --max-rows") {
		t.Fatalf("max rows 2: %d rows, more %v, %s", len(b.Rows), b.MoreRows, b.Detail)
	}
}

func TestRowsDepthManyDifferences(t *testing.T) {
	// Every row differs: the named ones stop at the bound.
	schema := &chain.Schema{Tables: []chain.Table{keyed("all")}}
	src := &fake{schema: schema, tables: map[string][][]value.Value{"public.all": rowsOf(5000, func(i int) string { return "a" })}}
	dst := &fake{tables: map[string][][]value.Value{"public.all": rowsOf(5000, func(i int) string { return "b" })}}
	rep, err := Compare(context.Background(), src, dst, Options{Depth: DepthRows, MaxRows: 50})
	if err != nil {
		t.Fatal(err)
	}
	if tb := rep.Tables[0]; len(tb.Rows) != 50 || !tb.MoreRows || tb.Rows[0].Kind != RowChanged {
		t.Fatalf("%d rows, more %v", len(tb.Rows), tb.MoreRows)
	}
}

func TestTargetNormalisersAgreeWithItsRules(t *testing.T) {
	// A target that keeps a decimal's value but not its display scale
	// (MySQL's DECIMAL(65,30) for an unconstrained numeric).
	dec := chain.Table{Schema: "public", Name: "d", PrimaryKey: []string{"id"}, Columns: []chain.Column{
		{Name: "id", Type: "integer", TypeOID: 23}, {Name: "n", Type: "numeric", TypeOID: 1700}}}
	drop := func(tb *chain.Table) []func(value.Value) value.Value {
		return []func(value.Value) value.Value{nil, func(v value.Value) value.Value {
			if !v.Null && strings.Contains(v.Text, ".") {
				v.Text = strings.TrimSuffix(strings.TrimRight(v.Text, "0"), ".")
			}
			return v
		}}
	}
	num := func(id int64, n string) []value.Value { return []value.Value{{Int: id}, {Text: n}} }
	schema := &chain.Schema{Tables: []chain.Table{dec}}
	src := &fake{schema: schema, tables: map[string][][]value.Value{"public.d": {num(1, "1.50"), num(2, "2"), num(3, "0.10")}}}
	for _, depth := range []Depth{DepthChecksum, DepthRows} {
		dst := &shaped{fake: fake{tables: map[string][][]value.Value{"public.d": {num(1, "1.5"), num(2, "2"), num(3, "0.1")}}}, norm: drop}
		rep, err := Compare(context.Background(), src, dst, Options{Depth: depth})
		if err != nil || !rep.Equal() {
			t.Fatalf("%s: the value the rule kept differs: %+v, %v", depth, rep, err)
		}
		dst.tables["public.d"][0] = num(1, "1.51")
		rep, err = Compare(context.Background(), src, dst, Options{Depth: depth})
		if err != nil || rep.Equal() {
			t.Fatalf("%s: 1.50 against 1.51 compares equal: %+v, %v", depth, rep, err)
		}
	}
}

func TestColumnsDifferIsADifference(t *testing.T) {
	tb := keyed("t")
	gen := tb
	gen.Name = "g"
	gen.Columns = append(append([]chain.Column(nil), tb.Columns...), chain.Column{Name: "twice", Type: "integer", TypeOID: 23, Generated: "id * 2"})
	schema := &chain.Schema{Tables: []chain.Table{tb, gen, keyed("u")}}
	src := &fake{schema: schema, tables: map[string][][]value.Value{"public.t": {row(1, "a")}, "public.g": {row(1, "a")}, "public.u": {row(1, "a")}}}
	dst := &shaped{
		fake: fake{tables: map[string][][]value.Value{"public.t": {row(1, "a")}, "public.g": {row(1, "a")}, "public.u": {row(1, "a")}}},
		columns: map[string][]string{
			"public.t": {"id"},             // lacks v
			"public.g": {"id", "v"},        // the generated column is not compared
			"public.u": {"id", "v", "new"}, // one the source has not
		},
	}
	for _, depth := range Depths {
		rep, err := Compare(context.Background(), src, dst, Options{Depth: depth})
		if err != nil {
			t.Fatalf("%s: %v", depth, err)
		}
		got := map[string]string{}
		for _, x := range rep.Tables {
			got[x.Name] = x.Status + " " + x.Code + " " + strings.Join(x.MissingColumns, ",") + "/" + strings.Join(x.ExtraColumns, ",")
		}
		want := map[string]string{
			"public.t": "columns SLUICE-E-VERIFY-COLUMNS-DIFFER v/",
			"public.g": "equal  /",
			"public.u": "columns SLUICE-E-VERIFY-COLUMNS-DIFFER /new",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %v", depth, got)
		}
		err = Outcome{Report: rep}.Mismatch()
		if c, ok := errors.AsType[*errcode.Error](err); !ok || c.Code != errcode.VerifyColumnsDiffer || !strings.Contains(err.Error(), "lacks column(s) v") {
			t.Fatalf("%s: %v", depth, err)
		}
	}
}
