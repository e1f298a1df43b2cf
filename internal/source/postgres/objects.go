package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
)

// userNamespace is a SQL condition on pg_namespace n: a schema the
// application made (not the catalogs, TOAST or temporary schemas).
const userNamespace = `n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'`

// notMember is a SQL condition: the object oid of catalog is no
// extension's (the extension recreates its own objects).
func notMember(catalog, oid string) string {
	return `NOT EXISTS (SELECT 1 FROM pg_depend x WHERE x.classid = '` + catalog + `'::regclass AND x.objid = ` + oid + ` AND x.deptype = 'e')`
}

// objectNode is a recorded object while the reader orders them: its
// catalog identity ("c:oid" for a relation, "p:oid" for a routine) and
// those of the objects it needs first.
type objectNode struct {
	obj  chain.Object
	id   string
	deps []string
}

// carriedTables is what the chain holds of the tables: their qualified
// names and, for each, its recorded columns. An object on a table or
// column the chain does not hold (left out by a filter) is not recorded.
type carriedTables map[string]map[string]bool

func newCarriedTables(tables []chain.Table) carriedTables {
	c := carriedTables{}
	for _, t := range tables {
		cols := map[string]bool{}
		for _, col := range t.Columns {
			cols[col.Name] = true
		}
		c[t.QualifiedName()] = cols
	}
	return c
}

// readObjects records the source's schema objects other than tables,
// types and sequences, in the order a target creates them: routines,
// views and materialized views each after what it depends on (pg_depend),
// then triggers, rules, row-level security switches, policies, comments
// and grants. Every definition is the server's own deparse (pg_get_viewdef,
// pg_get_functiondef, pg_get_triggerdef, pg_get_ruledef, pg_get_expr);
// objects on tables the chain does not hold, and views built on them, are
// left out. The session must have an empty search_path so every name
// comes back qualified.
func readObjects(ctx context.Context, q querier, tables []chain.Table) ([]chain.Object, error) {
	carried := newCarriedTables(tables)
	relkinds, err := readRelkinds(ctx, q)
	if err != nil {
		return nil, err
	}
	// takes reports whether an object on relation rel ("schema.name") can
	// be recorded: a table must be one the chain holds.
	takes := func(rel string) bool {
		switch relkinds[rel] {
		case "r", "p", "f":
			return carried[rel] != nil
		}
		return true
	}
	nodes, err := readRoutines(ctx, q)
	if err != nil {
		return nil, err
	}
	views, err := readViews(ctx, q, relkinds, carried)
	if err != nil {
		return nil, err
	}
	nodes = append(nodes, views...)
	out := orderNodes(nodes)
	viewOK := map[string]bool{}
	for _, o := range out {
		if o.Kind == chain.ObjectView || o.Kind == chain.ObjectMaterializedView {
			viewOK[o.Schema+"."+o.Name] = true
		}
	}
	// A relation of another kind than a table must have been recorded
	// itself (a view left out takes its triggers and rules with it).
	onRelation := func(rel string) bool {
		switch relkinds[rel] {
		case "v", "m":
			return viewOK[rel]
		}
		return takes(rel)
	}
	for _, read := range []func(context.Context, querier) ([]chain.Object, error){readTriggers, readRules, readRowSecurity, readPolicies} {
		objs, err := read(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if onRelation(o.Table) {
				out = append(out, o)
			}
		}
	}
	comments, err := readComments(ctx, q, onRelation, carried, relkinds)
	if err != nil {
		return nil, err
	}
	out = append(out, comments...)
	grants, err := readGrants(ctx, q, onRelation, carried, relkinds)
	if err != nil {
		return nil, err
	}
	return append(out, grants...), nil
}

// readRelkinds maps every relation of the application's schemas to its
// kind (pg_class.relkind).
func readRelkinds(ctx context.Context, q querier) (map[string]string, error) {
	rows, err := q.Query(ctx, `
		SELECT n.nspname || '.' || c.relname, c.relkind::text
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE `+userNamespace)
	if err != nil {
		return nil, fmt.Errorf("list relations: %w", err)
	}
	out := map[string]string{}
	for rows.Next() {
		var name, kind string
		if err := rows.Scan(&name, &kind); err != nil {
			return nil, fmt.Errorf("list relations: %w", err)
		}
		out[name] = kind
	}
	return out, rows.Err()
}

