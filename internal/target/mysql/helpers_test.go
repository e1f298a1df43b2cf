package mysql

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// openTarget opens a target on a new MariaDB database of t.
func openTarget(t testing.TB) *Target {
	t.Helper()
	db := testenv.CreateMySQLDB(t, "mytgt")
	tg, err := Open(context.Background(), testenv.MySQLDSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close(context.Background()) })
	return tg
}

// wantRows fails unless query returns exactly want.
func wantRows(t testing.TB, db *sql.DB, query string, want ...string) {
	t.Helper()
	testenv.WantSQLRows(t, db, query, want...)
}

// wantCode fails unless err carries code.
func wantCode(t testing.TB, err error, code errcode.Code) {
	t.Helper()
	if !errcode.Is(err, code) {
		t.Fatalf("want %s, got %v", code, err)
	}
}

// exec runs statements on the target's database, failing the test on error.
func exec(t testing.TB, tg *Target, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := tg.db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func col(name, typ string, oid uint32) chain.Column {
	return chain.Column{Name: name, Type: typ, TypeOID: oid, Encoding: chain.EncodingText}
}
