// Package mysql writes a chain into a MySQL-family database (MariaDB, or
// MySQL 8 by version detection): it maps the recorded schema onto InnoDB
// tables by neutral kind (docs/mysql-target.md gives every rule), loads a
// full's row chunks, applies incrementals, and keeps the broker's position
// and apply marks in the same database, in the same InnoDB transaction as
// the rows. DDL and TRUNCATE commit implicitly on MySQL, so the target is
// a target.ImplicitCommitter: the broker commits around each schema change
// and truncate, and both are written to be idempotent.
package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/target/sqlkit"
)

func init() {
	target.Register("mysql", "mysql://user@host:3306/database", open, "mariadb")
	target.RegisterTraits("mysql", target.Traits{Describe: describe})
}

// sqlMode is the strict mode every connection runs under: a value the
// column cannot hold is an error, never a silent truncation or a zero
// date, and 0 written to an AUTO_INCREMENT column stays 0.
const sqlMode = "STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO"

// describe checks a target DSN's form without connecting and names the
// database it points at.
func describe(dsn string) (string, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return "", err
	}
	return "mysql:" + cfg.Addr + "/" + cfg.DBName, nil
}

// parseDSN reads a mysql:// (or mariadb://) URL into the driver's
// configuration: user and password, host and port (3306 when missing),
// the database (required: it holds the restored tables and the control
// tables), and the query parameters tls (true, false, skip-verify,
// preferred or a registered name), socket (a Unix socket path instead of
// the host) and timeout (a connect timeout such as 10s). Any other
// parameter is refused, so a typo is not silently ignored.
func parseDSN(dsn string) (*mysql.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "mysql" && u.Scheme != "mariadb") {
		return nil, errcode.New(errcode.ConfigInvalid, "MySQL target DSN %q is not a mysql:// URL (want mysql://user@host:3306/database)", redact(dsn))
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" || strings.Contains(cfg.DBName, "/") {
		return nil, errcode.New(errcode.ConfigInvalid, "MySQL target DSN %q names no database (want mysql://user@host:3306/database)", redact(dsn))
	}
	host := u.Hostname()
	if host == "" {
		host = "127.0.0.1"
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
	for key, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch key {
		case "tls":
			switch strings.ToLower(v) {
			case "true", "false", "skip-verify", "preferred":
				cfg.TLSConfig = strings.ToLower(v)
			default:
				return nil, errcode.New(errcode.ConfigInvalid, "MySQL target DSN: tls=%s (accepted: true, false, skip-verify, preferred)", v)
			}
		case "socket":
			cfg.Net, cfg.Addr = "unix", v
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, errcode.New(errcode.ConfigInvalid, "MySQL target DSN: timeout=%s is not a duration (e.g. 10s)", v)
			}
			cfg.Timeout = d
		default:
			return nil, errcode.New(errcode.ConfigInvalid, "MySQL target DSN: unknown parameter %q (accepted: tls, socket, timeout)", key)
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	cfg.Loc = time.UTC
	cfg.ParseTime = false
	cfg.ClientFoundRows = true // an UPDATE reports the rows it matched
	// Statements run with arguments but not prepared (the apply's batches,
	// the marks) are sent with their values in one round trip.
	cfg.InterpolateParams = true
	cfg.AllowNativePasswords = true
	// Text travels as utf8mb4 whatever the server's defaults (a server
	// started with skip-character-set-client-handshake ignores the
	// driver's handshake and would turn four-byte characters into '?').
	cfg.Params = map[string]string{
		"time_zone":                "'+00:00'",
		"sql_mode":                 "'" + sqlMode + "'",
		"foreign_key_checks":       "0",
		"character_set_client":     "utf8mb4",
		"character_set_connection": "utf8mb4",
		"character_set_results":    "utf8mb4",
		// The triggers this target creates stay quiet for its own
		// sessions (objects.go).
		applyVar: "1",
	}
	return cfg, nil
}

