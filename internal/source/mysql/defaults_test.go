package mysql

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/source"
)

// Constant defaults are recorded as quoted literals of their values' text
// (expressions are not), in the full and in the schema change of an ADD
// COLUMN, whose default MariaDB writes into the existing rows without
// logging them.
func TestConstantDefaultsAreRecorded(t *testing.T) {
	f := newFixture(t, `CREATE TABLE d (id int PRIMARY KEY, a int DEFAULT 5, b varchar(5) DEFAULT 'it''s', c datetime DEFAULT current_timestamp(),
  dc decimal(5,2) DEFAULT -1.50, e enum('x','y') DEFAULT 'y', f double DEFAULT 1e3, g time DEFAULT '01:00:00', h int DEFAULT NULL)`)
	m := f.full(source.FullOptions{})
	got := map[string]string{}
	for _, c := range m.Schema.Tables[0].Columns {
		got[c.Name] = c.Default
	}
	want := map[string]string{"id": "", "a": "'5'", "b": "'it''s'", "c": "", "dc": "'-1.50'", "e": "'y'", "f": "'1000'", "g": "'PT1H'", "h": ""}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("default of %s = %q, want %q", k, got[k], w)
		}
	}
	f.exec("INSERT INTO d (id) VALUES (1)" + ";\n" + "ALTER TABLE d ADD COLUMN n int NOT NULL DEFAULT 7" + ";\n" + "INSERT INTO d (id) VALUES (2)")
	changes, _, all := f.capture(m.EndPosition, m.Schema)
	var added string
	for _, c := range all {
		if c.Schema != nil {
			for _, col := range c.Schema.Columns {
				if col.Name == "n" {
					added = col.Default
				}
			}
		}
	}
	if added != "'7'" || len(changes) != 3 || !strings.HasPrefix(changes[1], "S ") {
		t.Fatalf("added column default %q, changes %q", added, changes)
	}
}
