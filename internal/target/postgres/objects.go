package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// ApplyObjects implements target.Target on the control connection.
func (t *Target) ApplyObjects(ctx context.Context, from, to []chain.Object, o target.ObjectOptions) (target.ObjectResult, error) {
	return applyObjects(ctx, t.conn, from, to, o)
}

// objectPrefixes are the statements each kind's recorded definition may
// begin with: a definition that begins otherwise is not run. Every
// definition is also sent alone over the extended protocol, where the
// server refuses more than one statement.
var objectPrefixes = map[chain.ObjectKind][]string{
	chain.ObjectView:             {"CREATE OR REPLACE VIEW "},
	chain.ObjectMaterializedView: {"CREATE MATERIALIZED VIEW IF NOT EXISTS "},
	chain.ObjectFunction:         {"CREATE OR REPLACE FUNCTION "},
	chain.ObjectProcedure:        {"CREATE OR REPLACE PROCEDURE "},
	chain.ObjectTrigger:          {"CREATE TRIGGER ", "CREATE CONSTRAINT TRIGGER "},
	chain.ObjectRule:             {"CREATE OR REPLACE RULE "},
	chain.ObjectPolicy:           {"CREATE POLICY "},
	chain.ObjectRowSecurity:      {"ALTER TABLE "},
	chain.ObjectComment:          {"COMMENT ON "},
	chain.ObjectGrant:            {"GRANT "},
}

// inventoried are the kinds whose presence on the target ApplyObjects
// reads from its catalog, so one missing (dropped with what it depended
// on, or refused earlier) is created again even when its definition did
// not change.
var inventoried = map[chain.ObjectKind]bool{
	chain.ObjectView: true, chain.ObjectMaterializedView: true, chain.ObjectFunction: true, chain.ObjectProcedure: true,
	chain.ObjectTrigger: true, chain.ObjectRule: true, chain.ObjectPolicy: true,
}

// applyObjects moves the target's recorded schema objects from the set
// from to the set to (target.Target.applyObjects), in one transaction:
// objects only in from are dropped (IF EXISTS, in reverse order), then the
// objects of to are created in their recorded order, those whose
// definition changed replaced (CREATE OR REPLACE where PostgreSQL has it,
// a drop and a create otherwise). An object of to that the target's
// catalog lacks is created whatever from says, so running it again after a
// crash, or after an object was refused, converges. Comments and grants are
// re-run (they are idempotent), as a replaced view or routine loses its
// own. Triggers are created only where this role may set
// session_replication_role, under which the broker's apply does not fire
// them. An object the server refuses is rolled back alone and listed as
// skipped with the server's reason; a grant or policy naming a role the
// target lacks refuses the whole step (errcode.ObjectRoleMissing) unless
// o.SkipMissingRoles.
func applyObjects(ctx context.Context, conn *pgx.Conn, from, to []chain.Object, o target.ObjectOptions) (target.ObjectResult, error) {
	var r target.ObjectResult
	views := map[string]bool{}
	for _, obj := range to {
		if obj.Kind == chain.ObjectView || obj.Kind == chain.ObjectMaterializedView {
			views[obj.Schema+"."+obj.Name] = true
		}
	}
	var take []chain.Object
	for _, obj := range to {
		if why := checkObject(obj); why != "" {
			r.Skip(obj, why)
			continue
		}
		if obj.Table != "" && !views[obj.Table] && !o.Sel.Takes(obj.Table) {
			r.Skip(obj, "its table is not in the subset")
			continue
		}
		take = append(take, obj)
	}
	take, err := checkRoles(ctx, conn, take, o.SkipMissingRoles, &r)
	if err != nil {
		return r, err
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL check_function_bodies = off"); err != nil {
			return classify(err, "prepare the schema objects' transaction")
		}
		replica := true
		if err := savepoint(ctx, tx, func() error {
			_, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica")
			return err
		}); err != nil {
			replica = false
		}
		a := &objectApplier{tx: tx, r: &r, replica: replica}
		if err := a.readInventory(ctx); err != nil {
			return err
		}
		return a.apply(ctx, from, take)
	})
	if err != nil {
		return target.ObjectResult{}, err
	}
	return r, nil
}

