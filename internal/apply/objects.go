package apply

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// ObjectGate says whether and how an apply runs the recorded schema
// objects (views, routines, triggers, …: chain.Schema.Objects) that an
// incremental changes.
type ObjectGate struct {
	// NotRun, when not empty, says why the objects are not run (the
	// chain's signature was not verified and the operator did not declare
	// the store trusted, or the target is of another engine than the
	// source); the objects an incremental changes are then listed as
	// skipped with it.
	NotRun string
	// Options are handed to the target; their Sel is the stream's subset.
	Options target.ObjectOptions
}

// ApplyObjectChange moves target t's schema objects from those of schema
// (in force before incremental m) to those m records, when m records a
// schema whose objects differ; it returns nil when they do not (or gate
// is nil). PostgreSQL writes no logical change for such objects, so the
// producer records them again at a window where they changed, and this is
// where a broker applies that. It runs once m's rows and position
// committed, and again by a retry that finds m applied: the target's apply
// converges when run twice.
func ApplyObjectChange(ctx context.Context, t target.Target, m *chain.Manifest, schema *chain.Schema, sel *target.Selection, gate *ObjectGate) (*target.ObjectResult, error) {
	if gate == nil || m.Schema == nil {
		return nil, nil
	}
	var from []chain.Object
	if schema != nil {
		from = schema.Objects
	}
	to := m.Schema.Objects
	if chain.SameObjects(from, to) {
		return nil, nil
	}
	if gate.NotRun != "" {
		var r target.ObjectResult
		r.SkipAll(ChangedObjects(from, to), gate.NotRun)
		return &r, nil
	}
	o := gate.Options
	o.Sel = sel
	r, err := t.ApplyObjects(ctx, from, to, o)
	if err != nil {
		return nil, fmt.Errorf("apply the schema objects incremental %s records: %w", m.ID, err)
	}
	slog.Info("schema objects applied", "incremental", m.ID, "created", target.Summary(r.Created),
		"replaced", target.Summary(r.Replaced), "dropped", target.Summary(r.Dropped), "skipped", len(r.Skipped))
	return &r, nil
}

// ChangedObjects lists the objects of to that from lacks or holds with
// another definition, then those only from holds.
func ChangedObjects(from, to []chain.Object) []chain.Object {
	prev := make(map[string]chain.Object, len(from))
	for _, o := range from {
		prev[o.Key()] = o
	}
	next := make(map[string]bool, len(to))
	var out []chain.Object
	for _, o := range to {
		next[o.Key()] = true
		if p, ok := prev[o.Key()]; !ok || p.Definition != o.Definition {
			out = append(out, o)
		}
	}
	for _, o := range from {
		if !next[o.Key()] {
			out = append(out, o)
		}
	}
	return out
}
