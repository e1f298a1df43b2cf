package sqlite

import (
	"math"
	"strconv"

	"github.com/sluicehq/sluice/internal/target/sqlkit"
	"github.com/sluicehq/sluice/internal/value"
	"github.com/sluicehq/sluice/internal/value/portable"
)

// refusal is a value the storage rules cannot hold exactly (sqlkit.Refusal).
type refusal = sqlkit.Refusal

// render turns a neutral value of kind k into what the target stores (the
// rules of docs/sqlite-target.md): nil for NULL, int64 for integers and
// booleans, float64 for floats, []byte for bytes and a string for every
// other kind. A value the rules cannot hold is a *refusal, never rounded
// or stored as NULL.
func render(k value.Kind, v value.Value) (any, error) {
	if v.Null {
		return nil, nil
	}
	switch k.Name {
	case value.Int:
		if k.Unsigned {
			if v.Uint > math.MaxInt64 {
				return nil, &refusal{Shown: strconv.FormatUint(v.Uint, 10), Reason: "beyond SQLite INTEGER's signed 64-bit range"}
			}
			return int64(v.Uint), nil
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
			return nil, &refusal{Shown: "NaN", Reason: "SQLite stores a NaN REAL as NULL"}
		case v.Float == 0 && math.Signbit(v.Float):
			return nil, &refusal{Shown: "-0", Reason: "SQLite stores a negative zero REAL as 0"}
		}
		return v.Float, nil
	case value.Bytes:
		if v.Bytes == nil {
			return []byte{}, nil // empty, not NULL
		}
		return v.Bytes, nil
	case value.Array:
		b, err := portable.AppendArray(nil, k, v)
		if err != nil {
			return nil, &refusal{Shown: err.Error()}
		}
		return string(b), nil
	}
	return string(portable.AppendText(nil, k, v)), nil
}
