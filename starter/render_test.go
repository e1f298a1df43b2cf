package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/workflows"
)

// producerView is a producer's status as `status` prints it: the workflow's
// answer merged with the verdict.
func producerView(t *testing.T) rendered {
	t.Helper()
	st := workflows.ProducerStatus{
		Phase:      "capturing",
		StartedAt:  time.Date(2026, 11, 29, 10, 0, 0, 123_000_000, time.FixedZone("CET", 3600)),
		Windows:    7,
		CaptureLag: dur.Duration(2165172493),
		Thresholds: health.Thresholds{PollStall: 2 * time.Minute, DeliveryStall: 10 * time.Minute, NotRunning: 10 * time.Minute},
	}
	v := verdictView{Verdict: health.Idle, PollAge: 1.25, DeliveryAge: 600, ReportAge: -1}
	r, err := merged(st, v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func printed(t *testing.T, v any, asJSON bool) string {
	t.Helper()
	var out bytes.Buffer
	c := newCLI(&out, &out)
	if err := c.printStatus(v, asJSON); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestStatusTextReadsAsDurations: durations, "_seconds" ages and nested
// thresholds print as a reader reads them, never as nanoseconds or Go maps;
// times in UTC; zero times under omitempty (last_commit) are left out.
func TestStatusTextReadsAsDurations(t *testing.T) {
	got := printed(t, producerView(t), false)
	want := strings.Join([]string{
		"capture_lag:           2.2s",
		"changes:               0",
		"delivery_age:          10m0s",
		"last_report_age:       never",
		"links:                 0",
		"phase:                 capturing",
		"poll_age:              1.3s",
		"rotations:             0",
		"segment_length:        0",
		"slot_retained_bytes:   0",
		"started_at:            2026-11-29T09:00:00Z",
		"thresholds.delivery_stall: 10m0s",
		"thresholds.not_running: 10m0s",
		"thresholds.poll_stall: 2m0s",
		"transactions:          0",
		"verdict:               idle",
		"windows:               7",
	}, "\n") + "\n"
	if got != want {
		t.Fatalf("text status:\n%s\nwant:\n%s", got, want)
	}
}

// TestStatusJSONSaysItsUnits: --json keeps numbers a script can use, in
// seconds, and every duration's key says so.
func TestStatusJSONSaysItsUnits(t *testing.T) {
	got := printed(t, producerView(t), true)
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	for k, want := range map[string]any{
		"capture_lag_seconds":     2.165172493,
		"poll_age_seconds":        1.25,
		"delivery_age_seconds":    600.0,
		"last_report_age_seconds": -1.0,
		"started_at":              "2026-11-29T10:00:00.123+01:00",
		"verdict":                 "idle",
		"windows":                 7.0,
	} {
		if m[k] != want {
			t.Errorf("%s = %v (%T), want %v", k, m[k], m[k], want)
		}
	}
	th, _ := m["thresholds"].(map[string]any)
	want := map[string]any{"poll_stall_seconds": 120.0, "delivery_stall_seconds": 600.0, "not_running_seconds": 600.0}
	if len(th) != len(want) {
		t.Fatalf("thresholds = %v, want %v", m["thresholds"], want)
	}
	for k, v := range want {
		if th[k] != v {
			t.Errorf("thresholds.%s = %v, want %v", k, th[k], v)
		}
	}
	for _, k := range []string{"capture_lag", "poll_age", "last_commit"} {
		if _, ok := m[k]; ok {
			t.Errorf("JSON has %q: %s", k, got)
		}
	}
	if !strings.Contains(got, "\n  \"thresholds\": {\n    \"delivery_stall_seconds\": 600,") {
		t.Errorf("JSON is not indented with the thresholds nested:\n%s", got)
	}
}

// TestDurationRounding: how much precision each size of duration keeps.
func TestDurationRounding(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                     "0s",
		1234 * time.Microsecond:               "1ms",
		2165172493 * time.Nanosecond:          "2.2s",
		59*time.Second + 960*time.Millisecond: "1m0s",
		10 * time.Minute:                      "10m0s",
		90*time.Minute + 400*time.Millisecond: "1h30m0s",
		-1500 * time.Millisecond:              "-1.5s",
	} {
		if got := duration(d); got != want {
			t.Errorf("duration(%d) = %q, want %q", d, got, want)
		}
	}
	if got := seconds(-1); got != "never" {
		t.Errorf("seconds(-1) = %q", got)
	}
}

// TestStatusWithoutTypes: a map decoded from JSON has no Go types left;
// its "_seconds" floats still read as durations, and nested maps flatten.
func TestStatusWithoutTypes(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal([]byte(`{"poll_age_seconds": 3, "links": 2, "big": 2165172493, "names": ["a", "b"], "nested": {"x_seconds": -1}}`), &m); err != nil {
		t.Fatal(err)
	}
	got := printed(t, m, false)
	want := "big:                   2165172493\nlinks:                 2\nnames:                 a, b\nnested.x:              never\npoll_age:              3s\n"
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}
