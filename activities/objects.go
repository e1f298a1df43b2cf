package activities

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/target"
)

// FlagTrustStoreObjects is the flag by which an operator declares a store
// trusted, so that the schema objects (statements) recorded in a chain whose
// signature was not verified are run all the same.
const FlagTrustStoreObjects = "trust-store-objects"

// FlagSkipMissingRoles is the flag that skips, rather than refuses, the
// grants and policies naming roles the target lacks.
const FlagSkipMissingRoles = "skip-missing-roles"

// FlagObjectDefiner is the flag naming the account (USER@HOST, or
// CURRENT_USER) that a MySQL-family target creates every recorded view,
// routine, trigger and event as, in place of their recorded definers.
const FlagObjectDefiner = "object-definer"

// ObjectsParams say whether a reader (restore, broker) runs the schema
// objects recorded in the chain (views, routines, triggers, rules,
// policies, comments, grants: chain.Schema.Objects).
type ObjectsParams struct {
	// Trust is --trust-store-objects: run them even though the chain's
	// signature was not verified.
	Trust bool `json:"trust,omitempty"`
	// SkipMissingRoles is --skip-missing-roles: a grant or policy naming a
	// role the target lacks is skipped and listed instead of refused.
	SkipMissingRoles bool `json:"skip_missing_roles,omitempty"`
	// Definer is --object-definer: the account a MySQL-family target
	// creates every view, routine, trigger and event as ("user@host" or
	// CURRENT_USER); empty keeps the recorded definers.
	Definer string `json:"definer,omitempty"`
}

// options are the target's options for applying objects under p, limited
// to the subset sel (nil: every table).
func (p ObjectsParams) options(sel *target.Selection) target.ObjectOptions {
	return target.ObjectOptions{SkipMissingRoles: p.SkipMissingRoles, Definer: p.Definer, Sel: sel}
}

// ObjectsReport is what a reader did with the recorded schema objects.
type ObjectsReport struct {
	// Recorded counts the objects the chain records (of the subset).
	Recorded int `json:"recorded"`
	// Created, Replaced and Dropped count what the target did, by kind.
	Created  map[chain.ObjectKind]int `json:"created,omitempty"`
	Replaced map[chain.ObjectKind]int `json:"replaced,omitempty"`
	Dropped  map[chain.ObjectKind]int `json:"dropped,omitempty"`
	// Skipped lists the objects not applied, as "kind name: why".
	Skipped []string `json:"skipped,omitempty"`
	// NotRun, when set, says why no object was run; NotRunKinds counts
	// the objects so left alone, by kind.
	NotRun      string                   `json:"not_run,omitempty"`
	NotRunKinds map[chain.ObjectKind]int `json:"not_run_kinds,omitempty"`
}

// reportOf turns a target's result into a report.
func reportOf(recorded int, r *target.ObjectResult) *ObjectsReport {
	if r == nil {
		return nil
	}
	return &ObjectsReport{Recorded: recorded, Created: r.Created, Replaced: r.Replaced, Dropped: r.Dropped, Skipped: r.Skipped}
}

// objectsNotRun says why a reader does not run the objects of a chain whose
// source engine is engine on target ref: "" when it runs them, that is
// when the target is of the source's engine and the chain's signature is
// verified (the store reference requires a signature and names the key
// that checks it) or the operator trusts the store.
func objectsNotRun(store StoreRef, ref credentials.DSNRef, engine string, p ObjectsParams) string {
	driver, ok := target.Canonical(ref.Driver)
	if !ok {
		driver = ref.Driver
	}
	if engine != "" && engine != driver {
		return fmt.Sprintf("they were recorded from a %s source, and a %s target does not run another engine's statements", engine, driver)
	}
	if store.Trust.VerifyKeyFile != "" && store.Trust.RequireSignature {
		return ""
	}
	if p.Trust {
		return ""
	}
	return fmt.Sprintf("they are statements, and the chain's signature was not verified (no --verify-key-file with --require-signature); pass --%s to run them from a store you trust", FlagTrustStoreObjects)
}

// objectGate is the broker's gate for the objects of a chain of engine.
func objectGate(p BrokerParams, engine string) *apply.ObjectGate {
	return &apply.ObjectGate{
		NotRun:  objectsNotRun(p.Store, p.Target, engine, p.Objects),
		Options: p.Objects.options(nil),
	}
}

// CreateObjectsParams name the restore whose schema objects to create.
type CreateObjectsParams struct {
	TargetParams
	// Through is the last link the restore applied: the objects are those
	// of the schema in force there.
	Through string `json:"through"`
	// Objects say whether to run them.
	Objects ObjectsParams `json:"objects,omitzero"`
}

// CreateObjects creates the chain's recorded schema objects on a restored
// target, after its tables, keys, rows and incrementals: those of the
// schema in force at the last link restored, limited to the subset. They
// are run only on a target of the source's engine, and only from a chain
// whose signature was verified or a store the operator declared trusted;
// otherwise the report says why none was run. Running it again converges
// (target.Target.ApplyObjects).
func (a *Activities) CreateObjects(ctx context.Context, p CreateObjectsParams) (ObjectsReport, error) {
	defer a.heartbeat(ctx, nil).stop()
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return ObjectsReport{}, a.temporalError(err)
	}
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return ObjectsReport{}, a.temporalError(err)
	}
	schema, err := ch.SchemaAt(ctx, cat, p.Through)
	if err != nil {
		return ObjectsReport{}, a.temporalError(err)
	}
	rep := ObjectsReport{Recorded: len(schema.Objects)}
	if len(schema.Objects) == 0 {
		return rep, nil
	}
	if why := objectsNotRun(p.Store, p.Target, cat.Source.Engine, p.Objects); why != "" {
		rep.NotRun = why
		for _, o := range schema.Objects {
			rep.NotRunKinds = target.Count(rep.NotRunKinds, o.Kind)
		}
		return rep, nil
	}
	sel, err := p.Subset.Select(schema)
	if err != nil {
		return ObjectsReport{}, a.temporalError(err)
	}
	t, err := openTarget(ctx, p.Target)
	if err != nil {
		return ObjectsReport{}, a.temporalError(err)
	}
	defer t.Close(context.Background())
	r, err := t.ApplyObjects(ctx, nil, schema.Objects, p.Objects.options(sel))
	if err != nil {
		return ObjectsReport{}, a.temporalError(err)
	}
	return *reportOf(len(schema.Objects), &r), nil
}
