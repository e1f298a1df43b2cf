// Package sqlite writes a chain into an SQLite database file: it maps the
// recorded schema onto SQLite tables (docs/sqlite-target.md gives every
// rule), loads a full's row chunks, applies incrementals, and keeps the
// broker's position and apply marks in the same file, in the same
// transaction as the rows. SQLite has one writer at a time, so every write
// transaction is BEGIN IMMEDIATE and a target takes a single apply lane.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

func init() {
	target.Register("sqlite", "/path/to/file.db", open, "sqlite3")
	target.RegisterTraits("sqlite", target.Traits{Describe: describe, MaxLanes: 1})
}

// describe checks a target DSN's form without opening it and names the
// file. The worker opens the path on its own host, so a relative path,
// which would depend on the worker's working directory, is refused.
func describe(dsn string) (string, error) {
	path, _, err := driverDSN(dsn)
	if err != nil {
		return "", err
	}
	plain := strings.TrimPrefix(path, "file:")
	plain = strings.TrimPrefix(plain, "//")
	if !strings.HasPrefix(plain, "/") {
		return "", errcode.New(errcode.ConfigInvalid, "SQLite target %q is not an absolute path; the worker opens it on its own host, so give the full path (e.g. /var/lib/sluice/replica.db)", dsn)
	}
	return "sqlite:" + plain, nil
}

// busyTimeoutMillis is how long a connection waits for another writer's
// lock before giving up with SQLITE_BUSY.
const busyTimeoutMillis = 10000

// Target is an open SQLite target: a pool of connections to one database
// file. Each write runs on a connection of its own taken from the pool.
type Target struct {
	db   *sql.DB
	path string
}

var (
	_ target.Target = (*Target)(nil)
	_ target.Lane   = (*lane)(nil)
)

func open(ctx context.Context, dsn string, options map[string]string) (target.Target, error) {
	if options[target.OptMustExist] == "true" {
		path, _, err := driverDSN(dsn)
		if err != nil {
			return nil, err
		}
		plain := strings.TrimPrefix(strings.TrimPrefix(path, "file:"), "//")
		if _, err := os.Stat(plain); err != nil {
			return nil, errcode.Wrap(errcode.ConfigInvalid, err, "SQLite target %s: no such database file; give the path of the file the broker or restore wrote", plain)
		}
	}
	return Open(ctx, dsn)
}

// Open opens (creating when missing) the SQLite database dsn names: a file
// path, a file: URI, or sqlite:// followed by a path. Every connection runs
// in WAL mode with synchronous=NORMAL, a busy timeout and foreign keys off
// (replayed rows may arrive in any order between tables, as on a PostgreSQL
// subscriber).
func Open(ctx context.Context, dsn string) (*Target, error) {
	path, driverDSN, err := driverDSN(dsn)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", driverDSN)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "open SQLite target %s", path)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, classify(err, "open SQLite target "+path)
	}
	return &Target{db: db, path: path}, nil
}

// driverDSN turns a target DSN into the path it names (for messages) and the
// modernc.org/sqlite DSN with the connection settings appended.
func driverDSN(dsn string) (path, out string, err error) {
	settings := url.Values{}
	for _, p := range []string{
		fmt.Sprintf("busy_timeout(%d)", busyTimeoutMillis),
		"journal_mode(WAL)",
		"synchronous(NORMAL)",
		"foreign_keys(0)",
	} {
		settings.Add("_pragma", p)
	}
	query := settings.Encode()
	switch {
	case strings.HasPrefix(dsn, "file:"):
		path = dsn
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		out = dsn + sep + query
	case strings.HasPrefix(dsn, "sqlite://"):
		path = strings.TrimPrefix(dsn, "sqlite://")
	default:
		path = dsn
	}
	if out == "" {
		switch {
		case path == "":
			return "", "", errcode.New(errcode.ConfigInvalid, "the SQLite target DSN names no file (want a path such as /var/lib/sluice/target.db)")
		case strings.ContainsAny(path, "?#"):
			return "", "", errcode.New(errcode.ConfigInvalid, "SQLite target path %q holds '?' or '#'; write it as a file: URI with those characters percent-encoded", path)
		}
		out = path + "?" + query
	}
	if strings.Contains(path, ":memory:") || strings.Contains(dsn, "mode=memory") {
		return "", "", errcode.New(errcode.ConfigInvalid, "SQLite target %q is an in-memory database; a target must be a file that outlives the run", dsn)
	}
	return path, out, nil
}

// DB is the target's connection pool.
func (t *Target) DB() *sql.DB { return t.db }

// MaxLanes is 1: SQLite takes one writer at a time.
func (t *Target) MaxLanes() int { return 1 }

// State keeps positions and marks in the database file.
func (t *Target) State() target.StateStore { return control.Store(t.db) }

// Close closes every connection of the pool.
func (t *Target) Close(context.Context) error {
	if err := t.db.Close(); err != nil {
		return fmt.Errorf("close SQLite target %s: %w", t.path, err)
	}
	return nil
}
