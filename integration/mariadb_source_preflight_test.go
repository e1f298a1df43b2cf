package integration

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// Every preflight refusal of the MySQL-family source against a real
// server, with its code, the setting or privilege named and exit status 3,
// and nothing written to the chain. The settings change on a scratch
// mariadbd of the test's own (deploy/dev/scratch-mariadb.sh), never on the
// shared server other tests use; log_bin off needs a restart of it anyway.
func TestMariaDBSourcePreflightRefusals(t *testing.T) {
	s := startScratchMariaDB(t)
	root := testenv.MySQLAt(t, s.dsn("root", ""))
	ctx := context.Background()
	exec := func(stmts ...string) {
		t.Helper()
		for _, st := range stmts {
			if _, err := root.ExecContext(ctx, st); err != nil {
				t.Fatalf("%s: %v", st, err)
			}
		}
	}
	exec(`CREATE DATABASE app CHARACTER SET utf8mb4`, `CREATE TABLE app.t (id int PRIMARY KEY, v varchar(10))`, `INSERT INTO app.t VALUES (1, 'a')`)
	pw := "IDENTIFIED BY '" + sourcePassword + "'"
	exec(
		`CREATE USER sl_norepl@'127.0.0.1' `+pw, `GRANT SELECT, BINLOG MONITOR ON *.* TO sl_norepl@'127.0.0.1'`,
		`CREATE USER sl_noclient@'127.0.0.1' `+pw, `GRANT SELECT, REPLICATION SLAVE ON *.* TO sl_noclient@'127.0.0.1'`,
		`CREATE USER sl_noselect@'127.0.0.1' `+pw, `GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO sl_noselect@'127.0.0.1'`,
		`CREATE USER sl_ok@'127.0.0.1' `+pw, `GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO sl_ok@'127.0.0.1'`,
	)
	var sourceID int
	if err := root.QueryRowContext(ctx, `SELECT @@server_id`).Scan(&sourceID); err != nil {
		t.Fatal(err)
	}

	// full runs `backup full` of app on the scratch server as user (with the
	// worker's password reference for a user other than root).
	full := func(t *testing.T, user, query string) (result, string) {
		t.Helper()
		dsn := s.dsn(user, "app") + query
		args := []string{"backup", "full", "--source-driver", "mariadb", "--source", dsn}
		if user != "root" {
			args = append(args, "--source-password-env", sourcePasswordEnv)
		}
		dir := filepath.Join(t.TempDir(), "chain")
		return sluice(t, append(args, "--target", "file://"+dir)...), dir
	}
	refused := func(t *testing.T, r result, dir, code string, names ...string) {
		t.Helper()
		if r.exit != errcode.ExitRefused || !strings.Contains(r.stderr, code) {
			t.Fatalf("want exit %d with %s, got %s", errcode.ExitRefused, code, r)
		}
		found := false
		for _, n := range names {
			found = found || strings.Contains(r.stderr, n)
		}
		if !found {
			t.Errorf("stderr names none of %q:\n%s", names, r.stderr)
		}
		if n := filesUnder(t, dir); n > 0 {
			t.Errorf("the refused full wrote %d files into the chain at %s", n, dir)
		}
	}
	// The server as the source needs it is accepted: the refusals below
	// are each one setting's.
	if r, _ := full(t, "sl_ok", ""); r.exit != 0 {
		t.Fatalf("backup full as a user with SELECT, REPLICATION SLAVE and BINLOG MONITOR on a server set as the source needs it: %s", r)
	}

	for _, tc := range []struct {
		name, setting, value, restore string
	}{
		{"binlog_format STATEMENT", "binlog_format", "STATEMENT", "ROW"},
		{"binlog_format MIXED", "binlog_format", "MIXED", "ROW"},
		{"binlog_row_image MINIMAL", "binlog_row_image", "MINIMAL", "FULL"},
		{"binlog_row_image NOBLOB", "binlog_row_image", "NOBLOB", "FULL"},
		{"binlog_row_metadata NO_LOG", "binlog_row_metadata", "NO_LOG", "FULL"},
		{"binlog_row_metadata MINIMAL", "binlog_row_metadata", "MINIMAL", "FULL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec(`SET GLOBAL ` + tc.setting + ` = '` + tc.value + `'`)
			defer exec(`SET GLOBAL ` + tc.setting + ` = '` + tc.restore + `'`)
			r, dir := full(t, "root", "")
			refused(t, r, dir, string(errcode.SourceLogConfig), tc.setting)
		})
	}

	for _, tc := range []struct {
		name, user string
		names      []string
	}{
		{"no REPLICATION SLAVE", "sl_norepl", []string{"REPLICATION SLAVE"}},
		{"no REPLICATION CLIENT", "sl_noclient", []string{"REPLICATION CLIENT", "BINLOG MONITOR"}},
		{"no SELECT", "sl_noselect", []string{"SELECT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, dir := full(t, tc.user, "")
			refused(t, r, dir, string(errcode.SourcePrivileges), tc.names...)
		})
	}

	t.Run("server_id of the source", func(t *testing.T) {
		r, dir := full(t, "root", "?server_id="+strconv.Itoa(sourceID))
		refused(t, r, dir, string(errcode.SourceServerIDClash), "server_id", strconv.Itoa(sourceID))
	})

	t.Run("server_id of a connected replica", func(t *testing.T) {
		const replicaID = 4242
		port, _ := strconv.Atoi(s.port)
		syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
			ServerID: replicaID, Flavor: gomysql.MariaDBFlavor, Host: "127.0.0.1", Port: uint16(port), User: "root",
		})
		defer syncer.Close()
		var file string
		var pos uint32
		var doDB, ignoreDB any
		if err := root.QueryRowContext(ctx, `SHOW MASTER STATUS`).Scan(&file, &pos, &doDB, &ignoreDB); err != nil {
			t.Fatal(err)
		}
		if _, err := syncer.StartSync(gomysql.Position{Name: file, Pos: pos}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the replica to register", func() bool {
			return strings.Contains(strings.Join(testenv.SQLRows(t, root, `SHOW SLAVE HOSTS`), "\n"), strconv.Itoa(replicaID))
		})
		r, dir := full(t, "root", "?server_id="+strconv.Itoa(replicaID))
		refused(t, r, dir, string(errcode.SourceServerIDClash), strconv.Itoa(replicaID))
	})

	t.Run("binlog purged", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "chain")
		src := []string{"--source-driver", "mariadb", "--source", s.dsn("root", "app"), "--target", "file://" + dir}
		mustSluice(t, append([]string{"backup", "full"}, src...)...)
		exec(`INSERT INTO app.t VALUES (2, 'b')`, `FLUSH BINARY LOGS`, `FLUSH BINARY LOGS`)
		var file string
		var pos uint32
		var doDB, ignoreDB any
		if err := root.QueryRowContext(ctx, `SHOW MASTER STATUS`).Scan(&file, &pos, &doDB, &ignoreDB); err != nil {
			t.Fatal(err)
		}
		// The server keeps a file a binlog reader still has open (the
		// replica of the case before may take a moment to be gone): purge
		// until only the current file is left.
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			exec(`PURGE BINARY LOGS TO '` + file + `'`)
			logs := testenv.SQLRows(t, root, `SHOW BINARY LOGS`)
			if len(logs) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("PURGE BINARY LOGS TO '%s' left %q; binlog readers connected:\n%s", file, logs,
					strings.Join(testenv.SQLRows(t, root, `SELECT id, user, command, time, state FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'`), "\n"))
			}
		}
		before := filesUnder(t, dir)
		r := sluice(t, append([]string{"backup", "incremental"}, src...)...)
		if r.exit != errcode.ExitRefused || !strings.Contains(r.stderr, string(errcode.SourceLogLost)) {
			t.Fatalf("want exit %d with %s after the chain's binlog was purged, got %s", errcode.ExitRefused, errcode.SourceLogLost, r)
		}
		if after := filesUnder(t, dir); after != before {
			t.Errorf("the refused incremental changed the chain: %d files before, %d after", before, after)
		}
	})

	// Last: log_bin is not dynamic, so the server restarts without it.
	t.Run("log_bin off", func(t *testing.T) {
		s.restart("--skip-log-bin")
		defer s.restart()
		r, dir := full(t, "root", "")
		refused(t, r, dir, string(errcode.SourceLogConfig), "log_bin")
	})
}

