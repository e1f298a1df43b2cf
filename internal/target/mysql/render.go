package mysql

import (
	"math"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/target/sqlkit"
	"github.com/sluicehq/sluice/internal/value"
	"github.com/sluicehq/sluice/internal/value/portable"
)

// refusal is a value the mapping cannot hold exactly (sqlkit.Refusal).
type refusal = sqlkit.Refusal

// valueHint is the hint of a value the target refuses.
const valueHint = "The MySQL target stores each kind by the rules of docs/mysql-target.md, and this value has no exact form under them. Change the value (or the column's type) on the source, or replicate the table to a target that holds it."

// render turns a neutral value of kind k into the argument the target
// writes (the rules of docs/mysql-target.md): nil for NULL, int64 or
// uint64 for integers and booleans, float64 for floats, []byte for bytes
// and a string for every other kind. unconstrained is set for a decimal
// stored as DECIMAL(65,30). A value MySQL cannot hold exactly is a
// *refusal, never rounded, clamped or stored as NULL.
func render(k value.Kind, unconstrained bool, v value.Value) (any, error) {
	if v.Null {
		return nil, nil
	}
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
			return nil, &refusal{Shown: "NaN", Reason: "MySQL floating-point columns hold no NaN"}
		case math.IsInf(v.Float, 0):
			return nil, &refusal{Shown: string(portable.AppendFloat(nil, k, v.Float)), Reason: "MySQL floating-point columns hold no infinity"}
		case v.Float == 0 && math.Signbit(v.Float):
			return nil, &refusal{Shown: "-0", Reason: "MySQL stores a negative zero as 0"}
		}
		if k.Width == 32 {
			return float64(float32(v.Float)), nil
		}
		return v.Float, nil
	case value.Decimal:
		return renderDecimal(k, unconstrained, v.Text)
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
		// portable's timestamp text is DATETIME's literal; an instant is
		// written as its UTC wall clock.
		return string(portable.AppendText(nil, value.Kind{Name: value.Timestamp}, v)), nil
	case value.Time:
		if k.Zoned {
			return string(portable.AppendText(nil, k, v)), nil
		}
		return string(portable.AppendClock(nil, v.Micros)), nil
	case value.Array:
		b, err := portable.AppendArray(nil, k, v)
		if err != nil {
			return nil, &refusal{Shown: "an array", Reason: err.Error()}
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
		return &refusal{Shown: "infinity", Reason: "MySQL dates and datetimes hold no infinity"}
	case v.Infinite < 0:
		return &refusal{Shown: "-infinity", Reason: "MySQL dates and datetimes hold no infinity"}
	}
	if y := v.Time.UTC().Year(); y < 1 || y > 9999 {
		return &refusal{Shown: string(portable.AppendDate(nil, v.Time.UTC())), Reason: "MySQL dates and datetimes hold the years 1 to 9999 only (a BC date has none)"}
	}
	return nil
}

// renderDecimal checks that a decimal's text fits the column's DECIMAL
// exactly: MySQL holds no NaN or infinity, and would round away fraction
// digits beyond the scale, which is refused instead.
func renderDecimal(k value.Kind, unconstrained bool, text string) (any, error) {
	switch text {
	case "NaN", "Infinity", "-Infinity":
		return nil, &refusal{Shown: text, Reason: "MySQL DECIMAL holds no NaN or infinity"}
	}
	digits := strings.TrimPrefix(text, "-")
	intPart, frac, _ := strings.Cut(digits, ".")
	intPart = strings.TrimLeft(intPart, "0")
	scale, precision := k.Scale, k.Precision
	if unconstrained {
		scale, precision = maxDecimalScale, maxDecimalPrecision
	}
	if trimmed := strings.TrimRight(frac, "0"); len(trimmed) > scale {
		return nil, &refusal{Shown: text, Reason: "it has " + strconv.Itoa(len(trimmed)) + " fraction digits, and the column's DECIMAL keeps " + strconv.Itoa(scale)}
	}
	if len(intPart) > precision-scale {
		return nil, &refusal{Shown: text, Reason: "it has " + strconv.Itoa(len(intPart)) + " integer digits, and the column's DECIMAL keeps " + strconv.Itoa(precision-scale)}
	}
	return text, nil
}

// refuseValue names the table and column of a value the target refuses.
// Other errors pass unchanged.
func refuseValue(table string, c *column, err error) error {
	return sqlkit.RefuseValue(table, c.name, c.decl, err, valueHint)
}
