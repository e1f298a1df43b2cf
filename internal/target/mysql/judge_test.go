package mysql

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The live table's side of the spec's MySQL-family key rule: some PRIMARY
// KEY or UNIQUE index of NOT NULL, non-generated columns the rows supply in
// full; a prefix index, a nullable one, one over a generated column and a
// surrogate the rows do not carry never count.
func TestProbeKeyRule(t *testing.T) {
	tg := openTarget(t)
	exec(t, tg,
		"CREATE TABLE prefixed (id VARCHAR(100) NOT NULL, v TEXT, UNIQUE KEY id_prefix (id(10)))",
		"CREATE TABLE surrogate (sid BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, b TEXT)",
		"CREATE TABLE gen (a INT NOT NULL, b INT AS (a * 2) STORED, UNIQUE KEY b_key (b))",
		"CREATE TABLE nullable (a INT NULL, b TEXT, UNIQUE KEY a_key (a))",
		"CREATE TABLE two (id INT NOT NULL PRIMARY KEY, email VARCHAR(50) NOT NULL, UNIQUE KEY email_key (email))",
		"CREATE TABLE byemail (id INT NULL, email VARCHAR(50) NOT NULL, UNIQUE KEY email_key (email))",
		"CREATE VIEW seen AS SELECT 1 AS a",
	)
	def := func(name string, cols ...string) *chain.Table {
		tb := &chain.Table{Schema: "public", Name: name}
		for _, c := range cols {
			column := col(strings.TrimSuffix(c, "*"), "integer", 23)
			if strings.HasSuffix(c, "*") {
				column.Generated = "(a * 2)"
			}
			tb.Columns = append(tb.Columns, column)
		}
		return tb
	}
	ctx := context.Background()
	conn, err := tg.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	probe := keyProbe{t: tg, conn: conn}
	for _, tc := range []struct {
		table     *chain.Table
		supplied  bool
		surrogate bool
		arbiter   string
		why       string
		refusal   string
	}{
		{table: def("prefixed", "id", "v"), why: "column prefixes"},
		{table: def("surrogate", "a", "b"), surrogate: true, why: "NOT NULL"},
		{table: def("gen", "a", "b*"), why: "NOT NULL, non-generated"},
		{table: def("nullable", "a", "b"), why: "NOT NULL"},
		{table: def("two", "id", "email"), supplied: true, arbiter: "id"},
		{table: def("byemail", "id", "email"), supplied: true, arbiter: "email"},
		{table: def("seen", "a"), refusal: "view"},
		{table: def("absent", "a")},
	} {
		t.Run(tc.table.Name, func(t *testing.T) {
			lk, err := probe.ProbeKey(ctx, tc.table.QualifiedName(), tc.table)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.refusal != "":
				if !strings.Contains(lk.KindRefusal, tc.refusal) {
					t.Fatalf("kind refusal %q, want one naming a %s", lk.KindRefusal, tc.refusal)
				}
				return
			case tc.table.Name == "absent":
				if !lk.Missing {
					t.Fatalf("%+v, want the table missing", lk)
				}
				return
			}
			if lk.Supplied != tc.supplied || lk.Surrogate != tc.surrogate {
				t.Fatalf("supplied %t surrogate %t (%s), want %t %t", lk.Supplied, lk.Surrogate, lk.Why, tc.supplied, tc.surrogate)
			}
			if tc.supplied && strings.Join(lk.Arbiter, ",") != tc.arbiter {
				t.Errorf("arbiter %v, want %s", lk.Arbiter, tc.arbiter)
			}
			if !tc.supplied && !strings.Contains(lk.Why, tc.why) {
				t.Errorf("why %q, want it to say %q", lk.Why, tc.why)
			}
		})
	}
	if !tg.multiUniqueTables()["public.two"] {
		t.Error("the probe did not note that public.two has two unique indexes")
	}
}

// A target user that may read but not create or write the control tables
// is refused before a cold start drops anything, with the marks code.
func TestColdStartRefusedWithoutMarksPrivileges(t *testing.T) {
	db := testenv.CreateMySQLDB(t, "myro")
	admin := testenv.MySQL(t, "")
	user := fmt.Sprintf("sluice_ro_%d", time.Now().UnixNano()%1e6)
	for _, s := range []string{
		"CREATE USER '" + user + "'@'%' IDENTIFIED BY 'pw'",
		"CREATE USER '" + user + "'@'localhost' IDENTIFIED BY 'pw'",
		"GRANT SELECT ON `" + db + "`.* TO '" + user + "'@'%'",
		"GRANT SELECT ON `" + db + "`.* TO '" + user + "'@'localhost'",
	} {
		if _, err := admin.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'")
		_, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'localhost'")
	})
	u, _ := url.Parse(testenv.MySQLDSN(db))
	u.User = url.UserPassword(user, "pw")
	tg, err := Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close(context.Background())
	s := &chain.Schema{Tables: []chain.Table{keyedTable()}}
	err = tg.JudgeColdStart(context.Background(), s)
	wantCode(t, err, errcode.ApplyMarksUnavailable)
	if !strings.Contains(err.Error(), marksTable) {
		t.Errorf("the refusal does not name %s: %v", marksTable, err)
	}
}

// DSNs are checked before anything connects.
func TestDSNChecked(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://h/db", "not a mysql:// URL"},
		{"mysql://root@127.0.0.1:3306", "names no database"},
		{"mysql://root@127.0.0.1/db?charset=latin1", `unknown parameter "charset"`},
		{"mysql://root@127.0.0.1/db?tls=maybe", "tls=maybe"},
		{"mysql://root@127.0.0.1/db?timeout=soon", "not a duration"},
	} {
		_, err := parseDSN(tc.dsn)
		wantCode(t, err, errcode.ConfigInvalid)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.dsn, err, tc.want)
		}
	}
	if name, err := describe("mariadb://app@db.example:3307/shop?tls=true"); err != nil || name != "mysql:db.example:3307/shop" {
		t.Errorf("describe: %q, %v", name, err)
	}
}

// Control tables an administrator created are enough: a user with only
// SELECT, INSERT, UPDATE and DELETE passes the marks judgment.
func TestMarksUsableOnTablesAnAdministratorCreated(t *testing.T) {
	tg := openTarget(t)
	if err := tg.State().EnsureControlTables(context.Background()); err != nil {
		t.Fatal(err)
	}
	admin := testenv.MySQL(t, "")
	user := fmt.Sprintf("sluice_dml_%d", time.Now().UnixNano()%1e6)
	for _, host := range []string{"%", "localhost"} {
		for _, s := range []string{
			"CREATE USER '" + user + "'@'" + host + "' IDENTIFIED BY 'pw'",
			"GRANT SELECT, INSERT, UPDATE, DELETE ON `" + tg.schema + "`.* TO '" + user + "'@'" + host + "'",
		} {
			if _, err := admin.Exec(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		t.Cleanup(func() { _, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'" + host + "'") })
	}
	u, _ := url.Parse(testenv.MySQLDSN(tg.schema))
	u.User = url.UserPassword(user, "pw")
	dml, err := Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer dml.Close(context.Background())
	if err := dml.JudgeColdStart(context.Background(), &chain.Schema{Tables: []chain.Table{keyedTable()}}); err != nil {
		t.Fatalf("a DML-only user on existing control tables: %v", err)
	}
}
