package portable

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/value"
)

// ParseText reads s, the text form of a non-NULL value of kind k as
// AppendText writes it (and, for an array kind, the JSON AppendArray
// writes), back into the neutral value it was written from. Text that is
// not in the kind's form is an error; decimals and the kinds kept as text
// (text, uuid, json, enum, other) are taken as they are.
func ParseText(k value.Kind, s string) (value.Value, error) {
	switch k.Name {
	case value.Date, value.Timestamp, value.TimestampTZ, value.Interval:
		switch s {
		case "infinity":
			return value.Value{Infinite: 1}, nil
		case "-infinity":
			return value.Value{Infinite: -1}, nil
		}
	}
	switch k.Name {
	case value.Date:
		d, err := ParseDate(s)
		if err != nil {
			return value.Value{}, err
		}
		return value.Value{Time: d}, nil
	case value.Timestamp, value.TimestampTZ:
		t, err := parseTimestamp(k.Name == value.TimestampTZ, s)
		if err != nil {
			return value.Value{}, err
		}
		return value.Value{Time: t}, nil
	case value.Time:
		return parseTime(k, s)
	case value.Interval:
		return value.DecodePGText(k, []byte(s))
	case value.Int:
		if k.Unsigned {
			n, err := strconv.ParseUint(s, 10, value.IntBits(k))
			if err != nil {
				return value.Value{}, fmt.Errorf("unsigned integer %q: %w", s, errors.Unwrap(err))
			}
			return value.Value{Uint: n}, nil
		}
		n, err := strconv.ParseInt(s, 10, value.IntBits(k))
		if err != nil {
			return value.Value{}, fmt.Errorf("integer %q: %w", s, errors.Unwrap(err))
		}
		return value.Value{Int: n}, nil
	case value.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return value.Value{}, fmt.Errorf("boolean %q: %w", s, errors.Unwrap(err))
		}
		return value.Value{Bool: b}, nil
	case value.Float:
		f, err := strconv.ParseFloat(s, floatBits(k))
		if err != nil {
			return value.Value{}, fmt.Errorf("float %q: %w", s, errors.Unwrap(err))
		}
		return value.Value{Float: f}, nil
	case value.Bytes:
		b, err := hex.DecodeString(s)
		if err != nil {
			return value.Value{}, fmt.Errorf("hex bytes %q: %w", s, err)
		}
		if b == nil {
			b = []byte{} // empty, not NULL
		}
		return value.Value{Bytes: b}, nil
	case value.Array:
		return parseArray(k, s)
	}
	return value.Value{Text: s}, nil
}

// parseTimestamp reads a timestamp as AppendText writes it: the date and
// the clock apart by a space, or, with zone, by a T and followed by Z.
func parseTimestamp(zoned bool, s string) (time.Time, error) {
	rest, sep := s, " "
	if zoned {
		rest, sep = strings.TrimSuffix(s, "Z"), "T"
	}
	date, clock, ok := strings.Cut(rest, sep)
	if !ok {
		return time.Time{}, fmt.Errorf("timestamp %q", s)
	}
	d, err := ParseDate(date)
	if err != nil {
		return time.Time{}, err
	}
	us, err := ParseClock(clock)
	if err != nil {
		return time.Time{}, err
	}
	return d.Add(time.Duration(us) * time.Microsecond), nil
}

// parseTime reads a time of day of kind k, with its zone offset when k is
// zoned.
func parseTime(k value.Kind, s string) (value.Value, error) {
	clock, off := s, int32(0)
	if k.Zoned {
		i := strings.LastIndexAny(s, "+-")
		if i < 0 {
			return value.Value{}, fmt.Errorf("time with zone %q: no offset", s)
		}
		var err error
		if off, err = parseOffset(s[i:]); err != nil {
			return value.Value{}, fmt.Errorf("time with zone %q: %w", s, err)
		}
		clock = s[:i]
	}
	us, err := ParseClock(clock)
	if err != nil {
		return value.Value{}, err
	}
	return value.Value{Micros: us, Offset: off}, nil
}

// parseOffset reads a zone offset as AppendOffset writes it (a sign, then
// hours, minutes and optionally seconds apart by colons) into seconds east
// of UTC.
func parseOffset(s string) (int32, error) {
	parts := strings.Split(s[1:], ":")
	if len(parts) > 3 {
		return 0, errors.New("an offset of more than hours, minutes and seconds")
	}
	var off int32
	for i, p := range parts {
		n, ok := smallNumber(p, 2)
		if !ok || (i > 0 && n > 59) {
			return 0, fmt.Errorf("offset %q", s)
		}
		off += int32(n) * [...]int32{3600, 60, 1}[i]
	}
	if s[0] == '-' {
		off = -off
	}
	return off, nil
}

