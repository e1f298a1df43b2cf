package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// A chain that needs an extension the target server cannot install is
// refused before anything is dropped: the table the replace would have
// dropped is still there, rows and all.
func TestMissingExtensionRefusedBeforeTheDrop(t *testing.T) {
	db := testenv.CreateDB(t, "noext")
	testenv.Exec(t, db, `CREATE TABLE public.keep (id int PRIMARY KEY); INSERT INTO public.keep VALUES (1)`)
	ctx := context.Background()
	conn, err := connect(ctx, testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	s := &chain.Schema{
		Tables:     []chain.Table{{Schema: "public", Name: "keep", Columns: []chain.Column{{Name: "id", Type: "integer", NotNull: true}}, PrimaryKey: []string{"id"}}},
		Extensions: []string{"citext", "sluice_no_such_extension"},
		Schemas:    []string{"public"},
	}
	for name, check := range map[string]func() error{
		"restore":    func() error { return prepare(ctx, conn, s, true) },
		"cold start": func() error { return judgeColdStart(ctx, conn, s) },
	} {
		err := check()
		e, ok := errcode.As(err)
		if !ok || e.Code != errcode.TargetExtensionMissing {
			t.Fatalf("%s: want %s, got %v", name, errcode.TargetExtensionMissing, err)
		}
		if !strings.Contains(err.Error(), `CREATE EXTENSION "sluice_no_such_extension"`) || strings.Contains(err.Error(), "citext") {
			t.Errorf("%s: the refusal names the missing extension and its command, and only it: %v", name, err)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM public.keep`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the target was touched: %d rows, %v", n, err)
	}
	var ext int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_extension WHERE extname = 'citext'`).Scan(&ext); err != nil || ext != 0 {
		t.Fatalf("no extension is created before the check passes: %d, %v", ext, err)
	}
}
