// Package filter decides what of a source crosses into the chain: which
// tables (include and exclude globs over "schema.table"), which columns
// (excluded ones never enter the chain), and which values are masked before
// they are encoded (keyed hash, e-mail, null, fixed value, truncate,
// keep-last). It is engine-neutral: a source engine asks it which tables to
// read, shapes each table it records through Filter.Shape, and passes every
// row image or row through the Shape before encoding it. The broker and
// restore use Tables alone to take a subset of a chain.
package filter

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Spec is what an operator asked to filter and mask, as the CLI and the
// workflow inputs carry it: patterns and strategies as given, and the mask
// key only by reference (the name of an environment variable of the
// worker).
type Spec struct {
	// IncludeTables and ExcludeTables are globs over "schema.table"
	// (MySQL family: "db.table"); a pattern without a dot matches the table
	// name in any schema. With includes, only matching tables cross; the
	// excludes then take tables out.
	IncludeTables []string `json:"include_tables,omitempty"`
	ExcludeTables []string `json:"exclude_tables,omitempty"`
	// ExcludeColumns are "schema.table.column": the column never enters the
	// chain. A key column cannot be excluded.
	ExcludeColumns []string `json:"exclude_columns,omitempty"`
	// Masks are "schema.table.column=STRATEGY".
	Masks []string `json:"masks,omitempty"`
	// MaskKeyEnv names the environment variable (of the worker) holding
	// the key of the keyed strategies (hash, email).
	MaskKeyEnv string `json:"mask_key_env,omitempty"`
}

// IsZero reports whether the spec filters nothing.
func (s Spec) IsZero() bool {
	return len(s.IncludeTables) == 0 && len(s.ExcludeTables) == 0 && len(s.ExcludeColumns) == 0 && len(s.Masks) == 0
}

// Validate checks the spec's syntax without a key or a schema: patterns,
// column names and strategies. Errors are SLUICE-E-FILTER-INVALID.
func (s Spec) Validate() error {
	if _, err := NewTables(s.IncludeTables, s.ExcludeTables); err != nil {
		return err
	}
	seen := map[string]string{}
	for _, c := range s.ExcludeColumns {
		if _, _, _, err := splitColumn(c); err != nil {
			return errcode.Wrap(errcode.FilterInvalid, err, "--exclude-column %q", c)
		}
		seen[c] = "--exclude-column"
	}
	keyed := false
	for _, m := range s.Masks {
		col, strategy, ok := strings.Cut(m, "=")
		if !ok {
			return errcode.New(errcode.FilterInvalid, "--mask %q is not schema.table.column=STRATEGY", m)
		}
		if _, _, _, err := splitColumn(col); err != nil {
			return errcode.Wrap(errcode.FilterInvalid, err, "--mask %q", m)
		}
		st, err := ParseStrategy(strategy)
		if err != nil {
			return errcode.Wrap(errcode.FilterInvalid, err, "--mask %q", m)
		}
		if prev, dup := seen[col]; dup {
			return errcode.New(errcode.FilterInvalid, "column %s is named by --mask and by %s; name it once", col, prev)
		}
		seen[col] = "another --mask"
		keyed = keyed || st.Keyed()
	}
	if keyed && s.MaskKeyEnv == "" {
		return errcode.New(errcode.MaskKeyMissing, "a keyed mask strategy (hash, email) needs --mask-key-env VAR")
	}
	return nil
}

// Filter is a compiled Spec with its mask key resolved: what a source
// engine consults while it reads.
type Filter struct {
	spec   Spec
	tables *Tables
	// excluded maps "schema.table" to the set of excluded column names.
	excluded map[string]map[string]bool
	// masks maps "schema.table" to column name to strategy.
	masks map[string]map[string]Strategy
	key   []byte
	keyID string

	// parents maps a partition ("schema.table") to its parent, learned
	// from the schemas and tables the filter shaped and from
	// LearnPartition: a partition crosses, is cut and masked as the root
	// of its tree.
	mu      sync.Mutex
	parents Partitions
}

