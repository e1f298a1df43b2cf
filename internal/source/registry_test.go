package source

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

// stubSource is a Source that records the DSN and options it was opened with.
type stubSource struct {
	Source
	dsn     string
	options map[string]string
}

func registerStub(t *testing.T, name string, aliases ...string) {
	t.Helper()
	if _, ok := Canonical(name); ok {
		return // registered by an earlier run of the test in this process
	}
	Register(name, name+"://host/db", func(_ context.Context, dsn string, options map[string]string) (Source, error) {
		return &stubSource{dsn: dsn, options: options}, nil
	}, aliases...)
}

func TestRegistryOpensByNameOrAlias(t *testing.T) {
	registerStub(t, "stubdb", "stub", "stub-db")
	for _, name := range []string{"stubdb", "stub", "stub-db"} {
		if canon, ok := Canonical(name); !ok || canon != "stubdb" {
			t.Errorf("Canonical(%q) = %q, %t", name, canon, ok)
		}
		src, err := Open(context.Background(), name, "stubdb://h/d", map[string]string{"k": "v"})
		if err != nil {
			t.Fatal(err)
		}
		if s := src.(*stubSource); s.dsn != "stubdb://h/d" || s.options["k"] != "v" {
			t.Errorf("opened %+v", s)
		}
	}
	if got := Form("stub"); got != "stubdb://host/db" {
		t.Errorf("Form(stub) = %q", got)
	}
	found := false
	for _, d := range Drivers() {
		found = found || d == "stubdb"
		if d == "stub" {
			t.Errorf("Drivers() lists the alias stub: %v", Drivers())
		}
	}
	if !found {
		t.Errorf("Drivers() = %v, want stubdb among them", Drivers())
	}
	names := strings.Join(Names(), " ")
	for _, n := range []string{"stubdb", "stub", "stub-db"} {
		if !strings.Contains(" "+names+" ", " "+n+" ") {
			t.Errorf("Names() = %s, want %s among them", names, n)
		}
	}
}

func TestRegistryRefusesAnUnknownDriver(t *testing.T) {
	registerStub(t, "stubdb", "stub", "stub-db")
	if canon, ok := Canonical(""); canon != DefaultDriver {
		t.Errorf(`Canonical("") = %q, %t; want the default driver`, canon, ok)
	}
	_, err := Open(context.Background(), "oracle", "oracle://db", nil)
	if !errcode.Is(err, errcode.ConfigInvalid) || !strings.Contains(err.Error(), "stubdb") {
		t.Errorf("Open(oracle): %v; want SLUICE-E-CONFIG-INVALID listing the drivers", err)
	}
	if _, err := TraitsOf("oracle"); !errcode.Is(err, errcode.ConfigInvalid) {
		t.Errorf("TraitsOf(oracle): %v", err)
	}
}

func TestRegisteringANameTwicePanics(t *testing.T) {
	registerStub(t, "stubdb", "stub", "stub-db")
	for _, name := range []string{"stubdb", "stub"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("registering %s twice did not panic", name)
				}
			}()
			Register(name, "", nil)
		}()
	}
}
