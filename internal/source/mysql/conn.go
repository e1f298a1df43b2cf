package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
)

// dsnForm is how a source DSN is written.
const dsnForm = "mysql://user@host:3306/database"

// conf is a parsed source DSN: the driver's connection settings, the
// database whose tables the chain holds, and the replica server ID the
// binlog is read with (0: the one the chain records, or one derived).
type conf struct {
	sql      *mysql.Config
	host     string
	port     uint16
	database string
	serverID uint32
	tls      string
	// followFailover: a server other than the chain's own may be read,
	// by GTID (OptionFollowFailover).
	followFailover bool
}

// parseDSN reads a mysql:// (or mariadb://) URL: user and password, host
// and port (3306 when missing), the database (required), and the query
// parameters server_id (the replica server ID the binlog is read with),
// tls (true, false, skip-verify or preferred), socket (a Unix socket path
// instead of the host) and timeout (a connect timeout such as 10s). Any
// other parameter is refused, so a typo is not silently ignored.
func parseDSN(dsn string) (*conf, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "mysql" && u.Scheme != "mariadb") {
		return nil, errcode.New(errcode.ConfigInvalid, "MySQL source DSN %q is not a mysql:// URL (want %s)", credentials.Redact(dsn), dsnForm)
	}
	c := &conf{sql: mysql.NewConfig()}
	if u.User != nil {
		c.sql.User = u.User.Username()
		c.sql.Passwd, _ = u.User.Password()
	}
	c.database = strings.TrimPrefix(u.Path, "/")
	if c.database == "" || strings.Contains(c.database, "/") {
		return nil, errcode.New(errcode.ConfigInvalid, "MySQL source DSN %q names no database (want %s)", credentials.Redact(dsn), dsnForm)
	}
	c.host = u.Hostname()
	if c.host == "" {
		c.host = "127.0.0.1"
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, errcode.New(errcode.ConfigInvalid, "MySQL source DSN: port %q is not a number", port)
	}
	c.port = uint16(p)
	c.sql.Net, c.sql.Addr = "tcp", net.JoinHostPort(c.host, port)
	for key, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch key {
		case "server_id":
			id, err := strconv.ParseUint(v, 10, 32)
			if err != nil || id == 0 {
				return nil, errcode.New(errcode.ConfigInvalid, "MySQL source DSN: server_id=%s is not a server ID (1 to 4294967295)", v)
			}
			c.serverID = uint32(id)
		case "tls":
			switch strings.ToLower(v) {
			case "true", "false", "skip-verify", "preferred":
				c.tls = strings.ToLower(v)
				c.sql.TLSConfig = c.tls
			default:
				return nil, errcode.New(errcode.ConfigInvalid, "MySQL source DSN: tls=%s (accepted: true, false, skip-verify, preferred)", v)
			}
		case "socket":
			c.sql.Net, c.sql.Addr = "unix", v
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, errcode.New(errcode.ConfigInvalid, "MySQL source DSN: timeout=%s is not a duration (e.g. 10s)", v)
			}
			c.sql.Timeout = d
		default:
			return nil, errcode.New(errcode.ConfigInvalid, "MySQL source DSN: unknown parameter %q (accepted: server_id, tls, socket, timeout)", key)
		}
	}
	if c.sql.Timeout == 0 {
		c.sql.Timeout = 10 * time.Second
	}
	c.sql.DBName = c.database
	c.sql.Loc = time.UTC
	c.sql.ParseTime = false
	c.sql.AllowNativePasswords = true
	// Every session reads timestamps in UTC and refuses nothing on the
	// way out; the snapshot sessions set their isolation themselves. Text
	// comes back in utf8mb4 whatever the server's defaults: a server that
	// ignores the client's character set at the handshake
	// (skip-character-set-client-handshake) would otherwise send it in its
	// own, where four-byte characters read as '?'.
	c.sql.Params = map[string]string{"time_zone": "'+00:00'"}
	for k, v := range utf8mb4Session {
		c.sql.Params[k] = v
	}
	return c, nil
}

// utf8mb4Session are the session settings under which every string
// between sluice and the server travels as utf8mb4 (the driver's handshake
// asks for it too, but a server may ignore that).
var utf8mb4Session = map[string]string{
	"character_set_client":     "utf8mb4",
	"character_set_connection": "utf8mb4",
	"character_set_results":    "utf8mb4",
}

// connect opens a pool of at most n connections to the source.
func connect(ctx context.Context, c *conf, n int) (*sql.DB, error) {
	connector, err := mysql.NewConnector(c.sql)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "MySQL source DSN")
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, classify(err, "connect to the source "+c.sql.Addr+"/"+c.database)
	}
	return db, nil
}

// MySQL error numbers the source maps to refusals.
const (
	erDBAccessDenied     = 1044
	erAccessDenied       = 1045
	erSpecificAccess     = 1227
	erTableAccessDenied  = 1142
	erColumnAccessDenied = 1143
	erNoBinaryLogging    = 1381
	erMasterFatalReading = 1236
)

// classify codes an error of the source: a missing privilege refuses, a
// failed connection is unreachable; anything else is wrapped as it is.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if _, ok := errcode.As(err); ok {
		return err
	}
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		switch me.Number {
		case erDBAccessDenied, erSpecificAccess, erTableAccessDenied, erColumnAccessDenied:
			return &errcode.Error{Code: errcode.SourcePrivileges, Message: what, Err: err, Hint: privilegesHint}
		case erAccessDenied:
			return errcode.Wrap(errcode.SourceUnreachable, err, "%s", what)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) {
		return errcode.Wrap(errcode.SourceUnreachable, err, "%s", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// privilegesHint names the grants a MySQL-family source needs.
const privilegesHint = "Grant the source user what the chain needs, e.g. GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'user'@'host' (MariaDB 10.5 and later name REPLICATION CLIENT BINLOG MONITOR; both spellings are accepted there), then run again."

// derivedServerID is the replica server ID a chain reads the binlog with
// when its DSN names none: a hash of the attempt that created the chain,
// kept above 2^30 so it stays clear of the small IDs servers are usually
// given.
func derivedServerID(seed string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(seed))
	return 1<<30 | h.Sum32()>>2
}
