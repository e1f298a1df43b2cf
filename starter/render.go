package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/dur"
)

// How `status` prints. The structs it prints (workflow query results, the
// verdict) keep their wire format; this file only decides how their values
// look to a reader, from their Go types:
//
//   - a time.Duration (or a dur.Duration) prints as a rounded duration ("2.2s", "10m0s") in text,
//     and as seconds under "<key>_seconds" in JSON;
//   - a float whose JSON key ends in "_seconds" prints as a duration under the
//     key without the suffix in text ("never" for -1), and as is in JSON;
//   - a time.Time prints as RFC 3339 in UTC; a zero time under omitempty is
//     left out, as the tag means;
//   - a nested struct or map flattens to "outer.inner" keys in text and stays
//     a nested object in JSON.
//
// Where no Go type is known (a map[string]any decoded from JSON), only the
// "_seconds" rule applies.

// rendered is a status ready to print: its fields by JSON key, each a nested
// rendered or a leaf (durationLeaf, secondsLeaf, timeLeaf, or a plain value).
type rendered map[string]any

// durationLeaf is a time.Duration field.
type durationLeaf time.Duration

// secondsLeaf is a float field counting seconds (its key ends in "_seconds").
type secondsLeaf float64

// timeLeaf is a time.Time field.
type timeLeaf time.Time

// secondsSuffix marks a key whose float value counts seconds.
const secondsSuffix = "_seconds"

// neverSeconds is the age an "_seconds" field holds when the thing it
// measures never happened.
const neverSeconds = -1

var (
	durationType = reflect.TypeFor[time.Duration]()
	// textDurationType is the duration workflow inputs carry as text.
	textDurationType = reflect.TypeFor[dur.Duration]()
	timeType         = reflect.TypeFor[time.Time]()
)

// printStatus prints a status — a struct, a map, or parts joined by merged —
// as indented JSON, or as sorted "key: value" lines.
func (c *cli) printStatus(v any, asJSON bool) error {
	r, err := render(v)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // messages and hints hold <ID>, not HTML
		if err := enc.Encode(r.machine()); err != nil {
			return fmt.Errorf("encode the status: %w", err)
		}
		return nil
	}
	for _, l := range r.lines() {
		fmt.Fprintf(c.stdout, "%-22s %s\n", l.key+":", l.value)
	}
	return nil
}

// merged joins the fields of parts into one status for printing; a later
// part's field replaces an earlier one's of the same key.
func merged(parts ...any) (rendered, error) {
	out := rendered{}
	for _, part := range parts {
		r, err := render(part)
		if err != nil {
			return nil, err
		}
		for k, v := range r {
			out[k] = v
		}
	}
	return out, nil
}

// render reads a struct or a map with string keys (or a pointer to one).
func render(v any) (rendered, error) {
	if r, ok := v.(rendered); ok {
		return r, nil
	}
	rv := indirect(reflect.ValueOf(v))
	switch {
	case rv.Kind() == reflect.Struct && rv.Type() != timeType:
		out := rendered{}
		renderStruct(rv, out)
		return out, nil
	case rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String:
		return renderMap(rv), nil
	}
	return nil, fmt.Errorf("encode the status: a status is a struct or a map, not %T", v)
}

// indirect follows pointers and interfaces; a nil one gives the zero Value.
func indirect(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

// renderStruct adds the fields of struct v to out under their JSON names,
// skipping what encoding/json would skip. Fields of an embedded struct come
// first, so the outer struct's own fields win, as in encoding/json.
func renderStruct(v reflect.Value, out rendered) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _ := jsonName(f)
		if !f.Anonymous || name != "" {
			continue
		}
		if ev := indirect(v.Field(i)); ev.Kind() == reflect.Struct && ev.Type() != timeType {
			renderStruct(ev, out)
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts := jsonName(f)
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && name == "" {
			if ev := indirect(v.Field(i)); !ev.IsValid() || (ev.Kind() == reflect.Struct && ev.Type() != timeType) {
				continue // flattened above
			}
		}
		if name == "" {
			name = f.Name
		}
		fv := v.Field(i)
		if omitted(fv, opts) {
			continue
		}
		out[name] = renderValue(name, fv)
	}
}

// jsonName returns a field's JSON name ("" when the tag names none, "-" when
// it is never encoded) and the tag's options.
func jsonName(f reflect.StructField) (name, opts string) {
	tag, ok := f.Tag.Lookup("json")
	if !ok {
		return "", ""
	}
	if tag == "-" {
		return "-", ""
	}
	name, opts, _ = strings.Cut(tag, ",")
	return name, opts
}

