package sqlite

import (
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

// valueHint is the hint of a value the target refuses.
const valueHint = "The SQLite target stores each kind by the rules of docs/sqlite-target.md, and this value has no exact form under them. Change the value (or the column's type) on the source, or replicate the table to a target that holds it."

// fromText decodes a value in PostgreSQL's text form (every value of a
// change record, and a full's text-encoded columns) and renders it. Text,
// enum and other kinds are stored as that text, unchanged.
func (c *column) fromText(data []byte) (any, error) {
	switch c.kind.Name {
	case value.Text, value.Enum, value.Other:
		return string(data), nil
	}
	v, err := value.DecodePGText(c.kind, data)
	if err != nil {
		return nil, &refusal{shown: showText(data), reason: "it does not decode as " + string(c.kind.Name) + ": " + err.Error()}
	}
	return render(c.kind, v)
}

// fromChunk decodes one field of a full's row chunk (nil is NULL) by the
// column's encoding and renders it.
func (c *column) fromChunk(data []byte) (any, error) {
	if data == nil {
		return nil, nil
	}
	if c.encoding == chain.EncodingText {
		return c.fromText(data)
	}
	switch c.kind.Name {
	case value.Bytes:
		return data, nil // bytea's binary form is the bytes
	case value.Text, value.Enum:
		return string(data), nil // and text's and an enum's are the text
	}
	v, err := value.DecodePGBinary(c.kind, c.oid, data)
	if err != nil {
		return nil, &refusal{shown: showBinary(data), reason: "its binary form does not decode as " + string(c.kind.Name) + ": " + err.Error()}
	}
	return render(c.kind, v)
}

// fromChange decodes one value of a change's row image. ok is false for a
// value the change left unchanged (TOAST), which the target leaves as it is.
func (c *column) fromChange(v chain.Value) (arg any, ok bool, err error) {
	switch v.Kind {
	case chain.ValueNull:
		return nil, true, nil
	case chain.ValueUnchanged:
		return nil, false, nil
	case chain.ValueText:
		arg, err := c.fromText(v.Data)
		return arg, true, err
	}
	return nil, false, errcode.New(errcode.ChunkCorrupt, "column %s: unknown value kind %q in a change record", c.name, v.Kind)
}

// refuseValue names the table and column of a value the target refuses.
// Other errors pass unchanged.
func refuseValue(table string, c *column, err error) error {
	var r *refusal
	if !errors.As(err, &r) {
		return err
	}
	return &errcode.Error{Code: errcode.TargetValueRefused,
		Message: "table " + table + ", column " + c.name + " (" + c.decl + "): " + r.Error(),
		Hint:    valueHint}
}

// showText shows a text value in a message, cut short when long.
func showText(data []byte) string {
	const limit = 80
	if len(data) > limit {
		return strconv.Quote(string(data[:limit])) + "…"
	}
	return strconv.Quote(string(data))
}

// showBinary shows a binary value in a message, in hex, cut short when long.
func showBinary(data []byte) string {
	const limit = 40
	if len(data) > limit {
		return "0x" + hex.EncodeToString(data[:limit]) + "…"
	}
	return "0x" + hex.EncodeToString(data)
}
