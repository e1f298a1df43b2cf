package chain

import (
	"strings"

	"github.com/sluicehq/sluice/internal/value"
)

// NeutralKind returns the column's neutral kind: the recorded Kind, or, for
// a column recorded without one (every column of a chain written before
// kinds were recorded), the kind value.FromPostgres derives from its type
// text and OID. A kind derived so knows no enum labels and takes any
// user-defined type for an enum; Schema.FillKinds resolves both against
// the schema. The result shares Labels and Elem with the recorded kind.
func (c Column) NeutralKind() value.Kind {
	if c.Kind != nil {
		return *c.Kind
	}
	return value.FromPostgres(c.Type, c.TypeOID)
}

// FillKinds sets Kind on every column of every table that has none, as
// NeutralKind derives it and then resolved against the schema's enums: an
// enum column, or an array of one, whose type is in Enums gets its labels
// in order, and any other user-defined type (a domain, composite or range
// type, an extension's type) is Other. Columns with a kind keep it.
//
// Readers of chains written before kinds were recorded call it on the
// schema they read. It changes the schema, and with it the content a
// manifest's ID is computed over, so it is for a schema put to use, never
// for one about to be verified or rewritten under its stored ID.
func (s *Schema) FillKinds() {
	enums := make(map[[2]string][]string, len(s.Enums))
	for _, e := range s.Enums {
		enums[[2]string{e.Schema, e.Name}] = e.Labels
	}
	resolve := func(k *value.Kind, typeText string) {
		if k.Name != value.Enum {
			return
		}
		schema, name, ok := splitQualified(typeText)
		labels, found := enums[[2]string{schema, name}]
		if !ok || !found {
			k.Name = value.Other
			return
		}
		k.Labels = append([]string(nil), labels...)
	}
	for ti := range s.Tables {
		cols := s.Tables[ti].Columns
		for ci := range cols {
			c := &cols[ci]
			if c.Kind != nil {
				continue
			}
			k := c.NeutralKind()
			switch {
			case k.Name == value.Enum:
				resolve(&k, c.Type)
			case k.Name == value.Array && k.Elem != nil:
				resolve(k.Elem, strings.TrimSuffix(strings.TrimSpace(c.Type), "[]"))
			}
			c.Kind = &k
		}
	}
}

// splitQualified splits a schema-qualified type name as PostgreSQL's
// format_type prints it (`public.mood`, `"My Schema"."Mood"`, with `""`
// for a quote inside quotes) into its two unquoted parts.
func splitQualified(text string) (schema, name string, ok bool) {
	var parts []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quoted && c == '"' && i+1 < len(text) && text[i+1] == '"':
			cur.WriteByte('"')
			i++
		case c == '"':
			quoted = !quoted
		case c == '.' && !quoted:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	parts = append(parts, cur.String())
	if quoted || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// Table returns the table of s with that qualified name ("schema.name"),
// or nil (also when s is nil).
func (s *Schema) Table(qualified string) *Table {
	if s == nil {
		return nil
	}
	for i := range s.Tables {
		if s.Tables[i].QualifiedName() == qualified {
			return &s.Tables[i]
		}
	}
	return nil
}
