package sqlkit

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/value"
)

func TestAppendMask(t *testing.T) {
	key, n := AppendMask([]byte{'U'}, []bool{true, false, true, false, false, false, false, false, true})
	if n != 3 || string(key) != "U\x05\x01" {
		t.Fatalf("mask %q, %d set", key, n)
	}
}

func TestArbiter(t *testing.T) {
	names := []string{"id", "Email", "v"}
	fold := strings.ToLower
	if idx, ok := Arbiter(names, []string{"email", "ID"}, fold); !ok || !slices.Equal(idx, []int{1, 0}) {
		t.Errorf("arbiter %v %t", idx, ok)
	}
	if _, ok := Arbiter(names, []string{"nope"}, fold); ok {
		t.Error("an arbiter of a missing column was accepted")
	}
	if _, ok := Arbiter(names, nil, fold); ok {
		t.Error("no arbiter was accepted")
	}
}

// A column decodes text and binary values through its kind, passes its
// verbatim kinds' text as it is, and a value that does not decode is a
// refusal naming table, column and value.
func TestColumnDecoding(t *testing.T) {
	rendered := func(v value.Value) (any, error) { return v.Int, nil }
	c := Column{Kind: value.Kind{Name: value.Int, Width: 64}, OID: 20, Encoding: chain.EncodingBinary, Render: rendered}
	if got, err := c.FromChunk(binary.BigEndian.AppendUint64(nil, 42)); err != nil || got != int64(42) {
		t.Fatalf("binary int8: %v, %v", got, err)
	}
	if got, err := c.FromChunk(nil); err != nil || got != nil {
		t.Fatalf("NULL: %v, %v", got, err)
	}
	if arg, ok, err := c.FromChange("n", chain.Value{Kind: chain.ValueText, Data: []byte("-7")}); err != nil || !ok || arg != int64(-7) {
		t.Fatalf("text change: %v %t %v", arg, ok, err)
	}
	if _, ok, err := c.FromChange("n", chain.Value{Kind: chain.ValueUnchanged}); ok || err != nil {
		t.Fatalf("an unchanged value: %t %v", ok, err)
	}
	_, err := c.FromChunk([]byte{1, 2})
	err = RefuseValue("public.t", "n", "BIGINT", err, "the hint")
	if !errcode.Is(err, errcode.TargetValueRefused) || !strings.Contains(err.Error(), "table public.t, column n (BIGINT): value 0x0102") {
		t.Fatalf("refusal: %v", err)
	}
	text := Column{Kind: value.Kind{Name: value.Text}, Encoding: chain.EncodingText, Verbatim: []value.Name{value.Text}, Render: func(value.Value) (any, error) { return nil, errors.New("not called") }}
	if got, err := text.FromText([]byte("as is")); err != nil || got != "as is" {
		t.Fatalf("verbatim text: %v, %v", got, err)
	}
	if err := RefuseValue("t", "c", "T", errors.New("plain"), ""); err.Error() != "plain" {
		t.Errorf("a plain error changed: %v", err)
	}
}

func TestRefusalMessage(t *testing.T) {
	if got := (&Refusal{Shown: "NaN", Reason: "no NaN"}).Error(); got != "value NaN: no NaN" {
		t.Error(got)
	}
	if got := (&Refusal{Shown: "an array of dimensions [2]: short"}).Error(); got != "value an array of dimensions [2]: short" {
		t.Error(got)
	}
	if got := ShowText([]byte(strings.Repeat("x", 100))); !strings.HasSuffix(got, "…") || len(got) > 90 {
		t.Errorf("long text shown as %s", got)
	}
}
