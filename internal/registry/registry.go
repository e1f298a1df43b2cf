// Package registry keeps the engines of one kind (sources, targets) by
// driver name. Each engine registers itself from its own package with an
// opener, the form of its DSN, the aliases it answers to and the traits
// callers may know without connecting; callers resolve a name or alias and
// open by it. The source and target packages each hold one Registry.
package registry

import (
	"sort"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Entry is one registered driver.
type Entry[O, T any] struct {
	// Open opens an engine of the driver.
	Open O
	// Form is how the driver's DSN is written, for messages.
	Form string
	// Traits are what callers may know of the driver without connecting.
	Traits T
}

// Registry holds the drivers of one kind. Its methods are safe for
// concurrent use.
type Registry[O, T any] struct {
	kind, defaultDriver string

	mu      sync.RWMutex
	entries map[string]Entry[O, T]
	aliases map[string]string
}

// New returns an empty registry of drivers of kind ("source", "target");
// "" names defaultDriver.
func New[O, T any](kind, defaultDriver string) *Registry[O, T] {
	return &Registry[O, T]{kind: kind, defaultDriver: defaultDriver, entries: map[string]Entry[O, T]{}, aliases: map[string]string{}}
}

// Register adds a driver; registering a name or alias twice panics (two
// engines claiming one name is a programming error).
func (r *Registry[O, T]) Register(name, form string, open O, aliases ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range append([]string{name}, aliases...) {
		_, dupDriver := r.entries[n]
		_, dupAlias := r.aliases[n]
		if dupDriver || dupAlias {
			panic(r.kind + ": driver " + n + " registered twice")
		}
	}
	r.entries[name] = Entry[O, T]{Open: open, Form: form}
	for _, a := range aliases {
		r.aliases[a] = name
	}
}

// SetTraits records a registered driver's traits.
func (r *Registry[O, T]) SetTraits(name string, t T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok {
		panic(r.kind + ": traits of unregistered driver " + name)
	}
	e.Traits = t
	r.entries[name] = e
}

// Canonical returns the registered driver a name (or alias) stands for;
// "" stands for the default driver. ok is false for a name no engine
// registered.
func (r *Registry[O, T]) Canonical(name string) (string, bool) {
	if name == "" {
		name = r.defaultDriver
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if a, ok := r.aliases[name]; ok {
		name = a
	}
	_, ok := r.entries[name]
	return name, ok
}

// Lookup returns the driver a name (or alias) stands for, or a coded
// SLUICE-E-CONFIG-INVALID naming the drivers there are.
func (r *Registry[O, T]) Lookup(name string) (Entry[O, T], error) {
	canon, ok := r.Canonical(name)
	if !ok {
		return Entry[O, T]{}, errcode.New(errcode.ConfigInvalid, "%s driver %q is not known; use one of %s", r.kind, name, strings.Join(r.Drivers(), ", "))
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.entries[canon], nil
}

// Drivers lists the registered driver names, sorted.
func (r *Registry[O, T]) Drivers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.entries, nil)
}

// Names lists every name a driver answers to (drivers and aliases), sorted.
func (r *Registry[O, T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.entries, r.aliases)
}

func sortedKeys[E any](entries map[string]E, aliases map[string]string) []string {
	names := make([]string, 0, len(entries)+len(aliases))
	for n := range entries {
		names = append(names, n)
	}
	for a := range aliases {
		names = append(names, a)
	}
	sort.Strings(names)
	return names
}
