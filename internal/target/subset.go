package target

import (
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
	sel := &Selection{tables: tables, parent: filter.Partitions{}}
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
	// parent knows the partition trees of the schema and of the schema
	// changes it was shown.
	parent filter.Partitions
}

// follow records a table's place in a partition tree.
func (s *Selection) follow(t *chain.Table) { s.parent.Follow(t) }

// Takes reports whether the table named qualified ("schema.name") is in
// the subset: whether the root of its partition tree matches the patterns.
func (s *Selection) Takes(qualified string) bool {
	if s == nil {
		return true
	}
	return s.tables.MatchQualified(s.parent.Root(qualified))
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
// names of the tables it leaves out (filter.KeepTables: foreign keys to and
// sequences owned by a table left out go with it). A nil Selection returns
// schema itself.
func (s *Selection) Schema(schema *chain.Schema) (*chain.Schema, []string) {
	if s == nil || schema == nil {
		return schema, nil
	}
	return filter.KeepTables(schema, s.Takes)
}

// SubsetChanged is the refusal of a broker run whose subset differs from
// the one the stream's position was written under.
func SubsetChanged(stream string, recorded, asked Subset) error {
	return errcode.New(errcode.BrokerSubsetChanged,
		"stream %q applies %s to this target, and this run asks for %s", stream, recorded, asked)
}