// readRoutines reads the functions and procedures (not aggregates or
// window functions), with the relations and routines a SQL-standard body
// depends on.
func readRoutines(ctx context.Context, q querier) ([]objectNode, error) {
	rows, err := q.Query(ctx, `
		SELECT p.oid, n.nspname, p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
		       p.prokind::text, pg_get_functiondef(p.oid),
		       coalesce((SELECT array_agg(DISTINCT CASE WHEN d.refclassid = 'pg_proc'::regclass THEN 'p:' || d.refobjid
		                                  WHEN d.refclassid = 'pg_type'::regclass THEN 'c:' || t.typrelid
		                                  ELSE 'c:' || d.refobjid END)
		                 FROM pg_depend d LEFT JOIN pg_type t ON d.refclassid = 'pg_type'::regclass AND t.oid = d.refobjid
		                 WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'n'
		                   AND (d.refclassid IN ('pg_class'::regclass, 'pg_proc'::regclass) OR coalesce(t.typrelid, 0) <> 0)), '{}')
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.prokind IN ('f', 'p') AND `+userNamespace+` AND `+notMember("pg_proc", "p.oid")+`
		ORDER BY n.nspname, 3`)
	if err != nil {
		return nil, fmt.Errorf("read functions: %w", err)
	}
	var out []objectNode
	for rows.Next() {
		var oid uint32
		var n objectNode
		var kind, def string
		if err := rows.Scan(&oid, &n.obj.Schema, &n.obj.Name, &kind, &def, &n.deps); err != nil {
			return nil, fmt.Errorf("read functions: %w", err)
		}
		n.obj.Kind = chain.ObjectFunction
		if kind == "p" {
			n.obj.Kind = chain.ObjectProcedure
		}
		n.obj.Definition = strings.TrimSpace(def)
		n.id = fmt.Sprintf("p:%d", oid)
		out = append(out, n)
	}
	return out, rows.Err()
}

