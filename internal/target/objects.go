package target

import (
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/internal/chain"
)

// ObjectOptions says how a target applies recorded schema objects
// (chain.Object).
type ObjectOptions struct {
	// SkipMissingRoles skips a grant or policy naming a role the target
	// does not have, and says so, instead of refusing the whole apply.
	SkipMissingRoles bool
	// Definer, when not empty, replaces the recorded definer of every
	// MySQL-family view, routine, trigger and event ("user@host"); empty
	// keeps the recorded definers, refusing when one does not exist on the
	// target.
	Definer string
	// Sel, when not nil, is the subset of tables taken: a trigger, rule,
	// policy, comment or grant on a table it leaves out is skipped.
	Sel *Selection
}

// ObjectResult is what a target did with recorded schema objects.
type ObjectResult struct {
	// Created counts the objects created, by kind.
	Created map[chain.ObjectKind]int `json:"created,omitempty"`
	// Replaced counts the objects whose definition changed and that were
	// recreated or replaced, by kind.
	Replaced map[chain.ObjectKind]int `json:"replaced,omitempty"`
	// Dropped counts the objects gone from the source and dropped, by kind.
	Dropped map[chain.ObjectKind]int `json:"dropped,omitempty"`
	// Skipped lists the objects not applied, as "kind name: why".
	Skipped []string `json:"skipped,omitempty"`
}

// Count adds one object of kind to counts (allocating it when nil) and
// returns it.
func Count(counts map[chain.ObjectKind]int, kind chain.ObjectKind) map[chain.ObjectKind]int {
	if counts == nil {
		counts = map[chain.ObjectKind]int{}
	}
	counts[kind]++
	return counts
}

// Skip records an object not applied, with the reason.
func (r *ObjectResult) Skip(o chain.Object, why string) {
	r.Skipped = append(r.Skipped, fmt.Sprintf("%s %s: %s", o.Kind, objectLabel(o), why))
}

// SkipAll records every object of objs as not applied, with the reason.
func (r *ObjectResult) SkipAll(objs []chain.Object, why string) {
	for _, o := range objs {
		r.Skip(o, why)
	}
}

// Summary formats counts as "kind N" pairs in a stable order.
func Summary(counts map[chain.ObjectKind]int) []string {
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, string(k))
	}
	slices.Sort(kinds)
	out := make([]string, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%s %d", k, counts[chain.ObjectKind(k)]))
	}
	return out
}

func objectLabel(o chain.Object) string {
	name := o.Name
	if o.Schema != "" {
		name = o.Schema + "." + name
	}
	if o.Table != "" {
		name += " on " + o.Table
	}
	return name
}
