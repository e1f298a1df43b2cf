package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Opener opens the store a URL of its scheme names. It does no network I/O:
// the first request reports whether the store is reachable.
type Opener func(ctx context.Context, u *url.URL, opts Options) (Store, error)

// scheme is one registered store kind.
type scheme struct {
	form string
	open Opener
}

var registry = struct {
	sync.RWMutex
	schemes map[string]scheme
}{schemes: map[string]scheme{}}

// Register makes URLs of scheme name open with open; form is how such a URL
// is written, for messages and help ("s3://bucket[/prefix]"). Each store
// registers itself from its package's init (file:// from this package's);
// registering a scheme twice panics.
func Register(name, form string, open Opener) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.schemes[name]; dup {
		panic("blobstore: scheme " + name + " registered twice")
	}
	registry.schemes[name] = scheme{form: form, open: open}
}

// Registered reports whether URLs of scheme name can be opened.
func Registered(name string) bool {
	registry.RLock()
	defer registry.RUnlock()
	_, ok := registry.schemes[name]
	return ok
}

// Forms lists how the URL of every registered store is written, sorted by
// scheme, for messages and help text.
func Forms() string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.schemes))
	for n := range registry.schemes {
		names = append(names, n)
	}
	sort.Strings(names)
	forms := make([]string, len(names))
	for i, n := range names {
		forms[i] = registry.schemes[n].form
	}
	return strings.Join(forms, ", ")
}

func opener(name string) (Opener, error) {
	registry.RLock()
	defer registry.RUnlock()
	s, ok := registry.schemes[name]
	if !ok {
		return nil, fmt.Errorf("unsupported scheme %q", name)
	}
	return s.open, nil
}
