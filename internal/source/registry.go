package source

import (
	"context"
	"sort"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Opener opens a source of its driver. dsn has its password resolved;
// options are the driver's options from the run's input, which the driver
// checks (an option it does not know is refused).
type Opener func(ctx context.Context, dsn string, options map[string]string) (Source, error)

// DefaultDriver is the driver of a source input that names none (every run
// recorded before drivers existed reads PostgreSQL).
const DefaultDriver = "postgres"

type driver struct {
	open Opener
	// form is how the driver's DSN is written, for messages.
	form string
}

var registry = struct {
	sync.RWMutex
	drivers map[string]driver
	aliases map[string]string
}{drivers: map[string]driver{}, aliases: map[string]string{}}

// Register makes sources of the named driver open with open; form is how
// its DSN is written ("postgres://user@host:5432/db"), aliases are other
// names the driver answers to. Each engine registers itself from its own
// package; registering a name twice panics.
func Register(name, form string, open Opener, aliases ...string) {
	registry.Lock()
	defer registry.Unlock()
	for _, n := range append([]string{name}, aliases...) {
		_, dupDriver := registry.drivers[n]
		_, dupAlias := registry.aliases[n]
		if dupDriver || dupAlias {
			panic("source: driver " + n + " registered twice")
		}
	}
	registry.drivers[name] = driver{open: open, form: form}
	for _, a := range aliases {
		registry.aliases[a] = name
	}
}

// Canonical returns the registered driver a name (or alias) stands for;
// "" stands for DefaultDriver. ok is false for a name no engine registered.
func Canonical(name string) (string, bool) {
	if name == "" {
		name = DefaultDriver
	}
	registry.RLock()
	defer registry.RUnlock()
	if a, ok := registry.aliases[name]; ok {
		name = a
	}
	_, ok := registry.drivers[name]
	return name, ok
}

// Drivers lists the registered driver names, sorted.
func Drivers() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.drivers))
	for n := range registry.drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Names lists every name a driver answers to (drivers and aliases), sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.drivers)+len(registry.aliases))
	for n := range registry.drivers {
		names = append(names, n)
	}
	for a := range registry.aliases {
		names = append(names, a)
	}
	sort.Strings(names)
	return names
}

// Form returns how a registered driver's DSN is written ("" for a name no
// engine registered).
func Form(name string) string {
	canon, _ := Canonical(name)
	registry.RLock()
	defer registry.RUnlock()
	return registry.drivers[canon].form
}

// Open opens a source of the named driver ("" is DefaultDriver).
func Open(ctx context.Context, name, dsn string, options map[string]string) (Source, error) {
	canon, ok := Canonical(name)
	if !ok {
		return nil, errcode.New(errcode.ConfigInvalid, "source driver %q is not known; use one of %s", name, strings.Join(Drivers(), ", "))
	}
	registry.RLock()
	d := registry.drivers[canon]
	registry.RUnlock()
	return d.open(ctx, dsn, options)
}

// Traits are what callers may know of an engine without connecting, by the
// engine name a chain records (chain.SourceInfo.Engine).
type Traits struct {
	// NotCarried names what a chain of the engine deliberately does not
	// carry from its source, for restore to report.
	NotCarried string
}

var traits = struct {
	sync.RWMutex
	of map[string]Traits
}{of: map[string]Traits{}}

// RegisterTraits records a registered driver's traits.
func RegisterTraits(name string, t Traits) {
	traits.Lock()
	defer traits.Unlock()
	traits.of[name] = t
}

// TraitsOf returns a driver's traits (by name or alias); a driver that
// recorded none has the zero Traits.
func TraitsOf(name string) (Traits, error) {
	canon, ok := Canonical(name)
	if !ok {
		return Traits{}, errcode.New(errcode.ConfigInvalid, "source driver %q is not known; use one of %s", name, strings.Join(Drivers(), ", "))
	}
	traits.RLock()
	defer traits.RUnlock()
	return traits.of[canon], nil
}
