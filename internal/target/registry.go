package target

import (
	"context"

	"github.com/sluicehq/sluice/internal/registry"
)

// Opener opens a target of its driver. dsn has its password resolved;
// options are the driver's options from the run's input.
type Opener func(ctx context.Context, dsn string, options map[string]string) (Target, error)

// OptMustExist, set to "true" in a target's options, makes an engine that
// would create a missing database when it opens one (SQLite creates its
// file) refuse instead: a comparison (`sluice verify`) reads a target and
// must not conjure an empty one out of a mistyped path.
const OptMustExist = "must_exist"

// DefaultDriver is the driver of a target input that names none (every run
// recorded before drivers existed targets PostgreSQL).
const DefaultDriver = "postgres"

// Traits are what the CLI may know of a driver without connecting.
type Traits struct {
	// Describe checks a DSN's form and names the target it points at
	// ("host:5432/db", a file path) for workflow IDs and messages.
	Describe func(dsn string) (string, error)
	// MaxLanes is Target.MaxLanes of every target of the driver.
	MaxLanes int
}

var drivers = registry.New[Opener, Traits]("target", DefaultDriver)

// Register makes targets of the named driver open with open; form is how its
// DSN is written ("postgres://host/db", "/path/to/file.db"), aliases are
// other names the driver answers to. Each engine registers itself from its
// own package; registering a name twice panics.
func Register(name, form string, open Opener, aliases ...string) {
	drivers.Register(name, form, open, aliases...)
}

// RegisterTraits records a registered driver's traits.
func RegisterTraits(name string, t Traits) { drivers.SetTraits(name, t) }

// Canonical returns the registered driver a name (or alias) stands for;
// "" stands for DefaultDriver. ok is false for a name no engine registered.
func Canonical(name string) (string, bool) { return drivers.Canonical(name) }

// Drivers lists the registered driver names, sorted.
func Drivers() []string { return drivers.Drivers() }

// Names lists every name a driver answers to (drivers and aliases), sorted.
func Names() []string { return drivers.Names() }

// Open opens a target of the named driver ("" is DefaultDriver).
func Open(ctx context.Context, name, dsn string, options map[string]string) (Target, error) {
	e, err := drivers.Lookup(name)
	if err != nil {
		return nil, err
	}
	return e.Open(ctx, dsn, options)
}

// TraitsOf returns a driver's traits (by name or alias); a driver that
// recorded none describes a DSN as itself and takes any number of lanes.
func TraitsOf(name string) (Traits, error) {
	e, err := drivers.Lookup(name)
	if err != nil {
		return Traits{}, err
	}
	t := e.Traits
	if t.Describe == nil {
		t.Describe = func(dsn string) (string, error) { return dsn, nil }
	}
	return t, nil
}