// redact hides a DSN's password for messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparseable DSN)"
	}
	if _, set := u.User.Password(); set {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// flavor is what the server is, read once at open.
type flavor struct {
	mariadb      bool
	major, minor int
	patch        int
	version      string
	// binlogRow is set when the server logs no statements (binlog off, or
	// in ROW format), so READ COMMITTED may be used.
	binlogRow bool
	// localInfile is set on a MariaDB server that takes LOAD DATA LOCAL
	// INFILE (local_infile on), which restores load through.
	localInfile bool
}

// aliasInsert reports whether the server takes INSERT … AS new ON
// DUPLICATE KEY UPDATE c = new.c (MySQL 8.0.19 and later), where VALUES()
// is deprecated.
func (f flavor) aliasInsert() bool {
	return !f.mariadb && (f.major > 8 || f.major == 8 && (f.minor > 0 || f.patch >= 19))
}

// collation is the binary, NO PAD collation text columns are created
// with, so keys compare as PostgreSQL compares them: byte for byte,
// case and trailing spaces included.
func (f flavor) collation() string {
	if f.mariadb {
		return "utf8mb4_nopad_bin"
	}
	return "utf8mb4_0900_bin"
}

// parseVersion reads VERSION()'s text ("10.11.6-MariaDB-0+deb12u1",
// "8.0.36").
func parseVersion(v string) flavor {
	f := flavor{version: v, mariadb: strings.Contains(strings.ToLower(v), "mariadb")}
	num := v
	if i := strings.IndexFunc(num, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		num = num[:i]
	}
	parts := strings.Split(num, ".")
	nums := []*int{&f.major, &f.minor, &f.patch}
	for i := 0; i < len(parts) && i < len(nums); i++ {
		*nums[i], _ = strconv.Atoi(parts[i])
	}
	return f
}

// Target is an open MySQL-family target: a pool of connections to one
// database. Each write runs on a connection of its own taken from the pool.
type Target struct {
	db     *sql.DB
	name   string // host:port/database, for messages
	schema string // the database
	flavor flavor
	// control is the broker's control tables on this server.
	control *sqlkit.Control
	unique  uniqueSeen
	// lockWaitSeconds, when set, is the lanes' innodb_lock_wait_timeout
	// (the server's own otherwise; tests shorten it).
	lockWaitSeconds int
}

var (
	_ target.Target            = (*Target)(nil)
	_ target.ImplicitCommitter = (*Target)(nil)
	_ target.Lane              = (*lane)(nil)
)

func open(ctx context.Context, dsn string, _ map[string]string) (target.Target, error) {
	return Open(ctx, dsn)
}

// Open connects to the MySQL-family database dsn names (see parseDSN).
// Every connection runs with time_zone '+00:00', the strict sql_mode, and
// foreign_key_checks off: replayed rows may arrive in any order between
// tables, as on a PostgreSQL subscriber.
func Open(ctx context.Context, dsn string) (*Target, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "MySQL target %s", redact(dsn))
	}
	db := sql.OpenDB(conn)
	db.SetConnMaxIdleTime(5 * time.Minute)
	t := &Target{db: db, name: cfg.Addr + "/" + cfg.DBName, schema: cfg.DBName}
	var version, binlogFormat string
	var logBin, localInfile int
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@log_bin, @@binlog_format, @@local_infile").Scan(&version, &logBin, &binlogFormat, &localInfile); err != nil {
		db.Close()
		return nil, classify(err, "connect to MySQL target "+t.name)
	}
	t.flavor = parseVersion(version)
	t.flavor.binlogRow = logBin == 0 || strings.EqualFold(binlogFormat, "ROW")
	// MySQL 8 keeps local_infile off by default and will not read a JSON
	// value from a binary stream; its loads use INSERTs.
	t.flavor.localInfile = localInfile == 1 && t.flavor.mariadb
	t.control = control(t.flavor)
	return t, nil
}

// DB is the target's connection pool.
func (t *Target) DB() *sql.DB { return t.db }

// Flavor names the server: "MariaDB 10.11.6" or "MySQL 8.0.36".
func (t *Target) Flavor() string {
	if t.flavor.mariadb {
		return fmt.Sprintf("MariaDB %d.%d.%d", t.flavor.major, t.flavor.minor, t.flavor.patch)
	}
	return fmt.Sprintf("MySQL %d.%d.%d", t.flavor.major, t.flavor.minor, t.flavor.patch)
}

// MaxLanes is 0: InnoDB takes any number of writers.
func (t *Target) MaxLanes() int { return 0 }

// CommitsImplicitly is true: MySQL commits the open transaction before
// every DDL statement and TRUNCATE.
func (t *Target) CommitsImplicitly() bool { return true }

// State keeps positions and marks in the target database.
func (t *Target) State() target.StateStore { return t.control.Store(t.db) }

// Close closes every connection of the pool.
func (t *Target) Close(context.Context) error {
	if err := t.db.Close(); err != nil {
		return fmt.Errorf("close MySQL target %s: %w", t.name, err)
	}
	return nil
}
