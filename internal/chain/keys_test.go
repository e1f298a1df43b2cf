package chain

import "testing"

func TestKeyTextAndSameKey(t *testing.T) {
	v := func(s ...string) []Value {
		out := make([]Value, len(s))
		for i, x := range s {
			out[i] = Value{Kind: ValueText, Data: []byte(x)}
		}
		return out
	}
	if KeyText([]int{0, 1}, v("ab", "c")) == KeyText([]int{0, 1}, v("a", "bc")) {
		t.Error("two keys of two columns joined to one text")
	}
	if KeyText([]int{1}, v("x", "7")) != "7" {
		t.Error("a one-column key is not its value")
	}
	if !SameKey([]int{0}, v("1", "a"), v("1", "b")) || SameKey([]int{0}, v("1", "a"), v("2", "a")) {
		t.Error("SameKey")
	}
	if SameKey([]int{0}, v("1"), []Value{{Kind: ValueUnchanged}}) {
		t.Error("an unchanged key column counted as the same key")
	}
}
