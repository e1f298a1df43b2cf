package registry

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

func TestRegistryResolvesNamesAndAliases(t *testing.T) {
	r := New[func() string, int]("target", "postgres")
	r.Register("postgres", "postgres://…", func() string { return "pg" }, "pg", "postgresql")
	r.Register("sqlite", "/path", func() string { return "sqlite" }, "sqlite3")
	r.SetTraits("sqlite", 1)
	for name, want := range map[string]string{"": "postgres", "pg": "postgres", "postgresql": "postgres", "sqlite3": "sqlite", "sqlite": "sqlite"} {
		if got, ok := r.Canonical(name); !ok || got != want {
			t.Errorf("Canonical(%q) = %q, %t; want %q", name, got, ok, want)
		}
	}
	e, err := r.Lookup("sqlite3")
	if err != nil || e.Open() != "sqlite" || e.Traits != 1 || e.Form != "/path" {
		t.Fatalf("Lookup(sqlite3) = %+v, %v", e, err)
	}
	if _, err := r.Lookup("oracle"); !errcode.Is(err, errcode.ConfigInvalid) {
		t.Fatalf("an unknown driver: %v", err)
	}
	if got := r.Drivers(); !slices.Equal(got, []string{"postgres", "sqlite"}) {
		t.Errorf("Drivers() = %v", got)
	}
	if got := r.Names(); !slices.Equal(got, []string{"pg", "postgres", "postgresql", "sqlite", "sqlite3"}) {
		t.Errorf("Names() = %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering an alias twice did not panic")
		}
	}()
	r.Register("other", "", nil, "pg")
}
