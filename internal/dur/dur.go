// Package dur holds Duration, a time.Duration whose JSON is the Go duration
// string ("2s", "5m0s"), so workflow and activity inputs read as text in the
// Temporal UI. It still decodes the older form, a JSON number of
// nanoseconds, so histories recorded before it replay.
package dur

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that encodes as its string form.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Seconds returns d in seconds.
func (d Duration) Seconds() float64 { return time.Duration(d).Seconds() }

// String returns d as time.Duration prints it ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON encodes d as a JSON string in Go duration form.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON decodes a Go duration string ("2s") or a number of
// nanoseconds (the form recorded before Duration existed); null leaves d
// as it is.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration %s: want a string such as \"2s\" or a number of nanoseconds", b)
	}
	if v, err := n.Int64(); err == nil {
		*d = Duration(v)
		return nil
	}
	f, err := n.Float64()
	if err != nil {
		return fmt.Errorf("duration %s: %w", b, err)
	}
	*d = Duration(int64(f))
	return nil
}
