package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
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

// A target opened with OptMustExist (sluice verify's) refuses a file that
// is not there instead of creating an empty one.
func TestMustExistRefusesAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	_, err := target.Open(context.Background(), "sqlite", path, map[string]string{target.OptMustExist: "true"})
	if !errcode.Is(err, errcode.ConfigInvalid) || !strings.Contains(err.Error(), path) {
		t.Fatalf("open of a missing file with must_exist: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the refused open created %s (%v)", path, err)
	}
	tg, err := target.Open(context.Background(), "sqlite", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg.Close(context.Background())
	tg, err = target.Open(context.Background(), "sqlite", path, map[string]string{target.OptMustExist: "true"})
	if err != nil {
		t.Fatalf("open of an existing file with must_exist: %v", err)
	}
	tg.Close(context.Background())
}