// checkObject says why an object cannot be run on a PostgreSQL target, or
// "" when it can: its kind must be one this target knows and its
// definition must begin as that kind's statement.
func checkObject(o chain.Object) string {
	prefixes, ok := objectPrefixes[o.Kind]
	if !ok {
		return fmt.Sprintf("a PostgreSQL target has no %s objects", o.Kind)
	}
	for _, p := range prefixes {
		if strings.HasPrefix(o.Definition, p) {
			if o.Kind == chain.ObjectRowSecurity && o.Definition != rowSecurityStatement(o, true) {
				break
			}
			return ""
		}
	}
	return "its recorded definition is not a statement of its kind, so it was not run"
}

// rowSecurityStatement renders a row-security switch's statement: on for
// the one that sets it, off for the one that clears it.
func rowSecurityStatement(o chain.Object, on bool) string {
	what := map[bool]string{true: "ENABLE", false: "DISABLE"}[on]
	if o.Name == "force" {
		what = map[bool]string{true: "FORCE", false: "NO FORCE"}[on]
	}
	return "ALTER TABLE " + tableOf(o) + " " + what + " ROW LEVEL SECURITY"
}

// tableOf quotes the table an object is on.
func tableOf(o chain.Object) string {
	return ident(o.Schema, strings.TrimPrefix(o.Table, o.Schema+"."))
}

// checkRoles finds the roles the objects name that the target lacks: it
// refuses with errcode.ObjectRoleMissing, or with skip lists the objects
// that name them as skipped and returns the others.
func checkRoles(ctx context.Context, conn *pgx.Conn, objs []chain.Object, skip bool, r *target.ObjectResult) ([]chain.Object, error) {
	var names []string
	for _, o := range objs {
		for _, role := range o.Roles {
			if !slices.Contains(names, role) {
				names = append(names, role)
			}
		}
	}
	if len(names) == 0 {
		return objs, nil
	}
	rows, err := conn.Query(ctx, `SELECT r FROM unnest($1::text[]) r WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) ORDER BY r`, names)
	if err != nil {
		return nil, classify(err, "look up the roles the schema objects name")
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify(err, "look up the roles the schema objects name")
	}
	if len(missing) == 0 {
		return objs, nil
	}
	var kept []chain.Object
	var naming []string
	for _, o := range objs {
		var lacks []string
		for _, role := range o.Roles {
			if slices.Contains(missing, role) {
				lacks = append(lacks, role)
			}
		}
		if len(lacks) == 0 {
			kept = append(kept, o)
			continue
		}
		naming = append(naming, fmt.Sprintf("%s %s.%s (%s)", o.Kind, o.Schema, o.Name, strings.Join(lacks, ", ")))
		if skip {
			r.Skip(o, "role "+strings.Join(lacks, ", ")+" does not exist on the target")
		}
	}
	if skip {
		return kept, nil
	}
	return nil, errcode.New(errcode.ObjectRoleMissing, "the target has no role %s, which recorded grants and policies name: %s",
		strings.Join(missing, ", "), strings.Join(naming, "; "))
}

// objectApplier runs one ApplyObjects inside its transaction.
type objectApplier struct {
	tx      pgx.Tx
	r       *target.ObjectResult
	replica bool
	// have holds the keys (chain.Object.Key) of the inventoried objects
	// the target holds.
	have map[string]bool
}

// readInventory reads which views, routines, triggers, rules and policies
// the target holds, keyed as chain.Object.Key keys the recorded ones.
func (a *objectApplier) readInventory(ctx context.Context) error {
	rows, err := a.tx.Query(ctx, `
		SELECT CASE c.relkind WHEN 'v' THEN 'view' ELSE 'materialized_view' END || ' ' || n.nspname || '  ' || c.relname
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('v', 'm')
		UNION ALL
		SELECT CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END || ' ' || n.nspname || '  ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')'
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.prokind IN ('f', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		UNION ALL
		SELECT 'trigger ' || n.nspname || ' ' || n.nspname || '.' || c.relname || ' ' || t.tgname
		FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE NOT t.tgisinternal
		UNION ALL
		SELECT 'rule ' || n.nspname || ' ' || n.nspname || '.' || c.relname || ' ' || w.rulename
		FROM pg_rewrite w JOIN pg_class c ON c.oid = w.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace WHERE w.rulename <> '_RETURN'
		UNION ALL
		SELECT 'policy ' || n.nspname || ' ' || n.nspname || '.' || c.relname || ' ' || p.polname
		FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace`)
	if err != nil {
		return classify(err, "read the target's schema objects")
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return classify(err, "read the target's schema objects")
	}
	a.have = make(map[string]bool, len(keys))
	for _, k := range keys {
		a.have[k] = true
	}
	return nil
}

