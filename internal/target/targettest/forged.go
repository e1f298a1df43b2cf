package targettest

import (
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
)

// pwn is the statement every forgery tries to smuggle in; Pwned reports
// whether it ran.
const pwn = "CREATE TABLE public.pwned (x int)"

// Forgery is one recorded schema rewritten as whoever can write the store
// would: a text of the recorded schema carries a second statement.
type Forgery struct {
	Name string
	// Forge rewrites a copy of the clean schema (Forged's).
	Forge func(s *chain.Schema)
}

// Forgeries are the rewrites every reader must refuse: the recorded type,
// default, generation expression, CHECK, partition bound, user type
// definition and index definition each carry a statement of their own.
func Forgeries() []Forgery {
	k := func(s *chain.Schema) *chain.Table { return &s.Tables[0] }
	return []Forgery{
		{"type", func(s *chain.Schema) {
			k(s).Columns[1].Type = "numeric); " + pwn + "; CREATE TABLE public.pwned_pad (y numeric"
		}},
		{"default", func(s *chain.Schema) { k(s).Columns[1].Default = "''); " + pwn + "; SELECT (1" }},
		{"default subquery", func(s *chain.Schema) {
			k(s).Columns[1].Default = "(SELECT query_to_xml('" + pwn + "', true, true, ''))"
		}},
		{"generation expression", func(s *chain.Schema) { k(s).Columns[1].Generated = "'x') STORED; " + pwn + "; --" }},
		{"check", func(s *chain.Schema) {
			k(s).Constraints = []chain.Constraint{{Name: "c", Type: "c", Definition: "CHECK (true); " + pwn}}
		}},
		{"check function", func(s *chain.Schema) {
			k(s).Constraints = []chain.Constraint{{Name: "c", Type: "c", Definition: "CHECK (query_to_xml('" + pwn + "', true, true, '') IS NOT NULL)"}}
		}},
		{"partition bound", func(s *chain.Schema) {
			parent := chain.Table{Schema: "public", Name: "parted", PartitionKey: "LIST (id)", Columns: k(s).Columns}
			part := chain.Table{Schema: "public", Name: "parted_1", PartitionOf: "public.parted",
				PartitionBound: "FOR VALUES IN (1); " + pwn, Columns: k(s).Columns}
			s.Tables = append(s.Tables, parent, part)
		}},
		{"partition key", func(s *chain.Schema) {
			s.Tables = append(s.Tables, chain.Table{Schema: "public", Name: "parted", PartitionKey: "LIST (id); " + pwn, Columns: k(s).Columns})
		}},
		{"user type definition", func(s *chain.Schema) {
			s.Types = []chain.UserType{{Schema: "public", Name: "t1", Kind: chain.TypeDomain, Definition: "CREATE DOMAIN public.t1 AS int; " + pwn}}
		}},
		{"index definition", func(s *chain.Schema) {
			k(s).Indexes = []chain.Index{{Name: "i", Columns: []string{"v"}, Definition: "CREATE INDEX i ON public.keyed USING btree (v); " + pwn}}
		}},
	}
}

// Forged returns the clean schema a forgery rewrites and its rewritten copy.
func Forged(f Forgery) (clean, forged *chain.Schema) {
	clean = &chain.Schema{Tables: []chain.Table{keyed()}}
	forged = &chain.Schema{Tables: []chain.Table{keyed()}}
	f.Forge(forged)
	return clean, forged
}

// forgedSchemas: every forgery is refused with SLUICE-E-CHAIN-SCHEMA-REFUSED
// by a restore (prepare and table load), by a broker starting from the
// forged schema, and by a broker meeting the forged table in a schema
// change record; and the smuggled statement never ran (h.Pwned).
func forgedSchemas(t *testing.T, h Harness) {
	for _, f := range Forgeries() {
		t.Run(f.Name, func(t *testing.T) {
			tgt := h.New(t)
			ForgedReaders(t, tgt, f)
			if h.Pwned != nil && h.Pwned(t, tgt) {
				t.Fatal("the forged schema's statement ran on the target")
			}
		})
	}
}
