package source

import (
	"context"

	"github.com/sluicehq/sluice/internal/registry"
)

// Opener opens a source of its driver. dsn has its password resolved;
// options are the driver's options from the run's input, which the driver
// checks (an option it does not know is refused).
type Opener func(ctx context.Context, dsn string, options map[string]string) (Source, error)

// DefaultDriver is the driver of a source input that names none (every run
// recorded before drivers existed reads PostgreSQL).
const DefaultDriver = "postgres"

// Traits are what callers may know of an engine without connecting, by the
// engine name a chain records (chain.SourceInfo.Engine).
type Traits struct {
	// NotCarried names what a chain of the engine deliberately does not
	// carry from its source, for restore to report.
	NotCarried string
	// CheckDSN, when set, checks a DSN's form without connecting, so the
	// CLI refuses a malformed one before it starts a workflow.
	CheckDSN func(dsn string) error
}

var drivers = registry.New[Opener, Traits]("source", DefaultDriver)

// Register makes sources of the named driver open with open; form is how
// its DSN is written ("postgres://user@host:5432/db"), aliases are other
// names the driver answers to. Each engine registers itself from its own
// package; registering a name twice panics.
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

// Form returns how a registered driver's DSN is written ("" for a name no
// engine registered).
func Form(name string) string {
	e, _ := drivers.Lookup(name)
	return e.Form
}

// Open opens a source of the named driver ("" is DefaultDriver).
func Open(ctx context.Context, name, dsn string, options map[string]string) (Source, error) {
	e, err := drivers.Lookup(name)
	if err != nil {
		return nil, err
	}
	return e.Open(ctx, dsn, options)
}

// TraitsOf returns a driver's traits (by name or alias); a driver that
// recorded none has the zero Traits.
func TraitsOf(name string) (Traits, error) {
	e, err := drivers.Lookup(name)
	return e.Traits, err
}
