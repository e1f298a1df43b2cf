package mysql

import (
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
	"github.com/sluicehq/sluice/internal/value/portable"
)

// refusal is a value the mapping cannot hold exactly; the caller names the
// table and column (see refuseValue).
type refusal struct {
	shown  string // the value, as it is shown in the message
	reason string
}

func (r *refusal) Error() string { return "value " + r.shown + ": " + r.reason }

// valueHint is the hint of a value the target refuses.
const valueHint = "The MySQL target stores each kind by the rules of docs/mysql-target.md, and this value has no exact form under them. Change the value (or the column's type) on the source, or replicate the table to a target that holds it."

// render turns a neutral value of column c's kind into the argument the
// target writes (the rules of docs/mysql-target.md): nil for NULL, int64 or
// uint64 for integers and booleans, float64 for floats, []byte for bytes
// and a string for every other kind. A value MySQL cannot hold exactly is
// a *refusal, never rounded, clamped or stored as NULL.
func (c *column) render(v value.Value) (any, error) {
	if v.Null {
		return nil, nil
	}
	k := c.kind
	switch k.Name {
	case value.Int:
		if k.Unsigned {
			return v.Uint, nil
		}
		return v.Int, nil
	case value.Bool:
		if v.Bool {
			return int64(1), nil
		}
		return int64(0), nil
	case value.Float:
		switch {
		case math.IsNaN(v.Float):
			return nil, &refusal{shown: "NaN", reason: "MySQL floating-point columns hold no NaN"}
		case math.IsInf(v.Float, 0):
			return nil, &refusal{shown: string(portable.AppendFloat(nil, k, v.Float)), reason: "MySQL floating-point columns hold no infinity"}
		case v.Float == 0 && math.Signbit(v.Float):
			return nil, &refusal{shown: "-0", reason: "MySQL stores a negative zero as 0"}
		}
		if k.Width == 32 {
			return float64(float32(v.Float)), nil
		}
		return v.Float, nil
	case value.Decimal:
		return c.renderDecimal(v.Text)
	case value.Bytes:
		if v.Bytes == nil {
			return []byte{}, nil // empty, not NULL
		}
		return v.Bytes, nil
	case value.Date:
		if err := checkInstant(v); err != nil {
			return nil, err
		}
		return string(portable.AppendDate(nil, v.Time.UTC())), nil
	case value.Timestamp, value.TimestampTZ:
		if err := checkInstant(v); err != nil {
			return nil, err
		}
		return formatDateTime(v.Time.UTC()), nil
	case value.Time:
		if k.Zoned {
			return string(portable.AppendText(nil, k, v)), nil
		}
		return string(portable.AppendClock(nil, v.Micros)), nil
	case value.Array:
		b, err := portable.AppendArray(nil, k, v)
		if err != nil {
			return nil, &refusal{shown: "an array", reason: err.Error()}
		}
		return string(b), nil
	case value.Interval:
		return string(portable.AppendText(nil, k, v)), nil
	}
	return v.Text, nil
}

// checkInstant refuses a date or timestamp outside the years MySQL's DATE
// and DATETIME hold (1 to 9999), and the infinities.
func checkInstant(v value.Value) error {
	switch {
	case v.Infinite > 0:
		return &refusal{shown: "infinity", reason: "MySQL dates and datetimes hold no infinity"}
	case v.Infinite < 0:
		return &refusal{shown: "-infinity", reason: "MySQL dates and datetimes hold no infinity"}
	}
	if y := v.Time.UTC().Year(); y < 1 || y > 9999 {
		return &refusal{shown: string(portable.AppendDate(nil, v.Time.UTC())), reason: "MySQL dates and datetimes hold the years 1 to 9999 only (a BC date has none)"}
	}
	return nil
}

// formatDateTime writes a DATETIME(6) literal.
func formatDateTime(t time.Time) string {
	b := portable.AppendDate(make([]byte, 0, 26), t)
	b = append(b, ' ')
	return string(portable.AppendClock(b, int64(t.Hour())*3600e6+int64(t.Minute())*60e6+int64(t.Second())*1e6+int64(t.Nanosecond()/1000)))
}

// renderDecimal checks that a decimal's text fits the column's DECIMAL
// exactly: MySQL holds no NaN or infinity, and would round away fraction
// digits beyond the scale, which is refused instead.
func (c *column) renderDecimal(text string) (any, error) {
	switch text {
	case "NaN", "Infinity", "-Infinity":
		return nil, &refusal{shown: text, reason: "MySQL DECIMAL holds no NaN or infinity"}
	}
	digits := strings.TrimPrefix(text, "-")
	intPart, frac, _ := strings.Cut(digits, ".")
	intPart = strings.TrimLeft(intPart, "0")
	scale, precision := c.kind.Scale, c.kind.Precision
	if c.unconstrained {
		scale, precision = maxDecimalScale, maxDecimalPrecision
	}
	if trimmed := strings.TrimRight(frac, "0"); len(trimmed) > scale {
		return nil, &refusal{shown: text, reason: "it has " + strconv.Itoa(len(trimmed)) + " fraction digits, and the column's DECIMAL keeps " + strconv.Itoa(scale)}
	}
	if len(intPart) > precision-scale {
		return nil, &refusal{shown: text, reason: "it has " + strconv.Itoa(len(intPart)) + " integer digits, and the column's DECIMAL keeps " + strconv.Itoa(precision-scale)}
	}
	return text, nil
}

// fromText decodes a value in PostgreSQL's text form (every value of a
// change record, and a full's text-encoded columns) and renders it. Text,
// enum and other kinds are written as that text, unchanged.
func (c *column) fromText(data []byte) (any, error) {
	switch c.kind.Name {
	case value.Text, value.Enum, value.Other, value.JSON:
		return string(data), nil
	}
	v, err := value.DecodePGText(c.kind, data)
	if err != nil {
		return nil, &refusal{shown: showText(data), reason: "it does not decode as " + string(c.kind.Name) + ": " + err.Error()}
	}
	return c.render(v)
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
	return c.render(v)
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
