package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	// Tests reach the real MariaDB to build databases and read them back.
	"github.com/go-sql-driver/mysql"
)

// defaultMySQL is the MariaDB deploy/dev/services.sh leaves running.
const defaultMySQL = "mysql://root@127.0.0.1:3306/test"

// MySQLAdminDSN returns the mysql:// URL of an administrator of the test
// MariaDB (SLUICE_TEST_MYSQL overrides it).
func MySQLAdminDSN() string { return env("SLUICE_TEST_MYSQL", defaultMySQL) }

// MySQLDSN returns MySQLAdminDSN pointed at database db.
func MySQLDSN(db string) string {
	u, err := url.Parse(MySQLAdminDSN())
	if err != nil {
		panic(err)
	}
	u.Path = "/" + db
	return u.String()
}

// mysqlDriverDSN turns a mysql:// URL into the driver's own DSN.
func mysqlDriverDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr = "tcp", u.Host
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.Timeout = 5 * time.Second
	cfg.MultiStatements = true
	return cfg.FormatDSN()
}

// MySQL opens a database/sql pool on the test MariaDB's database db
// ("" for none), failing or skipping when it is not reachable.
func MySQL(t testing.TB, db string) *sql.DB {
	t.Helper()
	dsn := MySQLAdminDSN()
	if db != "" {
		dsn = MySQLDSN(db)
	}
	return MySQLAt(t, dsn)
}

// MySQLAt opens a database/sql pool on the server and database a mysql://
// URL names (a scratch server of a test's own, say), failing or skipping
// when it is not reachable; the pool closes when the test ends.
func MySQLAt(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	pool, err := sql.Open("mysql", mysqlDriverDSN(dsn))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		Missing(t, "MariaDB is not reachable at %s: %v", dsn, err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// CreateMySQLDB creates an empty MariaDB database whose name starts with
// prefix, drops it when the test ends (unless it failed and
// SLUICE_TEST_KEEP_FAILED_DBS is set), and returns its name.
func CreateMySQLDB(t testing.TB, prefix string) string {
	t.Helper()
	name := strings.ToLower(fmt.Sprintf("sluice_it_%s_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1e9))
	admin := MySQL(t, "")
	if _, err := admin.Exec("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("SLUICE_TEST_KEEP_FAILED_DBS") != "" {
			t.Logf("kept MariaDB database %s of the failed test (SLUICE_TEST_KEEP_FAILED_DBS)", name)
			return
		}
		pool, err := sql.Open("mysql", mysqlDriverDSN(MySQLAdminDSN()))
		if err != nil {
			return
		}
		defer pool.Close()
		if _, err := pool.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return name
}