// Compile checks s and resolves its mask key through lookupEnv (os.LookupEnv
// on a worker). A zero spec compiles to nil, which filters nothing: every
// method of a nil *Filter lets everything through.
func Compile(s Spec, lookupEnv func(string) (string, bool)) (*Filter, error) {
	if s.IsZero() {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	tables, _ := NewTables(s.IncludeTables, s.ExcludeTables)
	f := &Filter{spec: s, tables: tables, excluded: map[string]map[string]bool{}, masks: map[string]map[string]Strategy{}, parents: Partitions{}}
	for _, c := range s.ExcludeColumns {
		sch, tbl, col, _ := splitColumn(c)
		q := sch + "." + tbl
		if f.excluded[q] == nil {
			f.excluded[q] = map[string]bool{}
		}
		f.excluded[q][col] = true
	}
	keyed := false
	for _, m := range s.Masks {
		c, strategy, _ := strings.Cut(m, "=")
		sch, tbl, col, _ := splitColumn(c)
		st, _ := ParseStrategy(strategy)
		q := sch + "." + tbl
		if f.masks[q] == nil {
			f.masks[q] = map[string]Strategy{}
		}
		f.masks[q][col] = st
		keyed = keyed || st.Keyed()
	}
	if keyed {
		v, ok := lookupEnv(s.MaskKeyEnv)
		if !ok || v == "" {
			return nil, errcode.New(errcode.MaskKeyMissing, "the mask key variable %s is not set (or empty) in the worker's environment", s.MaskKeyEnv)
		}
		if len(v) < 16 {
			return nil, errcode.New(errcode.MaskKeyMissing, "the mask key in %s is %d bytes; a key of at least 16 bytes is needed (32 random bytes, base64, is a good one)", s.MaskKeyEnv, len(v))
		}
		f.key = []byte(v)
		f.keyID = KeyID(f.key)
	}
	return f, nil
}

// Includes reports whether the table schema.name crosses. A partition
// the filter knows of (LearnPartition, or a schema it shaped) crosses
// when the root of its tree does.
func (f *Filter) Includes(schema, name string) bool {
	if f == nil {
		return true
	}
	return f.tables.MatchQualified(f.root(schema + "." + name))
}

// LearnPartition tells the filter that partition ("schema.table") is a
// partition of parent, so the patterns, excluded columns and masks of the
// root of its tree apply to it. An empty parent changes nothing.
func (f *Filter) LearnPartition(partition, parent string) {
	if f == nil || parent == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.parents[partition] = parent
}

// Knows reports whether the filter knows the parent of the partition q.
func (f *Filter) Knows(q string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.parents[q]
	return ok
}

// root returns the root of q's partition tree as far as the filter knows
// it (q itself for a table that is no known partition).
func (f *Filter) root(q string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parents.Root(q)
}

// Record is what the chain records of f: nil for a nil filter.
func (f *Filter) Record() *chain.Filters {
	if f == nil {
		return nil
	}
	r := &chain.Filters{
		IncludeTables:  append([]string(nil), f.spec.IncludeTables...),
		ExcludeTables:  append([]string(nil), f.spec.ExcludeTables...),
		ExcludeColumns: append([]string(nil), f.spec.ExcludeColumns...),
	}
	for _, m := range f.spec.Masks {
		c, strategy, _ := strings.Cut(m, "=")
		st, _ := ParseStrategy(strategy)
		rec := chain.MaskRecord{Column: c, Strategy: st.String()}
		if st.Keyed() {
			rec.KeyID = f.keyID
		}
		r.Masks = append(r.Masks, rec)
	}
	// Order does not change what a filter does, so the record is sorted:
	// the same patterns given in another order are the same filter.
	sort.Strings(r.IncludeTables)
	sort.Strings(r.ExcludeTables)
	sort.Strings(r.ExcludeColumns)
	sort.Slice(r.Masks, func(i, j int) bool { return r.Masks[i].Column < r.Masks[j].Column })
	return r
}

// Tables matches qualified table names against include and exclude globs.
// The zero value (and nil) matches every table.
type Tables struct {
	include, exclude []string
}

// NewTables checks the patterns (SLUICE-E-FILTER-INVALID) and returns their
// matcher; nil when both lists are empty.
func NewTables(include, exclude []string) (*Tables, error) {
	for _, list := range [][]string{include, exclude} {
		for _, p := range list {
			if strings.TrimSpace(p) == "" {
				return nil, errcode.New(errcode.FilterInvalid, "an empty table pattern")
			}
			if strings.Count(p, ".") > 1 {
				return nil, errcode.New(errcode.FilterInvalid, "table pattern %q has more than one dot; patterns are schema.table (MySQL family: db.table) or a bare table name", p)
			}
			if _, err := path.Match(globPath(p), ""); err != nil {
				return nil, errcode.New(errcode.FilterInvalid, "table pattern %q is not a glob: %v", p, err)
			}
		}
	}
	if len(include) == 0 && len(exclude) == 0 {
		return nil, nil
	}
	return &Tables{include: include, exclude: exclude}, nil
}

// Match reports whether schema.name passes: it matches an include pattern
// (or there are none) and no exclude pattern.
func (t *Tables) Match(schema, name string) bool {
	if t == nil {
		return true
	}
	if len(t.include) > 0 && !anyMatch(t.include, schema, name) {
		return false
	}
	return !anyMatch(t.exclude, schema, name)
}

// MatchQualified is Match for a "schema.table" name.
func (t *Tables) MatchQualified(qualified string) bool {
	schema, name, ok := strings.Cut(qualified, ".")
	if !ok {
		return t.Match("", qualified)
	}
	return t.Match(schema, name)
}

func anyMatch(patterns []string, schema, name string) bool {
	for _, p := range patterns {
		var subject string
		if strings.Contains(p, ".") {
			subject = schema + "/" + name
		} else {
			subject = name
		}
		if ok, _ := path.Match(globPath(p), subject); ok {
			return true
		}
	}
	return false
}

// globPath turns a "schema.table" pattern into a path.Match pattern, so that
// '*' never crosses the dot.
func globPath(p string) string { return strings.Replace(p, ".", "/", 1) }

// splitColumn splits "schema.table.column".
func splitColumn(c string) (schema, table, column string, err error) {
	parts := strings.Split(c, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", fmt.Errorf("%q is not schema.table.column (MySQL family: db.table.column)", c)
	}
	return parts[0], parts[1], parts[2], nil
}

// FromRecord rebuilds the filter a segment was written with from what its
// full recorded, resolving the mask key through keyEnv and lookupEnv: the
// filter a capture of that segment must keep using. A keyed mask whose key
// is not the one the segment recorded (by its fingerprint) is refused with
// SLUICE-E-FILTER-CHANGED. A nil or empty record returns nil.
func FromRecord(rec *chain.Filters, keyEnv string, lookupEnv func(string) (string, bool)) (*Filter, error) {
	if rec.Empty() {
		return nil, nil
	}
	s := Spec{
		IncludeTables:  rec.IncludeTables,
		ExcludeTables:  rec.ExcludeTables,
		ExcludeColumns: rec.ExcludeColumns,
		MaskKeyEnv:     keyEnv,
	}
	for _, m := range rec.Masks {
		s.Masks = append(s.Masks, m.Column+"="+m.Strategy)
	}
	f, err := Compile(s, lookupEnv)
	if err != nil {
		return nil, err
	}
	for _, m := range rec.Masks {
		if m.KeyID != "" && m.KeyID != f.keyID {
			return nil, errcode.New(errcode.FilterChanged, "the segment masks %s with the key whose fingerprint is %s; the key in %s has fingerprint %s", m.Column, m.KeyID, keyEnv, f.keyID)
		}
	}
	return f, nil
}

// Describe renders a filter record in one line for listings: "tables
// +public.orders -audit*; columns -app.users.notes; masks
// app.users.email=email"; "" for an empty one.
func Describe(rec *chain.Filters) string {
	if rec.Empty() {
		return ""
	}
	var parts []string
	var tables []string
	for _, p := range rec.IncludeTables {
		tables = append(tables, "+"+p)
	}
	for _, p := range rec.ExcludeTables {
		tables = append(tables, "-"+p)
	}
	if len(tables) > 0 {
		parts = append(parts, "tables "+strings.Join(tables, " "))
	}
	if len(rec.ExcludeColumns) > 0 {
		parts = append(parts, "columns -"+strings.Join(rec.ExcludeColumns, " -"))
	}
	if len(rec.Masks) > 0 {
		var ms []string
		for _, m := range rec.Masks {
			ms = append(ms, m.Column+"="+m.Strategy)
		}
		parts = append(parts, "masks "+strings.Join(ms, " "))
	}
	return strings.Join(parts, "; ")
}
