package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
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

// rows runs a query and returns each row's columns joined by "|", NULL as
// "NULL".
func rows(t testing.TB, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	r, err := db.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer r.Close()
	cols, err := r.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for r.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := r.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			switch x := v.(type) {
			case nil:
				parts[i] = "NULL"
			case []byte:
				parts[i] = string(x)
			default:
				parts[i] = fmt.Sprint(x)
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantRows fails unless query returns exactly want.
func wantRows(t testing.TB, db *sql.DB, query string, want ...string) {
	t.Helper()
	got := rows(t, db, query)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n got %q\nwant %q", query, got, want)
	}
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
