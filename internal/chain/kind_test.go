package chain

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/value"
)

func arrayKind(elem value.Kind) value.Kind { return value.Kind{Name: value.Array, Elem: &elem} }

// The frozen v1 chain records no kinds; every one of its columns gets one
// on read, and every value of its rows decodes by it.
func TestFrozenFixturesV1Kinds(t *testing.T) {
	ctx := context.Background()
	c := Open(loadFixtureStore(t, fixtureDir))
	cat, err := c.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	full, err := c.GetManifest(ctx, cat.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range full.Schema.Tables[0].Columns {
		if col.Kind != nil {
			t.Fatalf("column %s of a v1 chain has a recorded kind", col.Name)
		}
		if k := col.NeutralKind(); k.Name == "" {
			t.Errorf("column %s (%s) derives no kind", col.Name, col.Type)
		}
	}
	id := full.ID
	schema := full.Schema
	schema.FillKinds()
	want := map[string]value.Kind{
		"id":      {Name: value.Int, Width: 64},
		"name":    {Name: value.Text},
		"amount":  {Name: value.Decimal, Precision: 20, Scale: 4, Special: true},
		"ratio":   {Name: value.Float, Width: 64},
		"at":      {Name: value.TimestampTZ},
		"born":    {Name: value.Date},
		"payload": {Name: value.Bytes},
		"active":  {Name: value.Bool},
		"doc":     {Name: value.JSON},
		"tags":    arrayKind(value.Kind{Name: value.Int, Width: 32}),
		"uid":     {Name: value.UUID},
		"span":    {Name: value.Interval},
		"mood":    {Name: value.Enum, Labels: []string{"sad", "ok", "happy"}},
		"spot":    {Name: value.Other},
	}
	cols := schema.Tables[0].Columns
	for _, col := range cols {
		if col.Kind == nil {
			t.Errorf("column %s has no kind after FillKinds", col.Name)
			continue
		}
		if !reflect.DeepEqual(*col.Kind, want[col.Name]) {
			t.Errorf("column %s (%s): kind %s %+v, want %s", col.Name, col.Type, col.Kind, *col.Kind, want[col.Name])
		}
	}
	// Filling kinds changes the content the ID covers: it is done on read,
	// never to a stored manifest.
	if got, err := ComputeID(full); err != nil || got == id {
		t.Errorf("a schema with kinds hashes to %s (%v), like the stored one", got, err)
	}

	for _, ref := range full.Tables[0].Chunks {
		h, body, err := c.ReadChunk(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		it := NewTupleIter(body, h.Columns)
		for row := 0; it.Next(); row++ {
			for i, v := range it.Values() {
				if v == nil {
					continue
				}
				col := cols[i]
				var err error
				if col.Encoding == EncodingText {
					_, err = value.DecodePGText(*col.Kind, v)
				} else {
					_, err = value.DecodePGBinary(*col.Kind, col.TypeOID, v)
				}
				if err != nil {
					t.Errorf("chunk %s row %d column %s: %v", ref.Key, row, col.Name, err)
				}
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFillKinds(t *testing.T) {
	recorded := value.Kind{Name: value.Text}
	s := &Schema{
		Tables: []Table{{Schema: "app", Name: "t", Columns: []Column{
			{Name: "explicit", Type: "integer", TypeOID: 23, Kind: &recorded},
			{Name: "moods", Type: "public.mood[]", TypeOID: 16400},
			{Name: "quoted", Type: `"My Schema"."Mood ""X"""`, TypeOID: 16410},
			{Name: "domain", Type: "public.posint", TypeOID: 16420},
			{Name: "domains", Type: "public.posint[]", TypeOID: 16421},
			{Name: "n", Type: "numeric(10,2)", TypeOID: 1700},
		}}},
		Enums: []Enum{
			{Schema: "public", Name: "mood", Labels: []string{"sad", "ok", "happy"}},
			{Schema: "My Schema", Name: `Mood "X"`, Labels: []string{"a"}},
		},
		Types: []UserType{{Schema: "public", Name: "posint", Kind: TypeDomain, Definition: "CREATE DOMAIN public.posint AS integer CHECK (VALUE > 0)"}},
	}
	s.FillKinds()
	cols := s.Tables[0].Columns
	if cols[0].Kind != &recorded || cols[0].NeutralKind().Name != value.Text {
		t.Errorf("a column with a kind lost it: %v", cols[0].Kind)
	}
	want := []value.Kind{
		recorded,
		arrayKind(value.Kind{Name: value.Enum, Labels: []string{"sad", "ok", "happy"}}),
		{Name: value.Enum, Labels: []string{"a"}},
		{Name: value.Other},
		arrayKind(value.Kind{Name: value.Other}),
		{Name: value.Decimal, Precision: 10, Scale: 2, Special: true},
	}
	for i, col := range cols {
		if col.Kind == nil || !reflect.DeepEqual(*col.Kind, want[i]) {
			t.Errorf("column %s: kind %v, want %s", col.Name, col.Kind, want[i])
		}
	}
	// The labels are the column's own, not the schema's slice.
	cols[1].Kind.Elem.Labels[0] = "changed"
	if s.Enums[0].Labels[0] != "sad" {
		t.Error("a column's labels alias the schema's enum")
	}
}

// A column without a kind encodes exactly as before the field existed, so
// stored manifests keep their IDs; one with a kind records it.
func TestColumnKindJSON(t *testing.T) {
	b, err := json.Marshal(Column{Name: "a", Type: "integer", TypeOID: 23, Encoding: EncodingBinary})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"name":"a","type":"integer","type_oid":23,"encoding":"binary"}` {
		t.Errorf("column without kind encodes as %s", b)
	}
	k := value.Kind{Name: value.Decimal, Precision: 40, Scale: 20, Special: true}
	b, err = json.Marshal(Column{Name: "a", Type: "numeric(40,20)", TypeOID: 1700, Encoding: EncodingBinary, Kind: &k})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(b), `"kind":{"name":"decimal","precision":40,"scale":20,"special":true}}`) {
		t.Errorf("column with kind encodes as %s", b)
	}
	var back Column
	if err := strictUnmarshal(b, &back); err != nil || back.Kind == nil || !reflect.DeepEqual(*back.Kind, k) {
		t.Errorf("read back %+v, %v", back, err)
	}
}

func TestSplitQualified(t *testing.T) {
	cases := []struct {
		in, schema, name string
		ok               bool
	}{
		{"public.mood", "public", "mood", true},
		{`"My Schema"."a.b"`, "My Schema", "a.b", true},
		{`s."say ""hi"""`, "s", `say "hi"`, true},
		{"mood", "", "", false},
		{"a.b.c", "", "", false},
		{`"open.x`, "", "", false},
		{".x", "", "", false},
	}
	for _, c := range cases {
		s, n, ok := splitQualified(c.in)
		if s != c.schema || n != c.name || ok != c.ok {
			t.Errorf("splitQualified(%q) = %q, %q, %v", c.in, s, n, ok)
		}
	}
}
