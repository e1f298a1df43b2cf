package filter

import (
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
)

// Partitions maps a partition ("schema.table") to its parent's name, so a
// partition is matched (and, by a producer, cut and masked) as the root of
// its partition tree. Make it with make(Partitions).
type Partitions map[string]string

// Follow records t's place in a partition tree: its parent, or none (a
// partition detached since becomes a root of its own).
func (p Partitions) Follow(t *chain.Table) {
	if t.PartitionOf != "" {
		p[t.QualifiedName()] = t.PartitionOf
	} else {
		delete(p, t.QualifiedName())
	}
}

// Root returns the root of q's partition tree as far as p knows it: q
// itself for a table that is no known partition.
func (p Partitions) Root(q string) string {
	for range len(p) {
		parent, ok := p[q]
		if !ok {
			break
		}
		q = parent
	}
	return q
}

// ReferencedTable reads the table a foreign key definition references
// ("FOREIGN KEY (a) REFERENCES s.t(b)"; identifiers bare, double- or
// back-quoted); an unqualified name is in schema, the referencing table's.
func ReferencedTable(def, schema string) (string, string, bool) {
	i := strings.Index(strings.ToUpper(def), "REFERENCES")
	if i < 0 {
		return "", "", false
	}
	rest := strings.TrimSpace(def[i+len("REFERENCES"):])
	toks := identifiers(rest)
	if len(toks) == 0 {
		return "", "", false
	}
	// Qualified when the first name is followed by a dot.
	first := toks[0]
	after := rest[strings.Index(rest, first)+len(first):]
	after = strings.TrimLeft(after, "\"`")
	if strings.HasPrefix(after, ".") && len(toks) >= 2 {
		return first, toks[1], true
	}
	return schema, first, true
}

// KeepTables returns the part of schema whose tables takes (given a
// qualified name) keeps, and the qualified names of those it leaves out, in
// schema order. A kept table's foreign keys to a table left out go with
// it (the target could not create them), and so do the sequences a table
// left out owns; enums, types, free sequences and schemas stay. schema
// itself comes back when nothing changes.
func KeepTables(schema *chain.Schema, takes func(qualified string) bool) (*chain.Schema, []string) {
	if schema == nil {
		return nil, nil
	}
	out := *schema
	out.Tables = nil
	var left []string
	changed := false
	for i := range schema.Tables {
		t := schema.Tables[i]
		if !takes(t.QualifiedName()) {
			left = append(left, t.QualifiedName())
			continue
		}
		t.Constraints = nil
		for _, c := range schema.Tables[i].Constraints {
			if c.Type == "f" {
				if s, n, ok := ReferencedTable(c.Definition, t.Schema); ok && !takes(s+"."+n) {
					changed = true
					continue
				}
			}
			t.Constraints = append(t.Constraints, c)
		}
		out.Tables = append(out.Tables, t)
	}
	out.Sequences = nil
	for _, q := range schema.Sequences {
		if q.OwnedByTable != "" && !takes(q.Schema+"."+q.OwnedByTable) {
			changed = true
			continue
		}
		out.Sequences = append(out.Sequences, q)
	}
	if !changed && len(left) == 0 {
		return schema, nil
	}
	return &out, left
}
