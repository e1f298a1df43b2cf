package portable

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/value"
)

// AppendArray appends v, a non-NULL value of array kind k, as JSON text:
// nested JSON arrays, one level of nesting per dimension in row-major
// order, and [] for an empty array. An element is null when NULL, a JSON
// number when an integer or a finite float (written as AppendText and
// AppendFloat write it), true or false when a boolean, and otherwise a
// JSON string of the element's text form (AppendText): bytes in lowercase
// hex, and "NaN", "Infinity" and "-Infinity" for the floats JSON has no
// number for. A value whose dimensions do not hold exactly its elements is
// an error, its message showing the dimensions and why.
func AppendArray(b []byte, k value.Kind, v value.Value) ([]byte, error) {
	dims := v.Dims
	if len(dims) == 0 {
		if len(v.Elems) == 0 {
			return append(b, "[]"...), nil
		}
		dims = []int{len(v.Elems)}
	}
	n, negative := 1, false
	for _, d := range dims {
		n *= d
		negative = negative || d < 0
	}
	if n != len(v.Elems) {
		return nil, fmt.Errorf("an array of dimensions %v: it holds %d elements, its dimensions call for %d", dims, len(v.Elems), n)
	}
	if negative {
		return nil, fmt.Errorf("an array of dimensions %v: a dimension is negative", dims)
	}
	b, _ = appendDims(b, elemKind(k), dims, v.Elems)
	return b, nil
}

// elemKind is the element kind of array kind k (other when unrecorded).
func elemKind(k value.Kind) value.Kind {
	if k.Elem == nil {
		return value.Kind{Name: value.Other}
	}
	return *k.Elem
}

// appendDims appends the JSON array of the leading elements of elems that
// a (sub)array of dimensions dims holds, and returns the elements after
// them.
func appendDims(b []byte, elem value.Kind, dims []int, elems []value.Value) ([]byte, []value.Value) {
	b = append(b, '[')
	for i := 0; i < dims[0]; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		if len(dims) > 1 {
			b, elems = appendDims(b, elem, dims[1:], elems)
			continue
		}
		b = appendElem(b, elem, elems[0])
		elems = elems[1:]
	}
	return append(b, ']'), elems
}

// appendElem appends one array element of kind k as JSON.
func appendElem(b []byte, k value.Kind, v value.Value) []byte {
	if v.Null {
		return append(b, "null"...)
	}
	switch k.Name {
	case value.Int, value.Bool:
		// Their text forms are JSON numbers and booleans as they are.
		return AppendText(b, k, v)
	case value.Float:
		if !math.IsNaN(v.Float) && !math.IsInf(v.Float, 0) {
			return AppendFloat(b, k, v.Float)
		}
	case value.Array:
		if inner, err := AppendArray(nil, k, v); err == nil {
			return append(b, inner...)
		}
	}
	return AppendJSONString(b, AppendText(nil, k, v))
}

// AppendJSONString appends s as a JSON string literal, quotes included.
// A quote or a backslash is escaped with a backslash, newline, carriage
// return and tab as \n, \r and \t, the other control characters as \u00XX;
// every other character is written as it is, and a byte that is not valid
// UTF-8 as U+FFFD.
func AppendJSONString(b, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for len(s) > 0 {
		c := s[0]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(s)
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[:size]...)
			}
			s = s[size:]
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
		s = s[1:]
	}
	return append(b, '"')
}
