package ddlcheck

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Where names the recorded item a text belongs to.
type Where struct {
	// Table is the qualified table name, or empty for an object outside a table.
	Table string
	// Column is the column, constraint, index or type name within Table.
	Column string
	// What says which recorded text it is: "type", "default", "index", …
	What string
}

func (w Where) String() string {
	var parts []string
	if w.Table != "" {
		parts = append(parts, "table "+w.Table)
	}
	if w.Column != "" {
		parts = append(parts, w.Column)
	}
	what := w.What
	if len(parts) > 0 {
		what += " of " + strings.Join(parts, ", ")
	}
	return what
}

// maxShown bounds the recorded text a message quotes.
const maxShown = 200

// refuse returns the SLUICE-E-CHAIN-SCHEMA-REFUSED error for text at w.
func refuse(w Where, text, format string, args ...any) error {
	shown := text
	if len(shown) > maxShown {
		shown = shown[:maxShown] + "…"
	}
	return errcode.New(errcode.ChainSchemaRefused, "the chain's recorded %s is refused: %s; recorded text %q",
		w, fmt.Sprintf(format, args...), shown)
}