// apply drops what only from holds, then creates and replaces to's objects
// in order.
func (a *objectApplier) apply(ctx context.Context, from, to []chain.Object) error {
	prev := map[string]chain.Object{}
	for _, o := range from {
		prev[o.Key()] = o
	}
	next := map[string]bool{}
	for _, o := range to {
		next[o.Key()] = true
	}
	for i := len(from) - 1; i >= 0; i-- {
		o := from[i]
		if next[o.Key()] || checkObject(o) != "" {
			continue
		}
		if ok, err := a.run(ctx, o, func() error { return a.drop(ctx, o, false) }); err != nil {
			return err
		} else if ok {
			a.r.Dropped = target.Count(a.r.Dropped, o.Kind)
		}
	}
	for _, o := range to {
		old, known := prev[o.Key()]
		changed := known && old.Definition != o.Definition
		missing := inventoried[o.Kind] && !a.have[o.Key()]
		switch {
		case o.Kind == chain.ObjectTrigger && !a.replica:
			a.r.Skip(o, "this target's role may not set session_replication_role, so the broker's apply would fire it (GRANT SET ON PARAMETER session_replication_role to the role, or create it after the cutover)")
			continue
		case !known || missing:
			if ok, err := a.run(ctx, o, func() error { return a.create(ctx, o) }); err != nil {
				return err
			} else if ok {
				a.r.Created = target.Count(a.r.Created, o.Kind)
			}
		case changed:
			if ok, err := a.run(ctx, o, func() error { return a.replace(ctx, o, old) }); err != nil {
				return err
			} else if ok {
				a.r.Replaced = target.Count(a.r.Replaced, o.Kind)
			}
		case o.Kind == chain.ObjectComment || o.Kind == chain.ObjectGrant:
			// Unchanged, but the object they are on may have been made
			// again above: idempotent, run again.
			if _, err := a.run(ctx, o, func() error { return a.exec(ctx, o.Definition) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// run runs step for object o in a savepoint and reports whether it took:
// a statement the server refuses rolls the step back and lists o as
// skipped with the reason; a lost connection or a cancellation ends the
// whole apply.
func (a *objectApplier) run(ctx context.Context, o chain.Object, step func() error) (bool, error) {
	err := savepoint(ctx, a.tx, step)
	if err == nil {
		return true, nil
	}
	var pgErr *pgconn.PgError
	if ctx.Err() == nil && errors.As(err, &pgErr) {
		a.r.Skip(o, "the target refused it: "+pgErr.Message)
		return false, nil
	}
	return false, classify(err, fmt.Sprintf("apply %s %s", o.Kind, o.Name))
}

// savepoint runs step inside a savepoint of tx, rolled back when it fails.
func savepoint(ctx context.Context, tx pgx.Tx, step func() error) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	if err := step(); err != nil {
		_ = sp.Rollback(ctx)
		return err
	}
	return sp.Commit(ctx)
}

// exec sends one recorded or rendered statement alone over the extended
// protocol, where the server refuses a text holding more than one.
func (a *objectApplier) exec(ctx context.Context, sql string) error {
	return a.tx.Conn().PgConn().ExecParams(ctx, sql, nil, nil, nil, nil).Read().Err
}

// create creates o, which the target does not hold (or may hold, for the
// kinds whose definition says OR REPLACE or IF NOT EXISTS).
func (a *objectApplier) create(ctx context.Context, o chain.Object) error {
	switch o.Kind {
	case chain.ObjectTrigger, chain.ObjectPolicy:
		// Absent from the inventory, but a retry may meet one: made again.
		if err := a.drop(ctx, o, false); err != nil {
			return err
		}
	}
	if err := a.exec(ctx, o.Definition); err != nil {
		return err
	}
	if o.Kind == chain.ObjectMaterializedView {
		return a.exec(ctx, "REFRESH MATERIALIZED VIEW "+ident(o.Schema, o.Name))
	}
	return nil
}

// replace makes the target's o (recorded before as old) the new
// definition: OR REPLACE where the definition has it and PostgreSQL takes
// the change, otherwise a drop (with what depends on it, made again by the
// objects that follow, as the inventory is read again) and a create.
func (a *objectApplier) replace(ctx context.Context, o, old chain.Object) error {
	switch o.Kind {
	case chain.ObjectView, chain.ObjectFunction, chain.ObjectProcedure:
		err := savepoint(ctx, a.tx, func() error { return a.exec(ctx, o.Definition) })
		if err == nil {
			return nil
		}
		if err := a.drop(ctx, old, true); err != nil {
			return err
		}
		if err := a.readInventory(ctx); err != nil {
			return err
		}
		return a.exec(ctx, o.Definition)
	case chain.ObjectMaterializedView:
		if err := a.drop(ctx, old, true); err != nil {
			return err
		}
		if err := a.readInventory(ctx); err != nil {
			return err
		}
		return a.create(ctx, o)
	case chain.ObjectGrant:
		if err := a.drop(ctx, old, false); err != nil {
			return err
		}
		return a.exec(ctx, o.Definition)
	case chain.ObjectRule, chain.ObjectRowSecurity, chain.ObjectComment:
		return a.exec(ctx, o.Definition)
	}
	return a.create(ctx, o) // triggers and policies: dropped and made again
}

// drop removes o from the target if it is there; cascade also drops what
// depends on it (a replaced view's or routine's dependents, which the
// objects after it create again).
func (a *objectApplier) drop(ctx context.Context, o chain.Object, cascade bool) error {
	tail := ""
	if cascade {
		tail = " CASCADE"
	}
	switch o.Kind {
	case chain.ObjectView:
		return a.exec(ctx, "DROP VIEW IF EXISTS "+ident(o.Schema, o.Name)+tail)
	case chain.ObjectMaterializedView:
		return a.exec(ctx, "DROP MATERIALIZED VIEW IF EXISTS "+ident(o.Schema, o.Name)+tail)
	case chain.ObjectFunction, chain.ObjectProcedure:
		// The target names its own routine: the recorded name with its
		// argument list is only compared, never sent.
		var sig string
		err := a.tx.QueryRow(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			WHERE n.nspname = $1 AND p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' = $2`, o.Schema, o.Name).Scan(&sig)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		what := "FUNCTION "
		if o.Kind == chain.ObjectProcedure {
			what = "PROCEDURE "
		}
		return a.exec(ctx, "DROP "+what+sig+tail)
	case chain.ObjectTrigger:
		return a.exec(ctx, "DROP TRIGGER IF EXISTS "+ident(o.Name)+" ON "+tableOf(o))
	case chain.ObjectRule:
		return a.exec(ctx, "DROP RULE IF EXISTS "+ident(o.Name)+" ON "+tableOf(o))
	case chain.ObjectPolicy:
		return a.exec(ctx, "DROP POLICY IF EXISTS "+ident(o.Name)+" ON "+tableOf(o))
	case chain.ObjectRowSecurity:
		return a.exec(ctx, rowSecurityStatement(o, false))
	case chain.ObjectComment:
		if on, ok := commentTarget(o.Definition); ok {
			return a.exec(ctx, "COMMENT ON "+on+" IS NULL")
		}
		return nil
	case chain.ObjectGrant:
		var kind string
		err := a.tx.QueryRow(ctx, `SELECT c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
			o.Schema, strings.TrimPrefix(o.Table, o.Schema+".")).Scan(&kind)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // gone with its table
		}
		if err != nil {
			return err
		}
		on := "TABLE "
		if kind == "S" {
			on = "SEQUENCE "
		}
		grantee := "PUBLIC"
		if len(o.Roles) > 0 {
			grantee = ident(o.Roles[0])
		}
		return a.exec(ctx, "REVOKE ALL ON "+on+tableOf(o)+" FROM "+grantee)
	}
	return nil
}

// commentTarget returns what a recorded COMMENT ON statement is on (the
// text between "COMMENT ON " and " IS "), found by reading its closing
// string literal back from the end.
func commentTarget(def string) (string, bool) {
	rest, ok := strings.CutPrefix(def, "COMMENT ON ")
	if !ok || !strings.HasSuffix(rest, "'") {
		return "", false
	}
	i := len(rest) - 2
	for i >= 0 {
		if rest[i] == '\'' {
			if i > 0 && rest[i-1] == '\'' {
				i -= 2
				continue
			}
			break
		}
		i--
	}
	if i < 0 {
		return "", false
	}
	on, ok := strings.CutSuffix(strings.TrimSuffix(rest[:i], "E"), " IS ")
	return on, ok
}