// omitted says whether encoding/json leaves the field out under its tag
// options, except that omitempty also leaves out a zero time.Time.
func omitted(v reflect.Value, opts string) bool {
	has := func(o string) bool {
		for _, x := range strings.Split(opts, ",") {
			if x == o {
				return true
			}
		}
		return false
	}
	if has("omitzero") && isZero(v) {
		return true
	}
	if !has("omitempty") {
		return false
	}
	switch v.Kind() {
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Struct:
		return v.Type() == timeType && v.Interface().(time.Time).IsZero()
	}
	return false
}

// isZero is omitzero's test: the value's IsZero method, or the zero value.
func isZero(v reflect.Value) bool {
	if z, ok := v.Interface().(interface{ IsZero() bool }); ok {
		if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
			return true
		}
		return z.IsZero()
	}
	return v.IsZero()
}

// renderValue turns one field (named key) into a leaf or a nested rendered.
func renderValue(key string, v reflect.Value) any {
	v = indirect(v)
	switch {
	case !v.IsValid():
		return nil
	case v.Type() == durationType || v.Type() == textDurationType:
		return durationLeaf(v.Int())
	case v.Type() == timeType:
		return timeLeaf(v.Interface().(time.Time))
	case v.Kind() == reflect.Struct:
		out := rendered{}
		renderStruct(v, out)
		return out
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		return renderMap(v)
	case (v.Kind() == reflect.Float64 || v.Kind() == reflect.Float32) && strings.HasSuffix(key, secondsSuffix):
		return secondsLeaf(v.Float())
	}
	return v.Interface()
}

func renderMap(v reflect.Value) rendered {
	out := rendered{}
	iter := v.MapRange()
	for iter.Next() {
		k := iter.Key().String()
		out[k] = renderValue(k, iter.Value())
	}
	return out
}

// machine is the JSON form: durations as seconds under "<key>_seconds",
// nested parts as nested objects, everything else as encoding/json has it.
func (r rendered) machine() map[string]any {
	out := make(map[string]any, len(r))
	for k, v := range r {
		switch v := v.(type) {
		case durationLeaf:
			out[k+secondsSuffix] = time.Duration(v).Seconds()
		case secondsLeaf:
			out[k] = float64(v)
		case timeLeaf:
			out[k] = time.Time(v)
		case rendered:
			out[k] = v.machine()
		default:
			out[k] = v
		}
	}
	return out
}

// line is one "key: value" line of the text form.
type line struct{ key, value string }

// lines is the text form, sorted by key; nested parts are flattened to
// "outer.inner" keys.
func (r rendered) lines() []line {
	var out []line
	r.flatten("", &out)
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

func (r rendered) flatten(prefix string, out *[]line) {
	for k, v := range r {
		switch v := v.(type) {
		case rendered:
			v.flatten(prefix+k+".", out)
		case secondsLeaf:
			*out = append(*out, line{prefix + strings.TrimSuffix(k, secondsSuffix), seconds(float64(v))})
		case float64:
			// From a map without Go types: the key alone says it counts seconds.
			if strings.HasSuffix(k, secondsSuffix) {
				*out = append(*out, line{prefix + strings.TrimSuffix(k, secondsSuffix), seconds(v)})
				continue
			}
			*out = append(*out, line{prefix + k, text(v)})
		default:
			*out = append(*out, line{prefix + k, text(v)})
		}
	}
}

// text is how one leaf reads.
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return "none"
	case durationLeaf:
		return duration(time.Duration(v))
	case timeLeaf:
		return time.Time(v).UTC().Format(time.RFC3339)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32)
	case string:
		return v
	case rendered:
		if b, err := json.Marshal(v.machine()); err == nil {
			return string(b)
		}
	case fmt.Stringer:
		return v.String()
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
		items := make([]string, rv.Len())
		for i := range items {
			items[i] = text(renderValue("", rv.Index(i)))
		}
		return strings.Join(items, ", ")
	}
	if rv.Kind() == reflect.Struct {
		if b, err := json.Marshal(v); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v)
}

// seconds reads a count of seconds as a duration; -1 means it never happened.
func seconds(s float64) string {
	if s == neverSeconds {
		return "never"
	}
	return duration(time.Duration(s * float64(time.Second)))
}

// duration rounds d to what a reader needs: whole seconds from a minute up,
// tenths of a second from a second up, milliseconds below.
func duration(d time.Duration) string {
	abs := d
	if abs < 0 {
		abs = -abs
	}
	switch {
	case abs >= time.Minute:
		d = d.Round(time.Second)
	case abs >= time.Second:
		d = d.Round(100 * time.Millisecond)
	case abs >= time.Millisecond:
		d = d.Round(time.Millisecond)
	default:
		d = d.Round(time.Microsecond)
	}
	return d.String()
}
