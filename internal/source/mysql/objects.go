package mysql

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
)

// The schema objects of a MySQL-family database that are not tables
// (chain.Schema.Objects): stored functions and procedures, views, triggers,
// events and table comments, each recorded with the server's own CREATE
// text (SHOW CREATE …), its DEFINER kept apart in Object.Definer, and the
// session settings it was stored with (sql_mode; an event's time_zone) in
// leading SET lines:
//
//	SET sql_mode = 'STRICT_TRANS_TABLES,…';
//	CREATE FUNCTION `f`(x INT) RETURNS int(11) … ;
//
// A table comment does not travel with the table (a target builds its
// tables from the columns' kinds), so it is an object of its own: ALTER
// TABLE `t` COMMENT = '…'. Names are never qualified with the source's
// database, whose name the target's need not share: a view's text is read
// in the source database (MariaDB then leaves the database out of it), and
// any `db`. of the source database left in it is taken out.
//
// They are recorded in the order a target creates them: functions and
// procedures first (a view may call a function; a routine's body is bound
// only when it runs), then views, each after the views it reads, then
// triggers in their firing order, events, and table comments.

// readObjects reads the schema objects of database. f (nil: none) leaves
// out the triggers and comments of tables it does not take; views and
// routines are recorded whatever they read.
func readObjects(ctx context.Context, q querier, database string, f *filter.Filter) ([]chain.Object, error) {
	var out []chain.Object
	for _, read := range []func(context.Context, querier, string, *filter.Filter) ([]chain.Object, error){
		readRoutines, readViews, readTriggers, readEvents, readTableComments,
	} {
		objs, err := read(ctx, q, database, f)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// objectsPrivilegesHint says what reading the objects needs.
const objectsPrivilegesHint = "Grant the source user what reading the database's objects needs: SHOW VIEW (views), TRIGGER (triggers), EVENT (events), and SELECT on mysql.proc (MariaDB) or SHOW_ROUTINE (MySQL 8) for routines another account defined; then run again."

// readDefinition reads object name of kind ("view", "function", …) in
// database with SHOW CREATE: the statement's row, the CREATE text under
// column with its DEFINER taken out, and that definer.
func readDefinition(ctx context.Context, q querier, kind, column, database, name string) (row map[string]sql.NullString, def, definer string, err error) {
	what := kind + " " + database + "." + name
	row, err = showCreate(ctx, q, "SHOW CREATE "+strings.ToUpper(kind)+" "+quoteName(database)+"."+quoteName(name))
	if err != nil {
		return nil, "", "", classify(err, "read the definition of "+what)
	}
	text, err := createText(row, column, what)
	if err != nil {
		return nil, "", "", err
	}
	def, definer = takeDefiner(text)
	return row, def, definer, nil
}

// showCreate runs a SHOW CREATE statement and returns its one row by
// lowercased column name.
func showCreate(ctx context.Context, q querier, stmt string) (map[string]sql.NullString, error) {
	rows, err := q.QueryContext(ctx, stmt)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, sql.ErrNoRows
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := make(map[string]sql.NullString, len(cols))
	for i, c := range cols {
		out[strings.ToLower(c)] = vals[i]
	}
	return out, rows.Err()
}

// listNames runs a query returning names (and optionally a second column).
func listNames(ctx context.Context, q querier, query string, args ...any) ([][2]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for rows.Next() {
		var r [2]string
		dest := []any{&r[0]}
		if len(cols) > 1 {
			dest = append(dest, &r[1])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// createText is the CREATE text column of a SHOW CREATE row; the server
// shows NULL when the user may not see the definition.
func createText(row map[string]sql.NullString, column, what string) (string, error) {
	v := row[column]
	if !v.Valid || v.String == "" {
		return "", &errcode.Error{Code: errcode.SourcePrivileges, Hint: objectsPrivilegesHint,
			Message: "the source user may not read the definition of " + what}
	}
	return v.String, nil
}

// readRoutines records the stored functions and procedures.
func readRoutines(ctx context.Context, q querier, database string, _ *filter.Filter) ([]chain.Object, error) {
	list, err := listNames(ctx, q, `SELECT ROUTINE_NAME, ROUTINE_TYPE FROM information_schema.ROUTINES
		 WHERE ROUTINE_SCHEMA = ? AND ROUTINE_TYPE IN ('FUNCTION', 'PROCEDURE')
		 ORDER BY ROUTINE_TYPE, ROUTINE_NAME`, database)
	if err != nil {
		return nil, classify(err, "list the source's routines")
	}
	var out []chain.Object
	for _, r := range list {
		name, typ := r[0], strings.ToUpper(r[1])
		row, def, definer, err := readDefinition(ctx, q, strings.ToLower(typ), "create "+strings.ToLower(typ), database, name)
		if err != nil {
			return nil, err
		}
		kind := chain.ObjectFunction
		if typ == "PROCEDURE" {
			kind = chain.ObjectProcedure
		}
		out = append(out, chain.Object{Kind: kind, Schema: database, Name: name, Definer: definer,
			Definition: sessionLines(row["sql_mode"].String, "") + def + ";"})
	}
	return out, nil
}

// readViews records the views, each after the views it reads.
func readViews(ctx context.Context, q querier, database string, _ *filter.Filter) ([]chain.Object, error) {
	list, err := listNames(ctx, q, `SELECT TABLE_NAME FROM information_schema.TABLES
		 WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'VIEW' ORDER BY TABLE_NAME`, database)
	if err != nil {
		return nil, classify(err, "list the source's views")
	}
	views := map[string]chain.Object{}
	var names []string
	for _, r := range list {
		name := r[0]
		_, def, definer, err := readDefinition(ctx, q, "view", "create view", database, name)
		if err != nil {
			return nil, err
		}
		// Outside its database (or reading another database) the server
		// qualifies every name: the source database's own go.
		def = strings.ReplaceAll(def, quoteName(database)+".", "")
		views[name] = chain.Object{Kind: chain.ObjectView, Schema: database, Name: name, Definer: definer, Definition: def + ";"}
		names = append(names, name)
	}
	var out []chain.Object
	for _, n := range dependencyOrder(names, func(a, b string) bool {
		return a != b && strings.Contains(viewBody(views[a].Definition), quoteName(b))
	}) {
		out = append(out, views[n])
	}
	return out, nil
}

// viewBody is what follows AS in a view's definition (where the names it
// reads are).
func viewBody(def string) string {
	if i := strings.Index(def, " AS "); i >= 0 {
		return def[i:]
	}
	return def
}

// dependencyOrder orders names (sorted) so that each comes after every
// other it uses (uses(a, b): a uses b), keeping the sorted order among
// the independent ones. A cycle, which the server would not allow, keeps
// what remains in sorted order.
func dependencyOrder(names []string, uses func(a, b string) bool) []string {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	done := map[string]bool{}
	var out []string
	for len(out) < len(sorted) {
		progressed := false
		for _, n := range sorted {
			if done[n] {
				continue
			}
			ready := true
			for _, m := range sorted {
				if !done[m] && uses(n, m) {
					ready = false
					break
				}
			}
			if ready {
				done[n] = true
				out = append(out, n)
				progressed = true
			}
		}
		if !progressed {
			for _, n := range sorted {
				if !done[n] {
					done[n] = true
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// identPattern is one identifier as a statement may write it: back-quoted
// or bare.
const identPattern = "(?:`(?:[^`]|``)+`|[^\\s`.()]+)"

// triggerHead matches a trigger's CREATE text (its DEFINER taken out) up
// to its body; groups 1 and 2 are the database qualifiers of its name and
// table, when written.
var triggerHead = regexp.MustCompile(`(?is)^CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+(?:IF\s+NOT\s+EXISTS\s+)?(` + identPattern + `\s*\.\s*)?` +
	identPattern + `\s+(?:BEFORE|AFTER)\s+(?:INSERT|UPDATE|DELETE)\s+ON\s+(` + identPattern + `\s*\.\s*)?` + identPattern +
	`\s+(?:(?:FOLLOWS|PRECEDES)\s+` + identPattern + `\s+)?FOR\s+EACH\s+ROW\s`)

// readTriggers records the triggers of the tables f takes, in firing
// order on each table, with the statement as it was written.
func readTriggers(ctx context.Context, q querier, database string, f *filter.Filter) ([]chain.Object, error) {
	list, err := listNames(ctx, q, `SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS
		 WHERE TRIGGER_SCHEMA = ? ORDER BY EVENT_OBJECT_TABLE, EVENT_MANIPULATION, ACTION_TIMING, ACTION_ORDER`, database)
	if err != nil {
		return nil, classify(err, "list the source's triggers")
	}
	var out []chain.Object
	for _, r := range list {
		name, table := r[0], r[1]
		if !f.Includes(database, table) {
			continue
		}
		row, def, definer, err := readDefinition(ctx, q, "trigger", "sql original statement", database, name)
		if err != nil {
			return nil, err
		}
		def = unqualifyTrigger(def, database)
		out = append(out, chain.Object{Kind: chain.ObjectTrigger, Schema: database, Name: name, Table: database + "." + table,
			Definer: definer, Definition: sessionLines(row["sql_mode"].String, "") + def + ";"})
	}
	return out, nil
}

// unqualifyTrigger takes the source database's name off a trigger's name
// and table where its statement wrote them.
func unqualifyTrigger(def, database string) string {
	m := triggerHead.FindStringSubmatchIndex(def)
	if m == nil {
		return def
	}
	for g := 2; g >= 1; g-- { // the later span first, so the earlier stays valid
		s, e := m[2*g], m[2*g+1]
		if s < 0 {
			continue
		}
		q := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(def[s:e]), "."))
		if unquoteName(q) == database {
			def = def[:s] + def[e:]
		}
	}
	return def
}

// unquoteName reads a possibly back-quoted identifier.
func unquoteName(s string) string {
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	return s
}

// readEvents records the scheduled events, with the time zone each keeps
// its schedule in.
func readEvents(ctx context.Context, q querier, database string, _ *filter.Filter) ([]chain.Object, error) {
	list, err := listNames(ctx, q, `SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ? ORDER BY EVENT_NAME`, database)
	if err != nil {
		return nil, classify(err, "list the source's events")
	}
	var out []chain.Object
	for _, r := range list {
		name := r[0]
		row, def, definer, err := readDefinition(ctx, q, "event", "create event", database, name)
		if err != nil {
			return nil, err
		}
		out = append(out, chain.Object{Kind: chain.ObjectEvent, Schema: database, Name: name, Definer: definer,
			Definition: sessionLines(row["sql_mode"].String, row["time_zone"].String) + def + ";"})
	}
	return out, nil
}

// readTableComments records the comments of the base tables f takes.
func readTableComments(ctx context.Context, q querier, database string, f *filter.Filter) ([]chain.Object, error) {
	list, err := listNames(ctx, q, `SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES
		 WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' AND TABLE_COMMENT <> '' ORDER BY TABLE_NAME`, database)
	if err != nil {
		return nil, classify(err, "read the source's table comments")
	}
	var out []chain.Object
	for _, r := range list {
		if !f.Includes(database, r[0]) {
			continue
		}
		out = append(out, chain.Object{Kind: chain.ObjectComment, Schema: database, Name: "table " + r[0], Table: database + "." + r[0],
			Definition: "ALTER TABLE " + quoteName(r[0]) + " COMMENT = " + quoteString(r[1]) + ";"})
	}
	return out, nil
}

// quoteString is a MySQL string literal of s (backslash escapes on, as
// under the default sql_mode).
func quoteString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// sessionLines are the SET lines an object's definition starts with: the
// sql_mode it was stored with, and an event's time zone.
func sessionLines(sqlMode, timeZone string) string {
	s := "SET sql_mode = " + quoteString(sqlMode) + ";\n"
	if timeZone != "" {
		s += "SET time_zone = " + quoteString(timeZone) + ";\n"
	}
	return s
}

// definerClause finds the DEFINER = `user`@`host` (or `role`) clause the
// server writes into a SHOW CREATE text.
var definerClause = regexp.MustCompile("(?i)\\bDEFINER\\s*=\\s*(`(?:[^`]|``)*`|'(?:[^']|'')*'|[^\\s@`']+)(?:\\s*@\\s*(`(?:[^`]|``)*`|'(?:[^']|'')*'|[^\\s`']+))?\\s+")

// takeDefiner takes the DEFINER clause out of a CREATE text and returns
// the text without it and the definer as "user@host" ("role" for a
// MariaDB role). The clause must come before the object's kind keyword,
// where the server writes it; a text without one is returned as it is.
func takeDefiner(text string) (string, string) {
	m := definerClause.FindStringSubmatchIndex(text)
	if m == nil {
		return text, ""
	}
	head := strings.ToUpper(text[:m[0]])
	for _, kw := range []string{" VIEW ", " FUNCTION ", " PROCEDURE ", " TRIGGER ", " EVENT "} {
		if strings.Contains(head, kw) {
			return text, "" // a DEFINER word inside the body, not the clause
		}
	}
	user := unquoteAccount(text[m[2]:m[3]])
	definer := user
	if m[4] >= 0 {
		definer += "@" + unquoteAccount(text[m[4]:m[5]])
	}
	return text[:m[0]] + text[m[1]:], definer
}

// unquoteAccount reads a user or host name as the server quotes it.
func unquoteAccount(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	return unquoteName(s)
}