// readViews reads the views and materialized views, with the relations and
// routines each one's query uses. A view built (directly or through other
// views) on a table the chain does not hold is left out.
func readViews(ctx context.Context, q querier, relkinds map[string]string, carried carriedTables) ([]objectNode, error) {
	rows, err := q.Query(ctx, `
		SELECT c.oid, n.nspname, c.relname, c.relkind::text, coalesce(array_to_string(c.reloptions, ', '), ''),
		       pg_get_viewdef(c.oid),
		       coalesce((SELECT array_agg(DISTINCT CASE WHEN d.refclassid = 'pg_proc'::regclass THEN 'p:' || d.refobjid ELSE 'c:' || d.refobjid END)
		                 FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
		                 WHERE r.ev_class = c.oid AND r.rulename = '_RETURN' AND d.refobjid <> c.oid
		                   AND d.refclassid IN ('pg_class'::regclass, 'pg_proc'::regclass)), '{}'),
		       coalesce((SELECT array_agg(DISTINCT rn.nspname || '.' || rc.relname)
		                 FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
		                 JOIN pg_class rc ON rc.oid = d.refobjid AND d.refclassid = 'pg_class'::regclass
		                 JOIN pg_namespace rn ON rn.oid = rc.relnamespace
		                 WHERE r.ev_class = c.oid AND r.rulename = '_RETURN' AND d.refobjid <> c.oid), '{}')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('v', 'm') AND `+userNamespace+` AND `+notMember("pg_class", "c.oid")+`
		ORDER BY n.nspname, c.relname`)
	if err != nil {
		return nil, fmt.Errorf("read views: %w", err)
	}
	type view struct {
		node objectNode
		uses []string
	}
	var views []view
	for rows.Next() {
		var oid uint32
		var v view
		var kind, options, def string
		if err := rows.Scan(&oid, &v.node.obj.Schema, &v.node.obj.Name, &kind, &options, &def, &v.node.deps, &v.uses); err != nil {
			return nil, fmt.Errorf("read views: %w", err)
		}
		name := QuoteQualified(v.node.obj.Schema, v.node.obj.Name)
		with := ""
		if options != "" {
			with = " WITH (" + options + ")"
		}
		body := strings.TrimSuffix(strings.TrimSpace(def), ";")
		if kind == "m" {
			v.node.obj.Kind = chain.ObjectMaterializedView
			v.node.obj.Definition = "CREATE MATERIALIZED VIEW IF NOT EXISTS " + name + with + " AS\n" + body + "\nWITH NO DATA"
		} else {
			v.node.obj.Kind = chain.ObjectView
			v.node.obj.Definition = "CREATE OR REPLACE VIEW " + name + with + " AS\n" + body
		}
		v.node.id = fmt.Sprintf("c:%d", oid)
		views = append(views, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Leave out, until nothing changes, every view that uses a table the
	// chain does not hold or a view already left out.
	dropped := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, v := range views {
			name := v.node.obj.Schema + "." + v.node.obj.Name
			if dropped[name] {
				continue
			}
			for _, u := range v.uses {
				k := relkinds[u]
				if ((k == "r" || k == "p" || k == "f") && carried[u] == nil) || dropped[u] {
					dropped[name], changed = true, true
					break
				}
			}
		}
	}
	var out []objectNode
	for _, v := range views {
		if !dropped[v.node.obj.Schema+"."+v.node.obj.Name] {
			out = append(out, v.node)
		}
	}
	return out, nil
}

// orderNodes puts nodes in an order where each comes after the nodes it
// depends on, keeping their given order where dependencies allow (a cycle,
// which PostgreSQL's own checks make rare, keeps the given order).
func orderNodes(nodes []objectNode) []chain.Object {
	present := map[string]bool{}
	for _, n := range nodes {
		present[n.id] = true
	}
	done := map[string]bool{}
	out := make([]chain.Object, 0, len(nodes))
	emitted := make([]bool, len(nodes))
	for len(out) < len(nodes) {
		progress := false
		for i, n := range nodes {
			if emitted[i] {
				continue
			}
			ready := true
			for _, d := range n.deps {
				if d != n.id && present[d] && !done[d] {
					ready = false
					break
				}
			}
			if !ready {
				continue
			}
			emitted[i], done[n.id], progress = true, true, true
			out = append(out, n.obj)
			break // start again from the first: the given order wins
		}
		if !progress {
			for i, n := range nodes {
				if !emitted[i] {
					emitted[i], done[n.id] = true, true
					out = append(out, n.obj)
					break
				}
			}
		}
	}
	return out
}

// readTriggers reads the triggers the application made (not the internal
// ones of foreign keys, nor the clones a partition inherits).
func readTriggers(ctx context.Context, q querier) ([]chain.Object, error) {
	return readObjectRows(ctx, q, chain.ObjectTrigger, "read triggers", `
		SELECT n.nspname, t.tgname, n.nspname || '.' || c.relname, pg_get_triggerdef(t.oid), '{}'::text[]
		FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE NOT t.tgisinternal AND t.tgparentid = 0 AND `+userNamespace+` AND `+notMember("pg_class", "c.oid")+`
		ORDER BY n.nspname, c.relname, t.tgname`, nil)
}

// readRules reads the rewrite rules other than the views' own.
func readRules(ctx context.Context, q querier) ([]chain.Object, error) {
	return readObjectRows(ctx, q, chain.ObjectRule, "read rules", `
		SELECT n.nspname, r.rulename, n.nspname || '.' || c.relname, pg_get_ruledef(r.oid), '{}'::text[]
		FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE r.rulename <> '_RETURN' AND `+userNamespace+` AND `+notMember("pg_class", "c.oid")+`
		ORDER BY n.nspname, c.relname, r.rulename`, func(def string) string {
		// pg_get_ruledef prints a CREATE RULE ending in ";": recorded as
		// the statement that replaces it too.
		def = strings.TrimSuffix(strings.TrimSpace(def), ";")
		if rest, ok := strings.CutPrefix(def, "CREATE RULE "); ok {
			def = "CREATE OR REPLACE RULE " + rest
		}
		return def
	})
}

// readRowSecurity reads the tables' row-level security switches: one
// object for ENABLE, one for FORCE.
func readRowSecurity(ctx context.Context, q querier) ([]chain.Object, error) {
	objs, err := readObjectRows(ctx, q, chain.ObjectRowSecurity, "read row-level security", `
		SELECT n.nspname, s.name, n.nspname || '.' || c.relname, 'ALTER TABLE ', '{}'::text[]
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		CROSS JOIN LATERAL (VALUES ('enable', c.relrowsecurity), ('force', c.relforcerowsecurity)) s(name, on_)
		WHERE s.on_ AND c.relkind IN ('r', 'p') AND `+userNamespace+` AND `+notMember("pg_class", "c.oid")+`
		ORDER BY n.nspname, c.relname, s.name`, nil)
	for i, o := range objs {
		objs[i].Definition = "ALTER TABLE " + QuoteQualified(o.Schema, strings.TrimPrefix(o.Table, o.Schema+".")) + " " + strings.ToUpper(o.Name) + " ROW LEVEL SECURITY"
	}
	return objs, err
}

// readPolicies reads the row-level security policies, each as the CREATE
// POLICY its catalog row describes, its expressions deparsed by the server.
func readPolicies(ctx context.Context, q querier) ([]chain.Object, error) {
	return readObjectRows(ctx, q, chain.ObjectPolicy, "read policies", `
		SELECT n.nspname, p.polname, n.nspname || '.' || c.relname,
		       format('CREATE POLICY %I ON %I.%I AS %s FOR %s TO %s', p.polname, n.nspname, c.relname,
		              CASE WHEN p.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
		              CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
		              (SELECT string_agg(CASE WHEN r.oid = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(r.oid)) END, ', ' ORDER BY r.i)
		               FROM unnest(p.polroles) WITH ORDINALITY r(oid, i)))
		       || coalesce(' USING (' || pg_get_expr(p.polqual, p.polrelid) || ')', '')
		       || coalesce(' WITH CHECK (' || pg_get_expr(p.polwithcheck, p.polrelid) || ')', ''),
		       ARRAY(SELECT pg_get_userbyid(r.oid)::text FROM unnest(p.polroles) WITH ORDINALITY r(oid, i) WHERE r.oid <> 0 ORDER BY r.i)
		FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE `+userNamespace+` AND `+notMember("pg_class", "c.oid")+`
		ORDER BY n.nspname, c.relname, p.polname`, nil)
}

// readObjectRows reads objects of kind from sql, whose rows are schema,
// name, table, definition and roles; shape, when set, rewrites each
// definition.
func readObjectRows(ctx context.Context, q querier, kind chain.ObjectKind, what, sql string, shape func(string) string) ([]chain.Object, error) {
	rows, err := q.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out []chain.Object
	for rows.Next() {
		o := chain.Object{Kind: kind}
		if err := rows.Scan(&o.Schema, &o.Name, &o.Table, &o.Definition, &o.Roles); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		o.Definition = strings.TrimSpace(o.Definition)
		if shape != nil {
			o.Definition = shape(o.Definition)
		}
		if len(o.Roles) == 0 {
			o.Roles = nil
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// readComments reads the comments on the tables and their columns,
// indexes and constraints, on the views, materialized views and
// sequences, and on the routines, triggers, rules and policies.
func readComments(ctx context.Context, q querier, onRelation func(string) bool, carried carriedTables, relkinds map[string]string) ([]chain.Object, error) {
	rows, err := q.Query(ctx, `
		WITH rel AS (
		  SELECT c.oid, n.nspname, c.relname, c.relkind, format('%I.%I', n.nspname, c.relname) AS q
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		  WHERE `+userNamespace+` AND `+notMember("pg_class", "c.oid")+`)
		SELECT r.nspname, CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE'
		                     WHEN 'i' THEN 'INDEX' WHEN 'I' THEN 'INDEX' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END || ' ' || r.q,
		       CASE WHEN r.relkind IN ('i', 'I') THEN (SELECT rn.nspname || '.' || t.relname FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid
		                                             JOIN pg_namespace rn ON rn.oid = t.relnamespace WHERE x.indexrelid = r.oid)
		            ELSE r.nspname || '.' || r.relname END, '', d.description
		FROM pg_description d JOIN rel r ON d.classoid = 'pg_class'::regclass AND d.objoid = r.oid AND d.objsubid = 0
		WHERE r.relkind IN ('r', 'p', 'v', 'm', 'S', 'i', 'I', 'f')
		UNION ALL
		SELECT r.nspname, 'COLUMN ' || r.q || '.' || quote_ident(a.attname), r.nspname || '.' || r.relname, a.attname, d.description
		FROM pg_description d JOIN rel r ON d.classoid = 'pg_class'::regclass AND d.objoid = r.oid AND d.objsubid > 0
		JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum = d.objsubid AND NOT a.attisdropped
		WHERE r.relkind IN ('r', 'p', 'v', 'm', 'f')
		UNION ALL
		SELECT n.nspname, CASE p.prokind WHEN 'p' THEN 'PROCEDURE ' ELSE 'FUNCTION ' END || p.oid::regprocedure::text, '', '', d.description
		FROM pg_description d JOIN pg_proc p ON d.classoid = 'pg_proc'::regclass AND d.objoid = p.oid
		JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.prokind IN ('f', 'p') AND `+userNamespace+` AND `+notMember("pg_proc", "p.oid")+`
		UNION ALL
		SELECT r.nspname, 'TRIGGER ' || quote_ident(t.tgname) || ' ON ' || r.q, r.nspname || '.' || r.relname, '', d.description
		FROM pg_description d JOIN pg_trigger t ON d.classoid = 'pg_trigger'::regclass AND d.objoid = t.oid
		JOIN rel r ON r.oid = t.tgrelid WHERE NOT t.tgisinternal AND t.tgparentid = 0
		UNION ALL
		SELECT r.nspname, 'RULE ' || quote_ident(w.rulename) || ' ON ' || r.q, r.nspname || '.' || r.relname, '', d.description
		FROM pg_description d JOIN pg_rewrite w ON d.classoid = 'pg_rewrite'::regclass AND d.objoid = w.oid
		JOIN rel r ON r.oid = w.ev_class WHERE w.rulename <> '_RETURN'
		UNION ALL
		SELECT r.nspname, 'POLICY ' || quote_ident(p.polname) || ' ON ' || r.q, r.nspname || '.' || r.relname, '', d.description
		FROM pg_description d JOIN pg_policy p ON d.classoid = 'pg_policy'::regclass AND d.objoid = p.oid
		JOIN rel r ON r.oid = p.polrelid
		UNION ALL
		SELECT r.nspname, 'CONSTRAINT ' || quote_ident(co.conname) || ' ON ' || r.q, r.nspname || '.' || r.relname, '', d.description
		FROM pg_description d JOIN pg_constraint co ON d.classoid = 'pg_constraint'::regclass AND d.objoid = co.oid
		JOIN rel r ON r.oid = co.conrelid
		ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("read comments: %w", err)
	}
	var out []chain.Object
	for rows.Next() {
		var schema, on, rel, column, text string
		if err := rows.Scan(&schema, &on, &rel, &column, &text); err != nil {
			return nil, fmt.Errorf("read comments: %w", err)
		}
		if rel != "" && !onRelation(rel) {
			continue
		}
		if cols := carried[rel]; column != "" && cols != nil && !cols[column] {
			continue // a column the filter left out
		}
		o := chain.Object{Kind: chain.ObjectComment, Schema: schema, Name: on,
			Definition: "COMMENT ON " + on + " IS " + quoteLiteral(text)}
		if k := relkinds[rel]; k == "r" || k == "p" || k == "f" {
			o.Table = rel
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// quoteLiteral quotes s as a standard SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// privilegeOrder is the order a GRANT lists privileges in.
var privilegeOrder = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "USAGE", "MAINTAIN"}

// readGrants reads the privileges granted on the tables, views,
// materialized views and sequences, table-wide and per column, to roles
// other than the owner: one GRANT per relation and grantee. Owners are not
// recorded (a target's objects belong to its own user).
func readGrants(ctx context.Context, q querier, onRelation func(string) bool, carried carriedTables, relkinds map[string]string) ([]chain.Object, error) {
	rows, err := q.Query(ctx, `
		WITH rel AS (
		  SELECT c.oid, n.nspname, c.relname, c.relkind, c.relowner, c.relacl
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		  WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND `+userNamespace+` AND `+notMember("pg_class", "c.oid")+`),
		priv AS (
		  SELECT r.oid, a.grantee, a.privilege_type, ''::text AS col, 0 AS attnum, a.is_grantable
		  FROM rel r, aclexplode(r.relacl) a WHERE a.grantee <> r.relowner
		  UNION ALL
		  SELECT r.oid, a.grantee, a.privilege_type, att.attname::text, att.attnum, a.is_grantable
		  FROM rel r JOIN pg_attribute att ON att.attrelid = r.oid AND att.attnum > 0 AND NOT att.attisdropped AND att.attacl IS NOT NULL,
		       aclexplode(att.attacl) a WHERE a.grantee <> r.relowner)
		SELECT r.nspname, r.relname, r.relkind::text, CASE WHEN p.grantee = 0 THEN '' ELSE pg_get_userbyid(p.grantee)::text END,
		       p.privilege_type, p.col, p.is_grantable
		FROM priv p JOIN rel r ON r.oid = p.oid
		ORDER BY r.nspname, r.relname, 4, p.attnum, p.privilege_type`)
	if err != nil {
		return nil, fmt.Errorf("read grants: %w", err)
	}
	type grant struct {
		schema, rel, kind, role string
		table                   []string
		columns                 map[string][]string
		grantable, plain        bool
	}
	var order []*grant
	byKey := map[string]*grant{}
	for rows.Next() {
		var schema, rel, kind, role, priv, col string
		var grantable bool
		if err := rows.Scan(&schema, &rel, &kind, &role, &priv, &col, &grantable); err != nil {
			return nil, fmt.Errorf("read grants: %w", err)
		}
		name := schema + "." + rel
		if !onRelation(name) {
			continue
		}
		if cols := carried[name]; col != "" && cols != nil && !cols[col] {
			continue // a column the filter left out
		}
		key := name + "\x00" + role
		g := byKey[key]
		if g == nil {
			g = &grant{schema: schema, rel: rel, kind: kind, role: role, columns: map[string][]string{}}
			byKey[key] = g
			order = append(order, g)
		}
		if grantable {
			g.grantable = true
		} else {
			g.plain = true
		}
		if col == "" {
			g.table = append(g.table, priv)
		} else {
			g.columns[priv] = append(g.columns[priv], col)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]chain.Object, 0, len(order))
	for _, g := range order {
		var privs []string
		for _, p := range privilegeOrder {
			if slices.Contains(g.table, p) {
				privs = append(privs, p)
			}
		}
		for _, p := range privilegeOrder {
			if cols := g.columns[p]; len(cols) > 0 && !slices.Contains(g.table, p) {
				quoted := make([]string, len(cols))
				for i, c := range cols {
					quoted[i] = pgx.Identifier{c}.Sanitize()
				}
				privs = append(privs, p+" ("+strings.Join(quoted, ", ")+")")
			}
		}
		if len(privs) == 0 {
			continue
		}
		on := "TABLE"
		if g.kind == "S" {
			on = "SEQUENCE"
		}
		grantee, name := "PUBLIC", "PUBLIC"
		var roles []string
		if g.role != "" {
			grantee, name, roles = pgx.Identifier{g.role}.Sanitize(), g.role, []string{g.role}
		}
		def := "GRANT " + strings.Join(privs, ", ") + " ON " + on + " " + QuoteQualified(g.schema, g.rel) + " TO " + grantee
		if g.grantable && !g.plain {
			def += " WITH GRANT OPTION"
		}
		o := chain.Object{Kind: chain.ObjectGrant, Schema: g.schema, Name: name, Table: g.schema + "." + g.rel, Definition: def, Roles: roles}
		out = append(out, o)
	}
	return out, nil
}

// objectsFingerprint is a digest of the catalog rows the recorded objects
// come from (their identity and the transaction that last wrote each): it
// changes whenever an object is created, altered, dropped, commented on or
// granted, so a capture reads the objects again only then.
func objectsFingerprint(ctx context.Context, q querier) (string, error) {
	var fp string
	err := q.QueryRow(ctx, `
		SELECT md5(coalesce(string_agg(k, ',' ORDER BY k), '')) FROM (
		  SELECT 'c' || c.oid || ':' || c.xmin::text AS k FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		  WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND `+userNamespace+`
		  UNION ALL SELECT 'p' || p.oid || ':' || p.xmin::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE `+userNamespace+`
		  UNION ALL SELECT 't' || oid || ':' || xmin::text FROM pg_trigger WHERE NOT tgisinternal
		  UNION ALL SELECT 'r' || oid || ':' || xmin::text FROM pg_rewrite WHERE oid >= `+fmt.Sprint(firstUserOID)+`
		  UNION ALL SELECT 'o' || oid || ':' || xmin::text FROM pg_policy
		  UNION ALL SELECT 'd' || classoid || '.' || objoid || '.' || objsubid || ':' || xmin::text FROM pg_description WHERE objoid >= `+fmt.Sprint(firstUserOID)+`
		  UNION ALL SELECT 'a' || attrelid || '.' || attnum || ':' || xmin::text FROM pg_attribute WHERE attacl IS NOT NULL AND attrelid >= `+fmt.Sprint(firstUserOID)+`
		) x`).Scan(&fp)
	if err != nil {
		return "", fmt.Errorf("fingerprint the schema objects: %w", err)
	}
	return fp, nil
}
