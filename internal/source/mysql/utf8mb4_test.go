package mysql

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
)

// fourByteSchema puts a four-byte character in every string position of a
// table: values, ENUM and SET labels (beside two- and three-byte ones, a
// real '?', a quote and a backslash), defaults of every string kind (NULL-
// able and NOT NULL), a CHECK and comments.
const fourByteSchema = `CREATE TABLE fb (
  id int PRIMARY KEY,
  e enum('plain','é','漢','🚀','?','q''t','a\\b') DEFAULT '🚀' COMMENT 'e🚀',
  en enum('x','🚀y') NOT NULL DEFAULT '🚀y',
  s set('p','🚀','😀z') DEFAULT 'p,🚀',
  v varchar(20) NOT NULL DEFAULT 'n🚀' COMMENT 'v🚀',
  tx text DEFAULT 'x🚀',
  q varchar(5) DEFAULT 'a?',
  js json,
  CONSTRAINT ck CHECK (v <> 'x🚀')
) DEFAULT CHARSET=utf8mb4 COMMENT='t🚀'`

// The catalog's '?' for a four-byte character is never recorded: labels
// and defaults are the server's exact text, in the full and in the schema
// change an ADD COLUMN logs, and changes carrying such a label read
// exactly from the binlog.
func TestFourByteTextIsRecordedExactly(t *testing.T) {
	f := newFixture(t, fourByteSchema+";\n"+
		`INSERT INTO fb (id, e, s, v, js) VALUES (1, '🚀', '😀z', 'v🚀', '{"k": "🚀"}'), (2, DEFAULT, DEFAULT, DEFAULT, NULL)`)
	m := f.full(source.FullOptions{})
	tb := m.Schema.Tables[0]
	col := func(tb *chain.Table, name string) chain.Column {
		for _, c := range tb.Columns {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no column %s in %+v", name, tb.Columns)
		return chain.Column{}
	}
	if c := col(&tb, "e"); c.Type != `enum('plain','é','漢','🚀','?','q''t','a\\b')` ||
		!slices.Equal(c.Kind.Labels, []string{"plain", "é", "漢", "🚀", "?", "q't", `a\b`}) || c.Default != "'🚀'" {
		t.Errorf("e recorded as type %q labels %q default %q", c.Type, c.Kind.Labels, c.Default)
	}
	if c := col(&tb, "s"); c.Type != "set('p','🚀','😀z')" || c.Default != "'p,🚀'" {
		t.Errorf("s recorded as type %q default %q", c.Type, c.Default)
	}
	for name, want := range map[string]string{"en": "'🚀y'", "v": "'n🚀'", "tx": "'x🚀'", "q": "'a?'"} {
		if c := col(&tb, name); c.Default != want {
			t.Errorf("default of %s = %q, want %q", name, c.Default, want)
		}
	}
	if c := col(&tb, "js"); c.Kind.Name != "json" {
		t.Errorf("js recorded as kind %s", c.Kind.Name)
	}
	rows := f.rows(m, "fb")
	want := []string{`1|🚀|🚀y|😀z|v🚀|x🚀|a?|{"k": "🚀"}`, `2|🚀|🚀y|p,🚀|n🚀|x🚀|a?|NULL`}
	if !slices.Equal(rows, want) {
		t.Fatalf("full rows\n got %q\nwant %q", rows, want)
	}

	f.exec(`INSERT INTO fb (id, e, en, s) VALUES (3, '🚀', 'x', 'p,😀z')` + ";\n" +
		`ALTER TABLE fb ADD COLUMN d varchar(10) NOT NULL DEFAULT 'n🚀', ADD COLUMN de enum('a','🚀') NOT NULL DEFAULT '🚀'` + ";\n" +
		`INSERT INTO fb (id, e) VALUES (4, 'a\\b')`)
	changes, _, all := f.capture(m.EndPosition, m.Schema)
	var added *chain.Table
	for _, c := range all {
		if c.Schema != nil {
			added = c.Schema
		}
	}
	if added == nil {
		t.Fatalf("no schema change among %q", changes)
	}
	if c := col(added, "d"); c.Default != "'n🚀'" {
		t.Errorf("added column d default %q, want 'n🚀'", c.Default)
	}
	if c := col(added, "de"); c.Type != "enum('a','🚀')" || c.Default != "'🚀'" {
		t.Errorf("added column de type %q default %q", c.Type, c.Default)
	}
	wantChanges := []string{
		"I test.fb 3|🚀|x|p,😀z|n🚀|x🚀|a?|NULL",
		"S test.fb (",
		`I test.fb 4|a\b|🚀y|p,🚀|n🚀|x🚀|a?|NULL|n🚀|🚀`,
	}
	if len(changes) != len(wantChanges) {
		t.Fatalf("changes %q", changes)
	}
	for i, w := range wantChanges {
		w = strings.Replace(w, "test.fb", f.db+".fb", 1)
		if !strings.HasPrefix(changes[i], w) || (i != 1 && changes[i] != w) {
			t.Errorf("change %d = %q, want %q", i, changes[i], w)
		}
	}
}

// A chain that recorded the catalog's '?' for a label (as sluice did
// before) gets the exact labels back from the binlog's own table map: the
// capture records a schema change, and the changes after it carry the
// exact label.
func TestLabelsRecordedWithQuestionMarksAreCorrected(t *testing.T) {
	f := newFixture(t, `CREATE TABLE e (id int PRIMARY KEY, e enum('plain','🚀')) DEFAULT CHARSET=utf8mb4`)
	m := f.full(source.FullOptions{})
	old := m.Schema.Tables[0]
	old.Columns = slices.Clone(old.Columns)
	k := *old.Columns[1].Kind
	k.Labels = []string{"plain", "?"}
	old.Columns[1].Type, old.Columns[1].Kind = "enum('plain','?')", &k
	f.exec(`INSERT INTO e VALUES (1, '🚀')`)
	changes, _, _ := f.capture(m.EndPosition, &chain.Schema{Schemas: m.Schema.Schemas, Tables: []chain.Table{old}})
	want := []string{"S " + f.db + ".e (id int(11), e enum('plain','🚀'))", "I " + f.db + ".e 1|🚀"}
	if !slices.Equal(changes, want) {
		t.Fatalf("changes\n got %q\nwant %q", changes, want)
	}
}

// Where the server cannot give the exact text (a NOT NULL column's
// default, on a table with no row to read it through) the schema read is
// refused, naming the table and column, rather than record a '?'.
func TestFourByteDefaultUnreadableIsRefused(t *testing.T) {
	f := newFixture(t, `CREATE TABLE empty (id int PRIMARY KEY, v varchar(10) NOT NULL DEFAULT 'n🚀') DEFAULT CHARSET=utf8mb4`)
	_, err := f.src.FullBackup(context.Background(), f.ch, source.FullOptions{AttemptID: "a1"})
	if !errcode.Is(err, errcode.SourceTextLossy) || !strings.Contains(err.Error(), f.db+".empty.v") {
		t.Fatalf("full of an empty table with a four-byte NOT NULL default: %v", err)
	}
	// With a row, the default reads through it.
	f.exec(`INSERT INTO empty (id) VALUES (1)`)
	m := f.full(source.FullOptions{})
	if d := m.Schema.Tables[0].Columns[1].Default; d != "'n🚀'" {
		t.Fatalf("default %q", d)
	}
}

func TestShownAs(t *testing.T) {
	for _, c := range []struct {
		exact, shown string
		want         bool
	}{
		{"n🚀", "n?", true},
		{"n🚀", "n????", true},
		{"n🚀", "n", false},
		{"é🚀😀", "é??", true},
		{"é🚀😀", "é?????", true},
		{"?", "?", true},
		{"a", "?", false},
	} {
		if got := shownAs(c.exact, c.shown); got != c.want {
			t.Errorf("shownAs(%q, %q) = %v", c.exact, c.shown, got)
		}
	}
	if got, ok := defaultAmongLabels("p,?", []string{"p", "🚀", "?"}, true); ok {
		t.Errorf("an ambiguous member matched %q", got)
	}
	if got, ok := defaultAmongLabels("?y", []string{"x", "🚀y"}, false); !ok || got != "🚀y" {
		t.Errorf("enum default %q %v", got, ok)
	}
}

// Every source session reads text as utf8mb4 even where the server ignores
// the character set the driver asks for at the handshake (here the
// handshake asks for latin1, as such a server's defaults would give): a
// four-byte value is not turned into '?'.
func TestSessionsReadUTF8MB4(t *testing.T) {
	f := newFixture(t, `CREATE TABLE v (id int PRIMARY KEY, s varchar(10)) DEFAULT CHARSET=utf8mb4`+";\n"+`INSERT INTO v VALUES (1, 'a🚀')`)
	c, err := parseDSN(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	c.sql.Collation = "latin1_swedish_ci"
	db, err := connect(context.Background(), c, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var cs, s string
	if err := db.QueryRow(`SELECT @@character_set_results, s FROM v`).Scan(&cs, &s); err != nil {
		t.Fatal(err)
	}
	if cs != "utf8mb4" || s != "a🚀" {
		t.Fatalf("session character set %s read %q", cs, s)
	}
}
