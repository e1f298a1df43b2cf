package sqlite

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/value"
)

func TestRenderScalars(t *testing.T) {
	day := func(y int, m time.Month, d int) value.Value {
		return value.Value{Time: time.Date(y, m, d, 0, 0, 0, 0, time.UTC)}
	}
	for _, c := range []struct {
		name string
		k    value.Kind
		v    value.Value
		want any
	}{
		{"int", value.Kind{Name: value.Int, Width: 64}, value.Value{Int: math.MinInt64}, int64(math.MinInt64)},
		{"unsigned", value.Kind{Name: value.Int, Width: 64, Unsigned: true}, value.Value{Uint: math.MaxInt64}, int64(math.MaxInt64)},
		{"bool", value.Kind{Name: value.Bool}, value.Value{Bool: true}, int64(1)},
		{"-inf", value.Kind{Name: value.Float, Width: 64}, value.Value{Float: math.Inf(-1)}, math.Inf(-1)},
		{"decimal", value.Kind{Name: value.Decimal}, value.Value{Text: "-Infinity"}, "-Infinity"},
		{"empty bytes", value.Kind{Name: value.Bytes}, value.Value{}, []byte{}},
		// Kinds with no SQLite type are TEXT in their portable form
		// (internal/value/portable tests each form).
		{"date", value.Kind{Name: value.Date}, day(-44, 3, 15), "-0044-03-15"},
		{"timestamptz", value.Kind{Name: value.TimestampTZ}, value.Value{Time: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.FixedZone("x", 3600))}, "1999-12-31T22:59:59.999999Z"},
		{"timetz", value.Kind{Name: value.Time, Zoned: true}, value.Value{Micros: 1, Offset: -(5*3600 + 30*60 + 7)}, "00:00:00.000001-05:30:07"},
		{"interval", value.Kind{Name: value.Interval}, value.Value{Months: 14, Days: -3, Micros: 4*3600e6 + 5*60e6 + 6500000}, "P1Y2M-3DT4H5M6.5S"},
		{"infinite interval", value.Kind{Name: value.Interval}, value.Value{Infinite: 1}, "infinity"},
		{"null", value.Kind{Name: value.Text}, value.Value{Null: true}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := render(c.k, c.v)
			if err != nil {
				t.Fatal(err)
			}
			if b, ok := c.want.([]byte); ok {
				if g, ok := got.([]byte); !ok || g == nil || len(g) != len(b) {
					t.Fatalf("got %#v, want %#v", got, c.want)
				}
				return
			}
			if got != c.want {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

// Arrays are TEXT, the portable JSON form (internal/value/portable tests
// it); one whose dimensions do not hold its elements is refused.
func TestRenderArrays(t *testing.T) {
	f4 := value.Kind{Name: value.Float, Width: 32}
	arr := value.Kind{Name: value.Array, Elem: &f4}
	got, err := render(arr, value.Value{Elems: []value.Value{{Float: float64(float32(0.1))}, {Float: math.NaN()}, {Null: true}}, Dims: []int{1, 3}})
	if err != nil || got != `[[0.1,"NaN",null]]` {
		t.Fatalf("float array: %v %v", got, err)
	}
	_, err = render(arr, value.Value{Elems: []value.Value{{}}, Dims: []int{2, 2}})
	var r *refusal
	if !errors.As(err, &r) || err.Error() != "value an array of dimensions [2 2]: it holds 1 elements, its dimensions call for 4" {
		t.Fatalf("an array short of its dimensions: %v", err)
	}
}

func TestRenderRefusals(t *testing.T) {
	var r *refusal
	if _, err := render(value.Kind{Name: value.Float, Width: 64}, value.Value{Float: math.NaN()}); !errors.As(err, &r) || r.Shown != "NaN" {
		t.Fatalf("NaN: %v", err)
	}
	if _, err := render(value.Kind{Name: value.Float, Width: 32}, value.Value{Float: math.Copysign(0, -1)}); !errors.As(err, &r) || r.Shown != "-0" {
		t.Fatalf("-0: %v", err)
	}
	if _, err := render(value.Kind{Name: value.Int, Width: 64, Unsigned: true}, value.Value{Uint: math.MaxUint64}); !errors.As(err, &r) || r.Shown != "18446744073709551615" {
		t.Fatalf("uint64 max: %v", err)
	}
}