// A MySQL-family source DSN sluice could not use is refused with the usage
// status (2) and nothing written, and a literal password is never repeated.
func TestMariaDBSourceUsageRefusals(t *testing.T) {
	const password = "Lit3ral-src-pw"
	base := testenv.MySQLDSN("app")
	for _, tc := range []struct {
		name, dsn, code string
	}{
		{"unknown parameter", base + "?sslmode=disable", string(errcode.ConfigInvalid)},
		{"server_id not a number", base + "?server_id=abc", string(errcode.ConfigInvalid)},
		{"server_id zero", base + "?server_id=0", string(errcode.ConfigInvalid)},
		{"no database", "mysql://root@127.0.0.1:3306/", string(errcode.ConfigInvalid)},
		{"literal password", "mysql://root:" + password + "@127.0.0.1:3306/app", string(errcode.LiteralSecret)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "chain")
			r := sluice(t, "backup", "full", "--source-driver", "mariadb", "--source", tc.dsn, "--target", "file://"+dir)
			if r.exit != errcode.ExitUsage || !strings.Contains(r.stderr, tc.code) {
				t.Fatalf("want exit %d with %s, got %s", errcode.ExitUsage, tc.code, r)
			}
			if strings.Contains(r.stdout+r.stderr, password) {
				t.Fatalf("the output repeats the DSN's password: %s", r)
			}
			if n := filesUnder(t, dir); n > 0 {
				t.Errorf("the refused full wrote %d files into the chain", n)
			}
		})
	}
}

// filesUnder counts the files under dir (none when it does not exist).
func filesUnder(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}
