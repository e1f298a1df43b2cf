package ddlcheck

import (
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
)

// FuzzPostgresTable feeds random recorded texts to the validators. Whatever
// they accept must render as text that, put where a target puts it, parses
// as exactly one statement of the expected kind, and that passes the
// validators again: no recorded text can turn into a second statement.
func FuzzPostgresTable(f *testing.F) {
	for _, s := range [][4]string{
		{"integer", "0", "CHECK ((a > 0))", "FOR VALUES IN (1)"},
		{"numeric); CREATE TABLE public.pwned (x int); CREATE TABLE public.pwned_pad (y numeric", "now()", "CHECK (true); DROP TABLE x", "DEFAULT"},
		{"text[]", "'a'::text); DROP TABLE x; --", "CHECK ((SELECT true))", "FOR VALUES FROM (MINVALUE) TO (5)"},
		{"public.mood", "nextval('s'::regclass)", "FOREIGN KEY (a) REFERENCES public.o(id)", "FOR VALUES WITH (modulus 2, remainder 0)"},
		{"int /* ", "$$x$$", "CHECK (a > 0) NOT VALID", "FOR VALUES IN ('a''); DROP TABLE x; --')"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, typ, def, check, bound string) {
		names := testNames()
		tb := &chain.Table{Schema: "public", Name: "t", PartitionOf: "public.p", PartitionBound: bound,
			Columns:     []chain.Column{{Name: "a", Type: typ, Default: def}},
			Constraints: []chain.Constraint{{Name: "c", Type: "c", Definition: check}}}
		out, err := PostgresTable(tb, names)
		if err != nil {
			return
		}
		c := out.Columns[0]
		for _, sql := range []string{
			"CREATE TABLE x (c " + c.Type + " DEFAULT " + c.Default + ")",
			"ALTER TABLE x ADD CONSTRAINT c " + out.Constraints[0].Definition,
			"ALTER TABLE x ATTACH PARTITION y " + out.PartitionBound,
		} {
			tree, err := pgOne(sql)
			if err != nil {
				t.Fatalf("accepted texts compose %q, which is not one statement: %v", sql, err)
			}
			if tree.Stmts[0].Stmt.GetCreateStmt() == nil && tree.Stmts[0].Stmt.GetAlterTableStmt() == nil {
				t.Fatalf("accepted texts compose %q, a statement of another kind", sql)
			}
		}
		if _, err := PostgresTable(out, names); err != nil {
			t.Fatalf("the rendering of accepted texts is refused: %v", err)
		}
	})
}

// FuzzMySQLMembers: whatever member list is accepted renders again, with
// quotes doubled, as the same members.
func FuzzMySQLMembers(f *testing.F) {
	for _, s := range []string{"enum('a','b''c')", "set('x')", "enum('a\\'')", "enum('a'), x int) ; DROP TABLE t; -- ')"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		members, err := MySQLMembers(text)
		if err != nil {
			return
		}
		var b []byte
		b = append(b, "enum("...)
		for i, m := range members {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '\'')
			for _, r := range []byte(m) {
				if r == '\'' || r == '\\' {
					b = append(b, r)
				}
				b = append(b, r)
			}
			b = append(b, '\'')
		}
		b = append(b, ')')
		again, err := MySQLMembers(string(b))
		if err != nil || len(again) != len(members) {
			t.Fatalf("%q reads as %q, rendered %q reads as %q (%v)", text, members, b, again, err)
		}
		for i := range again {
			if again[i] != members[i] {
				t.Fatalf("%q reads as %q, rendered %q reads as %q", text, members, b, again)
			}
		}
	})
}
