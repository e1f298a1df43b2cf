package targettest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
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
	ctx := context.Background()
	for _, f := range Forgeries() {
		t.Run(f.Name, func(t *testing.T) {
			clean, forged := Forged(f)
			tgt := h.New(t)
			requireCode(t, tgt.Prepare(ctx, forged, false), errcode.ChainSchemaRefused)
			for _, tb := range forged.Tables {
				if b, _ := json.Marshal(tb); !strings.Contains(string(b), "pwned") {
					continue // not the forged table (a type forgery Prepare refused)
				}
				_, err := tgt.LoadTable(ctx, chaintest.Store(t), forged, chain.TableData{Table: tb.QualifiedName()}, nil)
				requireCode(t, err, errcode.ChainSchemaRefused)
			}

			restore(t, tgt, clean)
			k := &clean.Tables[0]
			ch := chaintest.Store(t)
			plain := chaintest.AddIncremental(t, ch, chaintest.Txn(50, insert(k, "1", "a")), 100)
			_, err := apply.ApplyIncremental(ctx, ch, plain, forged, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: full})
			requireCode(t, err, errcode.ChainSchemaRefused)

			var changes []chain.Change
			for i := range forged.Tables {
				tb := forged.Tables[i]
				tb.Types = forged.Types
				changes = append(changes, chain.Change{Op: chain.OpSchema, Table: tb.QualifiedName(), Schema: &tb})
			}
			ch2 := chaintest.Store(t)
			change := chaintest.AddIncremental(t, ch2, chaintest.Txn(51, changes...), 100)
			_, err = apply.ApplyIncremental(ctx, ch2, change, clean, tgt, apply.Options{Stream: stream, Owner: owner, ExpectedLast: full})
			requireCode(t, err, errcode.ChainSchemaRefused)
			if h.Pwned != nil && h.Pwned(t, tgt) {
				t.Fatal("the forged schema's statement ran on the target")
			}
		})
	}
}
