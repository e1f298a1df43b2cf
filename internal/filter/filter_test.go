package filter

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

const testKey = "0123456789abcdef0123456789abcdef"

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func wantCode(t *testing.T, err error, code errcode.Code) {
	t.Helper()
	e, ok := errcode.As(err)
	if !ok || e.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

func TestTablesMatch(t *testing.T) {
	cases := []struct {
		include, exclude []string
		table            string
		want             bool
	}{
		{nil, nil, "public.orders", true},
		{[]string{"public.orders"}, nil, "public.orders", true},
		{[]string{"public.orders"}, nil, "public.order_lines", false},
		{[]string{"public.order*"}, nil, "public.order_lines", true},
		{[]string{"*.orders"}, nil, "sales.orders", true},
		{[]string{"orders"}, nil, "sales.orders", true},
		{[]string{"orders"}, nil, "sales.orders2", false},
		{[]string{"public.*"}, []string{"public.audit*"}, "public.audit_log", false},
		{[]string{"public.*"}, []string{"public.audit*"}, "public.accounts", true},
		{nil, []string{"audit*"}, "app.audit_log", false},
		{nil, []string{"audit*"}, "app.accounts", true},
		// '*' never crosses the dot.
		{[]string{"pub*"}, nil, "public.orders", false},
		{[]string{"app.t?"}, nil, "app.t1", true},
		{[]string{"app.t[0-4]"}, nil, "app.t5", false},
	}
	for _, c := range cases {
		tb, err := NewTables(c.include, c.exclude)
		if err != nil {
			t.Fatal(err)
		}
		if got := tb.MatchQualified(c.table); got != c.want {
			t.Errorf("include %v exclude %v: %s matched %v, want %v", c.include, c.exclude, c.table, got, c.want)
		}
	}
}

func TestInvalidSpecsAreRefused(t *testing.T) {
	for _, s := range []Spec{
		{IncludeTables: []string{"a.b.c"}},
		{IncludeTables: []string{""}},
		{ExcludeTables: []string{"app.[x"}},
		{ExcludeColumns: []string{"app.t"}},
		{Masks: []string{"app.t.c"}},
		{Masks: []string{"app.t.c=rot13"}},
		{Masks: []string{"app.t.c=truncate:x"}},
		{Masks: []string{"app.t.c=fixed"}},
		{Masks: []string{"app.t.c=null", "app.t.c=hash"}, MaskKeyEnv: "K"},
		{ExcludeColumns: []string{"app.t.c"}, Masks: []string{"app.t.c=null"}},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v was accepted", s)
		} else {
			wantCode(t, err, errcode.FilterInvalid)
		}
	}
	wantCode(t, Spec{Masks: []string{"app.t.c=hash"}}.Validate(), errcode.MaskKeyMissing)
	_, err := Compile(Spec{Masks: []string{"app.t.c=hash"}, MaskKeyEnv: "K"}, env(nil))
	wantCode(t, err, errcode.MaskKeyMissing)
	_, err = Compile(Spec{Masks: []string{"app.t.c=hash"}, MaskKeyEnv: "K"}, env(map[string]string{"K": "short"}))
	wantCode(t, err, errcode.MaskKeyMissing)
	if f, err := Compile(Spec{}, env(nil)); f != nil || err != nil {
		t.Fatalf("zero spec: %v %v", f, err)
	}
}

func textKind() *value.Kind { return &value.Kind{Name: value.Text} }
func intKind() *value.Kind  { return &value.Kind{Name: value.Int, Width: 64} }
func col(name, typ string, k *value.Kind, notNull bool) chain.Column {
	return chain.Column{Name: name, Type: typ, Kind: k, NotNull: notNull, Encoding: chain.EncodingBinary}
}

func usersTable() chain.Table {
	return chain.Table{
		Schema: "app", Name: "users",
		Columns: []chain.Column{
			col("id", "bigint", intKind(), true),
			col("email", "text", textKind(), true),
			col("name", "character varying(200)", textKind(), false),
			col("card", "text", textKind(), false),
			col("notes", "text", textKind(), false),
			col("code", "character varying(10)", textKind(), false),
			col("age", "integer", intKind(), false),
		},
		PrimaryKey: []string{"id"},
		Indexes:    []chain.Index{{Name: "users_email_key", Columns: []string{"email"}, Unique: true}, {Name: "users_notes_idx", Columns: []string{"notes"}}},
		Constraints: []chain.Constraint{
			{Name: "age_ok", Type: "c", Definition: "CHECK ((age >= 0))"},
		},
	}
}

