package sqlite

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/value"
)

// appendArray appends an array as the JSON text the target stores for it:
// nested JSON arrays, one level per dimension (an empty array is []), whose
// elements are null for NULL, numbers for integers and finite floats, true
// or false for booleans, and strings for everything else: the element's
// TEXT rendering (see appendScalarText), bytes in lowercase hex, and
// "NaN", "Infinity", "-Infinity" for the floats JSON has no number for.
func appendArray(b []byte, k value.Kind, v value.Value) ([]byte, error) {
	elem := value.Kind{Name: value.Other}
	if k.Elem != nil {
		elem = *k.Elem
	}
	dims := v.Dims
	if len(dims) == 0 {
		if len(v.Elems) == 0 {
			return append(b, "[]"...), nil
		}
		dims = []int{len(v.Elems)}
	}
	n := 1
	for _, d := range dims {
		n *= d
	}
	if n != len(v.Elems) {
		return nil, &refusal{shown: fmt.Sprintf("an array of dimensions %v", dims), reason: fmt.Sprintf("it holds %d elements, its dimensions call for %d", len(v.Elems), n)}
	}
	b, _ = appendDims(b, elem, dims, v.Elems)
	return b, nil
}

// appendDims appends the elements of a (sub)array of the given dimensions
// and returns the elements left after it.
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

func appendElem(b []byte, k value.Kind, v value.Value) []byte {
	if v.Null {
		return append(b, "null"...)
	}
	switch k.Name {
	case value.Int, value.Bool:
		// JSON numbers and booleans read as their text renderings.
		return appendScalarText(b, k, v)
	case value.Float:
		if !math.IsNaN(v.Float) && !math.IsInf(v.Float, 0) {
			return appendFloat(b, k, v.Float)
		}
	case value.Array:
		if inner, err := appendArray(nil, k, v); err == nil {
			return append(b, inner...)
		}
	}
	return appendJSONString(b, appendScalarText(nil, k, v))
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, everything else (invalid UTF-8 replaced by
// U+FFFD) as it is.
func appendJSONString(b []byte, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for len(s) > 0 {
		c := s[0]
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
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, size := utf8.DecodeRune(s)
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[:size]...)
			}
			s = s[size:]
			continue
		}
		s = s[1:]
	}
	return append(b, '"')
}
