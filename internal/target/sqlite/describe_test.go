package sqlite

import (
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// The CLI checks an SQLite target's form and names it without opening it.
func TestDescribeTarget(t *testing.T) {
	traits, err := target.TraitsOf("sqlite3")
	if err != nil {
		t.Fatal(err)
	}
	if traits.MaxLanes != 1 {
		t.Errorf("an SQLite target takes %d lanes, want a single writer", traits.MaxLanes)
	}
	for dsn, want := range map[string]string{
		"/var/lib/sluice/replica.db":          "sqlite:/var/lib/sluice/replica.db",
		"sqlite:///var/lib/sluice/replica.db": "sqlite:/var/lib/sluice/replica.db",
		"file:/var/lib/sluice/replica.db":     "sqlite:/var/lib/sluice/replica.db",
	} {
		if got, err := traits.Describe(dsn); err != nil || got != want {
			t.Errorf("Describe(%q) = %q, %v; want %q", dsn, got, err, want)
		}
	}
	for _, bad := range []string{"replica.db", "", ":memory:", "/tmp/a?b.db"} {
		if _, err := traits.Describe(bad); !errcode.Is(err, errcode.ConfigInvalid) {
			t.Errorf("Describe(%q): want %s, got %v", bad, errcode.ConfigInvalid, err)
		}
	}
}
