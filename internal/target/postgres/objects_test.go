package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// view is a recorded view's object.
func viewObject(name, query string) chain.Object {
	return chain.Object{Kind: chain.ObjectView, Schema: "public", Name: name,
		Definition: "CREATE OR REPLACE VIEW " + ident("public", name) + " AS\n" + query}
}

func scalar(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// ApplyObjects moves a target from one recording to the next: a view whose
// columns changed is dropped with its dependent and both are made again,
// a function and a grant go, a comment is cleared; the same move run again
// (a retry after a crash) changes nothing; an object the server refuses
// is listed, not fatal; a definition that is not of its kind, or that holds
// two statements, is never run.
func TestApplyObjectsMovesAndConverges(t *testing.T) {
	ctx := context.Background()
	conn := targetDB(t, `CREATE TABLE t (id int PRIMARY KEY, v text, w int);
		DO $$ BEGIN CREATE ROLE sluice_target_objects; EXCEPTION WHEN duplicate_object THEN NULL; END $$;`)
	fn := chain.Object{Kind: chain.ObjectFunction, Schema: "public", Name: "f()",
		Definition: "CREATE OR REPLACE FUNCTION public.f() RETURNS int LANGUAGE sql AS $$SELECT 1$$"}
	grant := chain.Object{Kind: chain.ObjectGrant, Schema: "public", Name: "sluice_target_objects", Table: "public.t",
		Definition: `GRANT SELECT ON TABLE "public"."t" TO "sluice_target_objects"`, Roles: []string{"sluice_target_objects"}}
	comment := chain.Object{Kind: chain.ObjectComment, Schema: "public", Name: "TABLE public.t", Table: "public.t",
		Definition: "COMMENT ON TABLE public.t IS 'it''s t'"}
	v1 := []chain.Object{fn, viewObject("a", "SELECT id, v FROM public.t"), viewObject("b", "SELECT v FROM public.a"), comment, grant}
	r, err := applyObjects(ctx, conn, nil, v1, target.ObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(target.Summary(r.Created), ", "); got != "comment 1, function 1, grant 1, view 2" || len(r.Skipped) > 0 {
		t.Fatalf("created %s, skipped %v", got, r.Skipped)
	}
	// The next recording: a loses a column (no OR REPLACE can do that),
	// the function, the grant and the comment are gone, c is new.
	v2 := []chain.Object{viewObject("a", "SELECT id FROM public.t"), viewObject("b", "SELECT id FROM public.a"), viewObject("c", "SELECT w FROM public.t")}
	for range 2 {
		r, err = applyObjects(ctx, conn, v1, v2, target.ObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Skipped) > 0 {
			t.Fatalf("skipped %v", r.Skipped)
		}
	}
	if got := scalar(t, conn, `SELECT string_agg(viewname || ':' || definition, ' | ' ORDER BY viewname) FROM pg_views WHERE schemaname = 'public'`); !strings.Contains(got, "a: SELECT t.id") || !strings.Contains(got, "b: SELECT a.id") || !strings.Contains(got, "c: SELECT t.w") {
		t.Errorf("views after the move: %s", got)
	}
	if got := scalar(t, conn, `SELECT count(*)::text FROM pg_proc WHERE proname = 'f'`); got != "0" {
		t.Errorf("the dropped function is still there (%s)", got)
	}
	if got := scalar(t, conn, `SELECT coalesce(obj_description('public.t'::regclass, 'pg_class'), 'none') || ' ' || has_table_privilege('sluice_target_objects', 'public.t', 'SELECT')`); got != "none false" {
		t.Errorf("comment and grant after their drop: %s", got)
	}

	// Refused by the server, or not run at all.
	bad := []chain.Object{
		viewObject("d", "SELECT nope FROM public.t"),
		{Kind: chain.ObjectView, Schema: "public", Name: "e", Definition: "DROP TABLE public.t"},
		{Kind: chain.ObjectComment, Schema: "public", Name: "x", Definition: "COMMENT ON TABLE public.t IS 'x'; DROP TABLE public.t"},
	}
	r, err = applyObjects(ctx, conn, nil, bad, target.ObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Skipped) != 3 || len(r.Created) != 0 {
		t.Errorf("created %v, skipped %v; want all three skipped", r.Created, r.Skipped)
	}
	if got := scalar(t, conn, `SELECT count(*)::text FROM public.t`); got != "0" {
		t.Errorf("table t: %s", got)
	}

	// A role the target lacks.
	gone := grant
	gone.Name, gone.Roles = "sluice_no_such_role", []string{"sluice_no_such_role"}
	gone.Definition = `GRANT SELECT ON TABLE "public"."t" TO "sluice_no_such_role"`
	_, err = applyObjects(ctx, conn, nil, []chain.Object{gone, fn}, target.ObjectOptions{})
	var ce *errcode.Error
	if !errors.As(err, &ce) || ce.Code != errcode.ObjectRoleMissing || !strings.Contains(err.Error(), "sluice_no_such_role") {
		t.Errorf("a grant to a missing role: %v; want %s", err, errcode.ObjectRoleMissing)
	}
	r, err = applyObjects(ctx, conn, nil, []chain.Object{gone, fn}, target.ObjectOptions{SkipMissingRoles: true})
	if err != nil || len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0], "role sluice_no_such_role does not exist") || r.Created[chain.ObjectFunction] != 1 {
		t.Errorf("with SkipMissingRoles: %+v, %v", r, err)
	}
}
