package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// SQLRows runs a query through database/sql and returns each row's columns
// joined by "|", NULL as "NULL", failing the test on error.
func SQLRows(t testing.TB, db *sql.DB, query string, args ...any) []string {
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
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for r.Next() {
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

// WantSQLRows fails the test unless query returns exactly want.
func WantSQLRows(t testing.TB, db *sql.DB, query string, want ...string) {
	t.Helper()
	got := SQLRows(t, db, query)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n got %q\nwant %q", query, got, want)
	}
}