func TestShapeExcludesAndMasks(t *testing.T) {
	f, err := Compile(Spec{
		ExcludeColumns: []string{"app.users.notes"},
		Masks:          []string{"app.users.email=email", "app.users.name=hash", "app.users.card=keep-last:4", "app.users.code=truncate:2"},
		MaskKeyEnv:     "K",
	}, env(map[string]string{"K": testKey}))
	if err != nil {
		t.Fatal(err)
	}
	tb := usersTable()
	sh, err := f.Shape(&tb, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range sh.Table.Columns {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "id,email,name,card,code,age" {
		t.Fatalf("recorded columns %s", got)
	}
	if len(sh.Table.Indexes) != 1 || sh.Table.Indexes[0].Name != "users_email_key" {
		t.Fatalf("the index on the excluded column was kept: %+v", sh.Table.Indexes)
	}
	txt := func(s string) chain.Value { return chain.Value{Kind: chain.ValueText, Data: []byte(s)} }
	row := []chain.Value{txt("7"), txt("Zoë.Renée@example.org"), txt("Zoë"), txt("4111111111111111"), txt("secret"), txt("ABCDEF"), {Kind: chain.ValueNull}}
	out := sh.Project(nil, row)
	if len(out) != 6 {
		t.Fatalf("projected %d values", len(out))
	}
	if string(out[0].Data) != "7" || out[5].Kind != chain.ValueNull {
		t.Fatalf("unmasked values changed: %q %v", out[0].Data, out[5])
	}
	email := string(out[1].Data)
	if !strings.HasSuffix(email, "@example.org") || len(email) != 16+len("@example.org") || strings.Contains(email, "Zo") {
		t.Fatalf("email mask %q", email)
	}
	if h := string(out[2].Data); len(h) != 64 || h == "Zoë" {
		t.Fatalf("hash mask %q", h)
	}
	if got := string(out[3].Data); got != "************1111" {
		t.Fatalf("keep-last %q", got)
	}
	if got := string(out[4].Data); got != "AB" {
		t.Fatalf("truncate %q", got)
	}
	// Deterministic: the same input masks the same way, another differs.
	again := sh.Project(nil, row)
	if string(again[1].Data) != email {
		t.Fatal("email mask is not deterministic")
	}
	other := sh.Project(nil, []chain.Value{txt("8"), txt("Zoe.Renee@example.org"), txt("x"), txt("1"), txt(""), txt(""), txt("")})
	if string(other[1].Data) == email {
		t.Fatal("two addresses masked alike")
	}
	// A full's cell masks the same way as a change's value.
	if got, null := sh.Cell(1, []byte("Zoë.Renée@example.org"), false); null || string(got) != email {
		t.Fatalf("cell %q %v", got, null)
	}
	if _, null := sh.Cell(2, nil, true); !null {
		t.Fatal("NULL hashed")
	}
	// Unchanged (TOASTed) values stay unchanged.
	if v := sh.Project(nil, []chain.Value{txt("1"), {Kind: chain.ValueUnchanged}, txt(""), txt(""), txt(""), txt(""), txt("")})[1]; v.Kind != chain.ValueUnchanged {
		t.Fatalf("unchanged became %v", v)
	}
	rec := f.Record()
	if len(rec.Masks) != 4 || rec.Masks[2].Column != "app.users.email" || rec.Masks[2].KeyID != KeyID([]byte(testKey)) || rec.Masks[0].KeyID != "" {
		t.Fatalf("record %+v", rec)
	}
	if strings.Contains(rec.Masks[2].KeyID, testKey) || len(rec.Masks[2].KeyID) != 16 {
		t.Fatal("the record holds the key")
	}
}

func TestShapeRefusals(t *testing.T) {
	keyed := env(map[string]string{"K": testKey})
	cases := []struct {
		spec Spec
		code errcode.Code
	}{
		{Spec{ExcludeColumns: []string{"app.users.id"}}, errcode.FilterKeyColumn},
		{Spec{ExcludeColumns: []string{"app.users.email"}}, errcode.FilterKeyColumn},
		{Spec{Masks: []string{"app.users.age=hash"}, MaskKeyEnv: "K"}, errcode.MaskUnsupported},
		{Spec{Masks: []string{"app.users.age=truncate:1"}}, errcode.MaskUnsupported},
		{Spec{Masks: []string{"app.users.age=null"}}, errcode.MaskUnsupported}, // CHECK uses it
		{Spec{Masks: []string{"app.users.email=null"}}, errcode.MaskUnsupported},
		{Spec{Masks: []string{"app.users.email=truncate:3"}}, errcode.MaskUnsupported},
		{Spec{Masks: []string{"app.users.id=fixed:1"}}, errcode.MaskUnsupported},
		{Spec{Masks: []string{"app.users.code=hash"}, MaskKeyEnv: "K"}, errcode.MaskUnsupported},
		{Spec{Masks: []string{"app.users.code=fixed:01234567890"}}, errcode.MaskUnsupported},
		{Spec{Masks: []string{"app.users.notes=fixed:x"}}, errcode.MaskUnsupported}, // binary column, no encoder... text kind is fine
	}
	for i, c := range cases {
		f, err := Compile(c.spec, keyed)
		if err != nil {
			t.Fatal(err)
		}
		tb := usersTable()
		_, err = f.Shape(&tb, nil)
		if i == len(cases)-1 {
			// A text column's binary form is its text: fixed needs no encoder.
			if err != nil {
				t.Fatalf("fixed on a text column: %v", err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%+v was accepted", c.spec)
			continue
		}
		wantCode(t, err, c.code)
	}
}

func TestShapeSchemaFiltersTablesAndForeignKeys(t *testing.T) {
	users := usersTable()
	orders := chain.Table{Schema: "app", Name: "orders", Columns: []chain.Column{col("id", "bigint", intKind(), true), col("user_email", "text", textKind(), false)},
		PrimaryKey: []string{"id"}, Constraints: []chain.Constraint{{Name: "orders_user_fk", Type: "f", Definition: "FOREIGN KEY (user_email) REFERENCES app.users(email)"}}}
	audit := chain.Table{Schema: "app", Name: "audit_log", Columns: []chain.Column{col("at", "text", textKind(), false)}}
	s := &chain.Schema{Tables: []chain.Table{audit, orders, users}}

	f, _ := Compile(Spec{ExcludeTables: []string{"app.audit*"}}, env(nil))
	out, shapes, err := f.ShapeSchema(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Tables) != 2 || out.Tables[0].Name != "orders" || len(shapes) != 2 || len(s.Tables) != 3 {
		t.Fatalf("tables %+v", out.Tables)
	}
	if !shapes["app.users"].Trivial() {
		t.Fatal("an unfiltered table's shape is not trivial")
	}

	f, _ = Compile(Spec{Masks: []string{"app.users.email=hash"}, MaskKeyEnv: "K"}, env(map[string]string{"K": testKey}))
	_, _, err = f.ShapeSchema(s, nil)
	wantCode(t, err, errcode.MaskUnsupported)
	if !strings.Contains(err.Error(), "orders_user_fk") {
		t.Fatalf("the refusal does not name the foreign key: %v", err)
	}

	f, _ = Compile(Spec{ExcludeTables: []string{"app.users"}, Masks: []string{"app.users.email=hash"}, MaskKeyEnv: "K"}, env(map[string]string{"K": testKey}))
	_, _, err = f.ShapeSchema(s, nil)
	wantCode(t, err, errcode.FilterInvalid)
	f, _ = Compile(Spec{ExcludeColumns: []string{"app.ghost.c"}}, env(nil))
	_, _, err = f.ShapeSchema(s, nil)
	wantCode(t, err, errcode.FilterInvalid)

	// A full refuses a column the source lacks; a capture (Shape) passes
	// over one dropped on the source since.
	f, _ = Compile(Spec{ExcludeColumns: []string{"app.users.nope"}}, env(nil))
	_, _, err = f.ShapeSchema(s, nil)
	wantCode(t, err, errcode.FilterInvalid)
	if sh, err := f.Shape(&users, nil); err != nil || len(sh.Table.Columns) != len(users.Columns) {
		t.Fatalf("a capture's shape with a dropped column: %v", err)
	}

	// A foreign key to a table left out is left out too.
	f, _ = Compile(Spec{ExcludeTables: []string{"app.users"}}, env(nil))
	out, _, err = f.ShapeSchema(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range out.Tables {
		if tb.Name == "orders" && len(tb.Constraints) != 0 {
			t.Fatalf("orders keeps %+v, a foreign key to an excluded table", tb.Constraints)
		}
	}
	if len(s.Tables[1].Constraints) != 1 {
		t.Fatal("the source schema was changed")
	}
}

func TestReferencedTable(t *testing.T) {
	for def, want := range map[string]string{
		"FOREIGN KEY (a) REFERENCES app.users(email)":                    "app.users",
		"FOREIGN KEY (a) REFERENCES users(email) ON DELETE CASCADE":      "app.users",
		`FOREIGN KEY (a) REFERENCES "Other"."T x"(id)`:                   "Other.T x",
		"FOREIGN KEY (`a`) REFERENCES `shop`.`orders` (`id`)":            "shop.orders",
		"FOREIGN KEY (`a`) REFERENCES `orders` (`id`) ON UPDATE CASCADE": "app.orders",
	} {
		s, n, ok := ReferencedTable(def, "app")
		if !ok || s+"."+n != want {
			t.Errorf("%s: %s.%s, want %s", def, s, n, want)
		}
	}
}

func TestFixedUsesTheEngineEncoder(t *testing.T) {
	f, _ := Compile(Spec{Masks: []string{"app.users.age=fixed:42"}}, env(nil))
	tb := usersTable()
	tb.Constraints = nil
	enc := func(c chain.Column, text string) (string, []byte, error) {
		return text, []byte{0, 0, 0, 42}, nil
	}
	sh, err := f.Shape(&tb, enc)
	if err != nil {
		t.Fatal(err)
	}
	if got, null := sh.Cell(6, []byte{0, 0, 0, 7}, false); null || string(got) != "\x00\x00\x00\x2a" {
		t.Fatalf("binary fixed %v", got)
	}
	if got, _ := sh.Cell(6, nil, true); string(got) != "\x00\x00\x00\x2a" {
		t.Fatal("fixed does not replace NULL")
	}
	v := sh.Project(nil, []chain.Value{{}, {}, {}, {}, {}, {}, {Kind: chain.ValueText, Data: []byte("7")}})[6]
	if string(v.Data) != "42" {
		t.Fatalf("change value %q", v.Data)
	}
	// Without an encoder a binary non-text column cannot take a fixed value.
	_, err = f.Shape(&tb, nil)
	wantCode(t, err, errcode.MaskUnsupported)
}

// A partition goes with the root of its tree: its patterns, its excluded
// columns and its masks.
func TestPartitionsFollowTheirRoot(t *testing.T) {
	f, _ := Compile(Spec{IncludeTables: []string{"app.events"}, ExcludeColumns: []string{"app.events.secret"}}, env(nil))
	part := func(name, parent string) chain.Table {
		return chain.Table{Schema: "app", Name: name, PartitionOf: parent, Columns: []chain.Column{col("id", "bigint", intKind(), true), col("secret", "text", textKind(), false)}}
	}
	s := &chain.Schema{Tables: []chain.Table{part("events", ""), part("events_2026", "app.events"), part("events_2026_q1", "app.events_2026"), part("other", "")}}
	out, _, err := f.ShapeSchema(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Tables) != 3 {
		t.Fatalf("tables %+v", out.Tables)
	}
	for _, tb := range out.Tables {
		if len(tb.Columns) != 1 {
			t.Errorf("%s keeps %d columns, want the root's exclusion applied", tb.Name, len(tb.Columns))
		}
	}
	// One learned later, in a capture.
	f.LearnPartition("app.events_2027", "app.events")
	if !f.Includes("app", "events_2027") || f.Includes("app", "other_2027") {
		t.Fatal("a partition learned later does not follow its root")
	}
}

// A sequence a table or column left out owns does not cross: the target
// could not attach it (a full's schema names the owner).
func TestSequencesOfWhatIsLeftOutDoNotCross(t *testing.T) {
	users := usersTable()
	audit := chain.Table{Schema: "app", Name: "audit_log", Columns: []chain.Column{col("id", "bigint", intKind(), true)}}
	s := &chain.Schema{Tables: []chain.Table{audit, users}, Sequences: []chain.Sequence{
		{Schema: "app", Name: "audit_log_id_seq", OwnedByTable: "audit_log", OwnedByColumn: "id"},
		{Schema: "app", Name: "users_notes_seq", OwnedByTable: "users", OwnedByColumn: "notes"},
		{Schema: "app", Name: "users_id_seq", OwnedByTable: "users", OwnedByColumn: "id"},
		{Schema: "app", Name: "free_seq"},
	}}
	f, _ := Compile(Spec{ExcludeTables: []string{"app.audit_log"}, ExcludeColumns: []string{"app.users.notes"}}, env(nil))
	out, _, err := f.ShapeSchema(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range out.Sequences {
		names = append(names, q.Name)
	}
	if got := strings.Join(names, ","); got != "users_id_seq,free_seq" {
		t.Fatalf("sequences %s, want users_id_seq,free_seq", got)
	}
	if len(s.Sequences) != 4 {
		t.Fatal("the source schema was changed")
	}
}