// smallNumber reads s, from one to most decimal digits and nothing else.
func smallNumber(s string, most int) (int, bool) {
	if len(s) == 0 || len(s) > most {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// ParseDate reads a date as AppendDate writes it, YYYY-MM-DD with the
// astronomical year, a leading - for a year before 0000 (1 BC) and an
// optional + before a year past 9999, into UTC midnight of that day. A
// month or day that does not exist is an error.
func ParseDate(s string) (time.Time, error) {
	rest, neg := s, false
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		rest, neg = rest[1:], rest[0] == '-'
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 {
		return time.Time{}, fmt.Errorf("date %q", s)
	}
	year, okY := smallNumber(parts[0], 9)
	month, okM := smallNumber(parts[1], 2)
	day, okD := smallNumber(parts[2], 2)
	if !okY || !okM || !okD {
		return time.Time{}, fmt.Errorf("date %q", s)
	}
	if neg {
		year = -year
	}
	t := time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC)
	if t.Month() != time.Month(month) || t.Day() != day {
		return time.Time{}, fmt.Errorf("date %q: no such day", s)
	}
	return t, nil
}

// ParseClock reads a time of day as AppendClock writes it,
// HH:MM:SS.ffffff, into microseconds since midnight. The fraction may
// have fewer digits than six, or be left out with its point; the day ends
// at 24:00:00, which is read too.
func ParseClock(s string) (int64, error) {
	hms, frac, hasFrac := strings.Cut(s, ".")
	parts := strings.Split(hms, ":")
	if len(parts) != 3 {
		return 0, fmt.Errorf("clock %q", s)
	}
	h, okH := smallNumber(parts[0], 2)
	m, okM := smallNumber(parts[1], 2)
	sec, okS := smallNumber(parts[2], 2)
	if !okH || !okM || !okS || m > 59 || sec > 59 {
		return 0, fmt.Errorf("clock %q", s)
	}
	us := int64(h)*3600e6 + int64(m)*60e6 + int64(sec)*1e6
	if hasFrac {
		f, ok := smallNumber(frac, 6)
		if !ok {
			return 0, fmt.Errorf("clock %q: a fraction of one to six digits", s)
		}
		for i := len(frac); i < 6; i++ {
			f *= 10
		}
		us += int64(f)
	}
	if us > 24*3600e6 {
		return 0, fmt.Errorf("clock %q: past the end of the day", s)
	}
	return us, nil
}

// parseArray reads an array of kind k from the JSON AppendArray writes.
// The JSON must be a rectangular nesting of arrays: every array at one
// depth as long as the others, elements only at the deepest.
func parseArray(k value.Kind, s string) (value.Value, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return value.Value{}, fmt.Errorf("array JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return value.Value{}, errors.New("array JSON: text after the array")
	}
	// The first element at each depth gives that dimension's length.
	var dims []int
	for node := tree; ; {
		list, ok := node.([]any)
		if !ok {
			break
		}
		dims = append(dims, len(list))
		if len(list) == 0 {
			break
		}
		node = list[0]
	}
	if len(dims) == 0 {
		return value.Value{}, errors.New("array JSON: want a JSON array")
	}
	var v value.Value
	if err := readElems(elemKind(k), tree, dims, 0, &v.Elems); err != nil {
		return value.Value{}, err
	}
	if len(v.Elems) > 0 {
		v.Dims = dims
	}
	return v, nil
}

// readElems appends to elems the elements of node, a JSON (sub)array at
// the given depth of an array of dimensions dims.
func readElems(elem value.Kind, node any, dims []int, depth int, elems *[]value.Value) error {
	list, ok := node.([]any)
	if !ok || len(list) != dims[depth] {
		return fmt.Errorf("array JSON: want an array of %d at depth %d", dims[depth], depth)
	}
	for _, e := range list {
		if depth+1 < len(dims) {
			if err := readElems(elem, e, dims, depth+1, elems); err != nil {
				return err
			}
			continue
		}
		ev, err := readElem(elem, e)
		if err != nil {
			return err
		}
		*elems = append(*elems, ev)
	}
	return nil
}

// readElem reads one array element of kind elem from its JSON: null, or
// the element's text form as a number, a boolean or a string.
func readElem(elem value.Kind, e any) (value.Value, error) {
	switch x := e.(type) {
	case nil:
		return value.Value{Null: true}, nil
	case bool:
		return ParseText(elem, strconv.FormatBool(x))
	case json.Number:
		return ParseText(elem, x.String())
	case string:
		return ParseText(elem, x)
	}
	return value.Value{}, fmt.Errorf("array JSON: a %T where an element is", e)
}
