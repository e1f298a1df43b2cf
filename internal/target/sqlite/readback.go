package sqlite

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/value"
)

// ReadRows reads a restored table back as neutral values, ordered by its
// first column, decoding each stored value by the rules of
// docs/sqlite-target.md: what a comparison with the source (or another
// target) normalizes by kind.
func (t *Target) ReadRows(ctx context.Context, tb *chain.Table) ([][]value.Value, error) {
	names := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		names[i] = quoteIdent(c.Name)
	}
	r, err := t.db.QueryContext(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+quoteIdent(tableName(tb))+" ORDER BY 1")
	if err != nil {
		return nil, classify(err, "read "+tableName(tb))
	}
	defer r.Close()
	var out [][]value.Value
	for r.Next() {
		raw := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := r.Scan(ptrs...); err != nil {
			return nil, classify(err, "read "+tableName(tb))
		}
		row := make([]value.Value, len(raw))
		for i, x := range raw {
			v, err := readStored(kindOf(tb.Columns[i]), x)
			if err != nil {
				return nil, fmt.Errorf("read %s.%s = %#v: %w", tb.Name, tb.Columns[i].Name, x, err)
			}
			row[i] = v
		}
		out = append(out, row)
	}
	if err := r.Err(); err != nil {
		return nil, classify(err, "read "+tableName(tb))
	}
	return out, nil
}

// readStored decodes one stored value of kind k.
func readStored(k value.Kind, x any) (value.Value, error) {
	switch v := x.(type) {
	case nil:
		return value.Value{Null: true}, nil
	case int64:
		switch k.Name {
		case value.Int:
			return value.Value{Int: v, Uint: uint64(v)}, nil
		case value.Bool:
			return value.Value{Bool: v != 0}, nil
		case value.Float:
			return value.Value{Float: float64(v)}, nil
		}
	case float64:
		if k.Name == value.Float {
			return value.Value{Float: v}, nil
		}
	case []byte:
		if k.Name == value.Bytes {
			return value.Value{Bytes: v}, nil
		}
	case string:
		return readText(k, v)
	}
	return value.Value{}, fmt.Errorf("a %T stored for kind %s", x, k.Name)
}

// readText decodes the TEXT rendering of a value of kind k.
func readText(k value.Kind, s string) (value.Value, error) {
	switch s {
	case "infinity":
		if k.Name == value.Date || k.Name == value.Timestamp || k.Name == value.TimestampTZ || k.Name == value.Interval {
			return value.Value{Infinite: 1}, nil
		}
	case "-infinity":
		if k.Name == value.Date || k.Name == value.Timestamp || k.Name == value.TimestampTZ || k.Name == value.Interval {
			return value.Value{Infinite: -1}, nil
		}
	}
	switch k.Name {
	case value.Date:
		d, err := parseDate(s)
		return value.Value{Time: d}, err
	case value.Timestamp, value.TimestampTZ:
		sep, end := " ", ""
		if k.Name == value.TimestampTZ {
			sep, end = "T", "Z"
		}
		date, clock, ok := strings.Cut(strings.TrimSuffix(s, end), sep)
		if !ok {
			return value.Value{}, fmt.Errorf("timestamp %q", s)
		}
		d, err := parseDate(date)
		if err != nil {
			return value.Value{}, err
		}
		us, err := parseClock(clock)
		return value.Value{Time: d.Add(time.Duration(us) * time.Microsecond)}, err
	case value.Time:
		clock, off := s, int32(0)
		if k.Zoned {
			i := strings.LastIndexAny(s, "+-")
			clock = s[:i]
			parts := strings.Split(s[i+1:], ":")
			for j, p := range parts {
				n, _ := strconv.Atoi(p)
				off += int32(n) * []int32{3600, 60, 1}[j]
			}
			if s[i] == '-' {
				off = -off
			}
		}
		us, err := parseClock(clock)
		return value.Value{Micros: us, Offset: off}, err
	case value.Interval:
		return value.DecodePGText(k, []byte(s))
	case value.Array:
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var tree any
		if err := dec.Decode(&tree); err != nil {
			return value.Value{}, err
		}
		elem := value.Kind{Name: value.Other}
		if k.Elem != nil {
			elem = *k.Elem
		}
		var v value.Value
		if err := readElems(elem, tree, 0, &v); err != nil {
			return value.Value{}, err
		}
		if len(v.Elems) == 0 {
			v.Dims = nil
		}
		return v, nil
	}
	return value.Value{Text: s}, nil
}

// readElems flattens a JSON array into v's elements and dimensions.
func readElems(elem value.Kind, node any, depth int, v *value.Value) error {
	list, ok := node.([]any)
	if !ok {
		return fmt.Errorf("want a JSON array at depth %d", depth)
	}
	if depth == len(v.Dims) {
		v.Dims = append(v.Dims, len(list))
	}
	for _, e := range list {
		if sub, ok := e.([]any); ok {
			if err := readElems(elem, sub, depth+1, v); err != nil {
				return err
			}
			continue
		}
		var ev value.Value
		var err error
		switch x := e.(type) {
		case nil:
			ev.Null = true
		case bool:
			ev.Bool = x
		case json.Number:
			if elem.Name == value.Int {
				ev.Int, err = x.Int64()
			} else {
				ev.Float, err = x.Float64()
			}
		case string:
			switch elem.Name {
			case value.Bytes:
				ev.Bytes, err = hex.DecodeString(x)
			case value.Float:
				ev.Float, err = strconv.ParseFloat(x, 64)
			default:
				ev, err = readText(elem, x)
			}
		}
		if err != nil {
			return err
		}
		v.Elems = append(v.Elems, ev)
	}
	return nil
}

func parseDate(s string) (time.Time, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	parts := strings.Split(s, "-")
	if len(parts) != 3 {
		return time.Time{}, fmt.Errorf("date %q", s)
	}
	var n [3]int
	for i, p := range parts {
		var err error
		if n[i], err = strconv.Atoi(p); err != nil {
			return time.Time{}, err
		}
	}
	if neg {
		n[0] = -n[0]
	}
	return time.Date(n[0], time.Month(n[1]), n[2], 0, 0, 0, 0, time.UTC), nil
}

func parseClock(s string) (int64, error) {
	var h, m, sec, frac int64
	if _, err := fmt.Sscanf(s, "%d:%d:%d.%d", &h, &m, &sec, &frac); err != nil {
		return 0, fmt.Errorf("clock %q: %w", s, err)
	}
	return h*3600e6 + m*60e6 + sec*1e6 + frac, nil
}

// TestSQLiteREALs pins what SQLite does to the REALs the rules rely on:
// it keeps infinities and the smallest subnormal, and turns a negative
// zero into 0 (which is why render refuses -0).
