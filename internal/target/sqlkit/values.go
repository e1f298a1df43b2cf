package sqlkit

import (
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

// Refusal is a value an engine's storage rules cannot hold exactly; the
// caller names the table and column (RefuseValue).
type Refusal struct {
	// Shown is the value as a message shows it.
	Shown string
	// Reason says why it cannot be held; empty when Shown says it all.
	Reason string
}

func (r *Refusal) Error() string {
	if r.Reason == "" {
		return "value " + r.Shown
	}
	return "value " + r.Shown + ": " + r.Reason
}

// RefuseValue names the table and column (with the engine's type decl) of
// a value the target refuses, as SLUICE-E-TARGET-VALUE-REFUSED with hint.
// Errors that are no *Refusal pass unchanged.
func RefuseValue(table, column, decl string, err error, hint string) error {
	var r *Refusal
	if !errors.As(err, &r) {
		return err
	}
	return &errcode.Error{Code: errcode.TargetValueRefused,
		Message: "table " + table + ", column " + column + " (" + decl + "): " + r.Error(),
		Hint:    hint}
}

// ShowText shows a text value in a message, cut short when long.
func ShowText(data []byte) string {
	const limit = 80
	if len(data) > limit {
		return strconv.Quote(string(data[:limit])) + "…"
	}
	return strconv.Quote(string(data))
}

// ShowBinary shows a binary value in a message, in hex, cut short when long.
func ShowBinary(data []byte) string {
	const limit = 40
	if len(data) > limit {
		return "0x" + hex.EncodeToString(data[:limit]) + "…"
	}
	return "0x" + hex.EncodeToString(data)
}

// Column is what the decoding needs of a stored column: its kind, the
// source type's OID and its encoding in row chunks, and how the engine
// renders a neutral value and passes text through.
type Column struct {
	Kind     value.Kind
	OID      uint32
	Encoding string
	// Verbatim lists the kinds whose PostgreSQL text is stored as it is.
	Verbatim []value.Name
	// Render turns a neutral value into the statement argument, or a
	// *Refusal.
	Render func(value.Value) (any, error)
}

func (c *Column) verbatim() bool {
	for _, n := range c.Verbatim {
		if n == c.Kind.Name {
			return true
		}
	}
	return false
}

// FromText decodes a value in PostgreSQL's text form (every value of a
// change record, and a full's text-encoded columns) and renders it.
func (c *Column) FromText(data []byte) (any, error) {
	if c.verbatim() {
		return string(data), nil
	}
	v, err := value.DecodePGText(c.Kind, data)
	if err != nil {
		return nil, &Refusal{Shown: ShowText(data), Reason: "it does not decode as " + string(c.Kind.Name) + ": " + err.Error()}
	}
	return c.Render(v)
}

// FromChunk decodes one field of a full's row chunk (nil is NULL) by the
// column's encoding and renders it.
func (c *Column) FromChunk(data []byte) (any, error) {
	if data == nil {
		return nil, nil
	}
	if c.Encoding == chain.EncodingText {
		return c.FromText(data)
	}
	switch c.Kind.Name {
	case value.Bytes:
		return data, nil // bytea's binary form is the bytes
	case value.Text, value.Enum:
		return string(data), nil // and text's and an enum's are the text
	}
	v, err := value.DecodePGBinary(c.Kind, c.OID, data)
	if err != nil {
		return nil, &Refusal{Shown: ShowBinary(data), Reason: "its binary form does not decode as " + string(c.Kind.Name) + ": " + err.Error()}
	}
	return c.Render(v)
}

// FromChange decodes one value of a change's row image. ok is false for a
// value the change left unchanged (TOAST), which the target leaves as it
// is.
func (c *Column) FromChange(name string, v chain.Value) (arg any, ok bool, err error) {
	switch v.Kind {
	case chain.ValueNull:
		return nil, true, nil
	case chain.ValueUnchanged:
		return nil, false, nil
	case chain.ValueText:
		arg, err := c.FromText(v.Data)
		return arg, true, err
	}
	return nil, false, errcode.New(errcode.ChunkCorrupt, "column %s: unknown value kind %q in a change record", name, v.Kind)
}
