package target

import (
	"regexp"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
)

// Subset names the tables of a chain a broker stream or a restore takes
// (--include-table, --exclude-table): globs over "schema.table" (MySQL
// family: "db.table"), a bare name matching the table in any schema. The
// zero Subset takes every table. A partition goes with its partitioned
// table: the patterns are matched against the root of its tree.
type Subset struct {
	IncludeTables []string `json:"include_tables,omitempty"`
	ExcludeTables []string `json:"exclude_tables,omitempty"`
}

// IsZero reports whether s takes every table.
func (s Subset) IsZero() bool { return len(s.IncludeTables) == 0 && len(s.ExcludeTables) == 0 }

// Validate checks the patterns; a bad one is SLUICE-E-FILTER-INVALID.
func (s Subset) Validate() error {
	_, err := filter.NewTables(s.IncludeTables, s.ExcludeTables)
	return err
}

// Equal reports whether s and o take the same tables by the same patterns,
// whatever their order and repetitions.
func (s Subset) Equal(o Subset) bool {
	return slices.Equal(normalPatterns(s.IncludeTables), normalPatterns(o.IncludeTables)) &&
		slices.Equal(normalPatterns(s.ExcludeTables), normalPatterns(o.ExcludeTables))
}

// String describes s for messages and status: "all tables", or the
// patterns ("include orders, public.items; exclude audit*").
func (s Subset) String() string {
	if s.IsZero() {
		return "all tables"
	}
	var parts []string
	if len(s.IncludeTables) > 0 {
		parts = append(parts, "include "+strings.Join(s.IncludeTables, ", "))
	}
	if len(s.ExcludeTables) > 0 {
		parts = append(parts, "exclude "+strings.Join(s.ExcludeTables, ", "))
	}
	return strings.Join(parts, "; ")
}

func normalPatterns(p []string) []string {
	out := slices.Clone(p)
	slices.Sort(out)
	return slices.Compact(out)
}

// Select compiles s for a walk over a chain whose schema in force is schema
// (nil: none known yet). The zero Subset selects nil, which takes
// everything; a bad pattern is SLUICE-E-FILTER-INVALID.
func (s Subset) Select(schema *chain.Schema) (*Selection, error) {
	if s.IsZero() {
		return nil, nil
	}
	tables, err := filter.NewTables(s.IncludeTables, s.ExcludeTables)
	if err != nil {
		return nil, err
	}
	sel := &Selection{tables: tables, parent: map[string]string{}}
	if schema != nil {
		for i := range schema.Tables {
			sel.follow(&schema.Tables[i])
		}
	}
	return sel, nil
}

// Selection is a compiled Subset: it says which tables, and which changes
// of an incremental, a broker stream or a restore takes. It follows the
// partitions the schema changes it is shown create, so one Selection serves
// one walk over the records in order (walking them again is harmless). A
// nil *Selection takes everything. It is not safe for concurrent use.
type Selection struct {
	tables *filter.Tables
	// parent maps a partition's qualified name to its partitioned table's.
	parent map[string]string
}

// follow records a table's place in a partition tree.
func (s *Selection) follow(t *chain.Table) {
	if t.PartitionOf != "" {
		s.parent[t.QualifiedName()] = t.PartitionOf
	} else {
		delete(s.parent, t.QualifiedName())
	}
}

// Takes reports whether the table named qualified ("schema.name") is in
// the subset: whether the root of its partition tree matches the patterns.
func (s *Selection) Takes(qualified string) bool {
	if s == nil {
		return true
	}
	root := qualified
	for range len(s.parent) {
		p, ok := s.parent[root]
		if !ok {
			break
		}
		root = p
	}
	return s.tables.MatchQualified(root)
}

// Keep decides one record of an incremental: begin and commit records are
// always kept (the position moves past a transaction that touches no table
// of the subset); a row or schema change is kept when its table is taken;
// a truncate keeps only the tables taken (a copy of c naming them is
// returned), and is dropped when none is. Records must be shown in order,
// skipped ones included, so new partitions are followed.
func (s *Selection) Keep(c *chain.Change) (*chain.Change, bool) {
	if s == nil {
		return c, true
	}
	switch c.Op {
	case chain.OpBegin, chain.OpCommit:
		return c, true
	case chain.OpSchema:
		if c.Schema != nil {
			s.follow(c.Schema)
		}
		return c, s.Takes(c.Table)
	case chain.OpTruncate:
		var kept []string
		for _, name := range c.Tables {
			if s.Takes(name) {
				kept = append(kept, name)
			}
		}
		switch len(kept) {
		case 0:
			return nil, false
		case len(c.Tables):
			return c, true
		}
		n := *c
		n.Tables = kept
		return &n, true
	}
	return c, s.Takes(c.Table)
}

// Visit wraps visit, a walker of an incremental's records, so it sees only
// the records s keeps (truncates narrowed to the tables taken).
func (s *Selection) Visit(visit func(*chain.Change) error) func(*chain.Change) error {
	if s == nil {
		return visit
	}
	return func(c *chain.Change) error {
		if k, ok := s.Keep(c); ok {
			return visit(k)
		}
		return nil
	}
}

// Schema returns the part of schema the subset takes, and the qualified
// names of the tables it leaves out (in schema order). Sequences owned by a
// table left out go with it, and so do the foreign keys of a table taken
// that reference one left out (the target could not create them); enums,
// types, free sequences and schemas stay. A nil Selection returns schema
// itself.
func (s *Selection) Schema(schema *chain.Schema) (*chain.Schema, []string) {
	if s == nil || schema == nil {
		return schema, nil
	}
	out := *schema
	out.Tables = nil
	var left []string
	for i := range schema.Tables {
		t := schema.Tables[i]
		if !s.Takes(t.QualifiedName()) {
			left = append(left, t.QualifiedName())
			continue
		}
		t.Constraints = nil
		for _, c := range schema.Tables[i].Constraints {
			if c.Type == "f" {
				if ref, ok := referencedTable(t.Schema, c.Definition); ok && !s.Takes(ref) {
					continue
				}
			}
			t.Constraints = append(t.Constraints, c)
		}
		out.Tables = append(out.Tables, t)
	}
	if len(left) == 0 {
		return schema, nil
	}
	out.Sequences = nil
	for _, q := range schema.Sequences {
		if q.OwnedByTable != "" && !s.Takes(q.Schema+"."+q.OwnedByTable) {
			continue
		}
		out.Sequences = append(out.Sequences, q)
	}
	return &out, left
}

// referencesClause finds the table a FOREIGN KEY definition references:
// one identifier or two, each plain or double-quoted.
var referencesClause = regexp.MustCompile(`REFERENCES\s+("(?:[^"]|"")+"|[^\s."(]+)(?:\.("(?:[^"]|"")+"|[^\s."(]+))?`)

// referencedTable reads the qualified name of the table a foreign key
// definition references; an unqualified name is in schema, the referencing
// table's.
func referencedTable(schema, definition string) (string, bool) {
	m := referencesClause.FindStringSubmatch(definition)
	if m == nil {
		return "", false
	}
	if m[2] == "" {
		return schema + "." + unquoteIdent(m[1]), true
	}
	return unquoteIdent(m[1]) + "." + unquoteIdent(m[2]), true
}

func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
	}
	return s
}

// SubsetChanged is the refusal of a broker run whose subset differs from
// the one the stream's position was written under.
func SubsetChanged(stream string, recorded, asked Subset) error {
	return errcode.New(errcode.BrokerSubsetChanged,
		"stream %q applies %s to this target, and this run asks for %s", stream, recorded, asked)
}
