package ddlcheck

import (
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/chain"
)

// Names are the objects a chain itself records, against which qualified
// names in its text are resolved: a type, function or operator name
// outside the engine's catalog must be one of them.
type Names struct {
	// types holds "schema\x00name" of every recorded enum and user type.
	types map[string]bool
	// extSchemas are the schemas the recorded extensions live in.
	extSchemas map[string]bool
}

// NamesOf returns the names schema s records: its enums, user types (those
// of schema change records included) and extension schemas.
func NamesOf(s *chain.Schema) *Names {
	n := &Names{types: map[string]bool{}, extSchemas: map[string]bool{}}
	if s == nil {
		return n
	}
	for _, e := range s.Enums {
		n.AddType(e.Schema, e.Name)
	}
	for _, u := range s.Types {
		n.AddType(u.Schema, u.Name)
	}
	for i := range s.Tables {
		for _, u := range s.Tables[i].Types {
			n.AddType(u.Schema, u.Name)
		}
	}
	for _, e := range s.Extensions {
		schema := s.ExtensionSchemas[e]
		if schema == "" {
			schema = "public"
		}
		n.extSchemas[schema] = true
	}
	return n
}

// AddType records one more user type (a schema change brings new ones).
func (n *Names) AddType(schema, name string) { n.types[schema+"\x00"+name] = true }

func (n *Names) hasType(schema, name string) bool { return n.types[schema+"\x00"+name] }

func (n *Names) extSchema(schema string) bool { return n.extSchemas[schema] }

// CheckName refuses a recorded identifier a target could not quote
// faithfully: empty, not UTF-8, or holding a NUL or another control
// character. Quotes, semicolons and spaces are fine: every target quotes
// every identifier it sends.
func CheckName(w Where, name string) error {
	switch {
	case name == "":
		return refuse(w, name, "the name is empty")
	case !utf8.ValidString(name):
		return refuse(w, name, "the name is not UTF-8")
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return refuse(w, name, "the name holds a control character")
	}
	return nil
}
