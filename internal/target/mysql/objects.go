package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// The schema objects a MySQL-family source records (views, functions,
// procedures, triggers, events and table comments; objectdef.go reads
// their texts) are created after the tables, keys and rows, replaced when
// their definition changes and dropped when the source drops them.
//
// Every statement converges when run again, since a crash between the DDL
// and the broker's position commit runs the same move again: a view is
// created with CREATE OR REPLACE, a routine, trigger or event is dropped IF
// EXISTS and created, a drop is IF EXISTS, a comment is set to its text.
//
// Triggers stay quiet for sluice's own sessions. MySQL has no session
// switch like PostgreSQL's session_replication_role, so every connection
// of this target sets the user variable @sluice_apply (mysql.go), and a
// trigger's body is created as IF @sluice_apply IS NULL THEN <body>; END
// IF: the rows the broker applies (whose audit rows, say, the source's own
// trigger wrote and the chain carries already) fire nothing, while the
// application's sessions fire the trigger as on the source, before and
// after a cutover, with no step to take.
//
// Events are created DISABLE ON SLAVE (DISABLE ON REPLICA on MySQL 8.0.22
// and later): a replica must not run the source's schedule. After a
// cutover the operator enables them (ALTER EVENT … ENABLE;
// docs/mysql-source.md).

// applyVar is the user variable every session of this target sets, and
// the triggers it creates test.
const applyVar = "@sluice_apply"

// ApplyObjects implements target.Target: it moves the database's objects
// from the set from to the set to (see target.Target). Definers are
// checked before any statement runs: a recorded definer must exist on the
// server unless o.Definer replaces them all
// (SLUICE-E-TARGET-DEFINER-MISSING).
func (t *Target) ApplyObjects(ctx context.Context, from, to []chain.Object, o target.ObjectOptions) (target.ObjectResult, error) {
	var r target.ObjectResult
	mine := func(objs []chain.Object) []chain.Object {
		var out []chain.Object
		for _, ob := range objs {
			if carried(ob.Kind) {
				out = append(out, ob)
			}
		}
		return out
	}
	for _, ob := range to {
		if !carried(ob.Kind) {
			r.Skip(ob, "a MySQL-family target has no such object")
		}
	}
	from, to = mine(from), mine(to)
	plan, err := t.planObjects(from, to, o, &r)
	if err != nil {
		return r, err
	}
	if len(plan) == 0 {
		return r, nil
	}
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return r, classify(err, "connect to apply the schema objects")
	}
	// The session's sql_mode and time zone follow each object's: the
	// connection is not given back to the pool.
	defer func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		conn.Close()
	}()
	definers, err := t.resolveDefiners(ctx, conn, plan, o.Definer)
	if err != nil {
		return r, err
	}
	for _, st := range plan {
		if err := t.runStep(ctx, conn, st, definers, &r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// carried reports whether a MySQL-family target keeps objects of kind k.
func carried(k chain.ObjectKind) bool {
	switch k {
	case chain.ObjectView, chain.ObjectFunction, chain.ObjectProcedure, chain.ObjectTrigger, chain.ObjectEvent, chain.ObjectComment:
		return true
	}
	return false
}

// stepOp is what a step does to an object.
type stepOp int

const (
	opDrop stepOp = iota
	opCreate
	opReplace
)

// step is one object to drop, create or replace, its text already read.
type step struct {
	op  stepOp
	obj chain.Object
	def *objectDef // nil for a drop
}

// planObjects reads every text to run and orders the steps: drops first,
// in the reverse of the order from records, then creations and
// replacements in the order to records. A text that is not one statement
// of its object's kind refuses the whole move before anything runs.
func (t *Target) planObjects(from, to []chain.Object, o target.ObjectOptions, r *target.ObjectResult) ([]step, error) {
	prev := make(map[string]chain.Object, len(from))
	for _, ob := range from {
		prev[ob.Key()] = ob
	}
	next := make(map[string]bool, len(to))
	for _, ob := range to {
		next[ob.Key()] = true
	}
	var plan []step
	for i := len(from) - 1; i >= 0; i-- {
		ob := from[i]
		if next[ob.Key()] || !t.takes(ob, o.Sel) {
			continue
		}
		if _, err := recordedName(ob); err != nil {
			return nil, err
		}
		plan = append(plan, step{op: opDrop, obj: ob})
	}
	for _, ob := range to {
		op := opCreate
		if p, ok := prev[ob.Key()]; ok {
			if p.Definition == ob.Definition && p.Definer == ob.Definer {
				continue
			}
			op = opReplace
		}
		if !t.takes(ob, o.Sel) {
			r.Skip(ob, "its table is not in the subset")
			continue
		}
		def, err := readObjectDef(ob)
		if err != nil {
			return nil, err
		}
		plan = append(plan, step{op: op, obj: ob, def: def})
	}
	return plan, nil
}

// takes reports whether the subset (nil: everything) takes the table a
// trigger or comment is on.
func (t *Target) takes(ob chain.Object, sel *target.Selection) bool {
	return ob.Table == "" || sel.Takes(ob.Table)
}

// runStep runs one step on conn and counts it in r.
func (t *Target) runStep(ctx context.Context, conn *sql.Conn, st step, definers map[string]string, r *target.ObjectResult) error {
	ob := st.obj
	what := fmt.Sprintf("%s %s", ob.Kind, ob.Name)
	if st.op == opDrop {
		stmt, err := dropStatement(ob)
		if err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			if ob.Kind == chain.ObjectComment && isServerError(err, erNoSuchTable) {
				r.Dropped = target.Count(r.Dropped, ob.Kind) // went with its table
				return nil
			}
			return classify(err, "drop "+what+" on the target")
		}
		r.Dropped = target.Count(r.Dropped, ob.Kind)
		return nil
	}
	d := st.def
	stmts, err := t.createStatements(d, definers[ob.Definer])
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			if why, ok := missingDependency(ob, err); ok {
				r.Skip(ob, why)
				return nil
			}
			return classify(err, "create "+what+" on the target")
		}
	}
	if st.op == opReplace {
		r.Replaced = target.Count(r.Replaced, ob.Kind)
	} else {
		r.Created = target.Count(r.Created, ob.Kind)
	}
	return nil
}

// Server errors of an object that reads something the target lacks.
const (
	erSPDoesNotExist = 1305
	erBadField       = 1054
	erViewInvalid    = 1356
)

// missingDependency reports whether err says the object reads a table,
// column or routine the target lacks (a table the subset or the source's
// filter left out), which skips it rather than failing the whole move.
func missingDependency(ob chain.Object, err error) (string, bool) {
	e, ok := serverError(err)
	if !ok {
		return "", false
	}
	switch e.Number {
	case erNoSuchTable, erViewInvalid, erBadField, erSPDoesNotExist:
		if ob.Kind == chain.ObjectView || ob.Kind == chain.ObjectTrigger || ob.Kind == chain.ObjectComment {
			return "it uses what the target does not have (" + e.Message + ")", true
		}
	}
	return "", false
}

func isServerError(err error, number uint16) bool {
	e, ok := serverError(err)
	return ok && e.Number == number
}

// dropStatement drops an object if it exists (a comment is emptied).
func dropStatement(ob chain.Object) (string, error) {
	name, err := recordedName(ob)
	if err != nil {
		return "", err
	}
	switch ob.Kind {
	case chain.ObjectView:
		return "DROP VIEW IF EXISTS " + quoteIdent(name), nil
	case chain.ObjectFunction:
		return "DROP FUNCTION IF EXISTS " + quoteIdent(name), nil
	case chain.ObjectProcedure:
		return "DROP PROCEDURE IF EXISTS " + quoteIdent(name), nil
	case chain.ObjectTrigger:
		return "DROP TRIGGER IF EXISTS " + quoteIdent(name), nil
	case chain.ObjectEvent:
		return "DROP EVENT IF EXISTS " + quoteIdent(name), nil
	}
	return "ALTER TABLE " + quoteIdent(name) + " COMMENT = ''", nil
}

// recordedName is the target name an object is created and dropped under:
// its own name, or for a comment the table's.
func recordedName(ob chain.Object) (string, error) {
	name := ob.Name
	if ob.Kind == chain.ObjectComment {
		name = strings.TrimPrefix(ob.Name, "table ")
		if name == ob.Name || ob.Table == "" || !strings.HasSuffix(ob.Table, "."+name) {
			return "", refuseObject(ob, "a comment names no table of its own (%q on %q)", ob.Name, ob.Table)
		}
	}
	if name == "" || len([]rune(name)) > maxIdent || strings.HasSuffix(name, " ") {
		return "", refuseObject(ob, "%q is not a name MySQL takes", name)
	}
	return name, nil
}

// createStatements are the statements that create (or replace) the
// object d reads, as definer (a rendered account or CURRENT_USER; "" for
// a comment): the session settings, then for a routine, trigger or event
// its drop, then its CREATE.
func (t *Target) createStatements(d *objectDef, definer string) ([]string, error) {
	ob := d.obj
	mode := sqlMode
	if d.sqlMode != nil {
		mode = t.sqlModeFor(*d.sqlMode)
	}
	zone := "+00:00"
	if d.timeZone != nil {
		zone = *d.timeZone
	}
	out := []string{"SET SESSION sql_mode = " + quoteLiteral(mode) + ", time_zone = " + quoteLiteral(zone)}
	switch ob.Kind {
	case chain.ObjectComment:
		return append(out, "ALTER TABLE "+quoteIdent(d.name)+" COMMENT = "+quoteLiteral(d.comment)), nil
	case chain.ObjectView:
		return append(out, "CREATE OR REPLACE "+d.withDefiner(definer)), nil
	}
	drop, err := dropStatement(ob)
	if err != nil {
		return nil, err
	}
	create := "CREATE " + d.withDefiner(definer)
	switch ob.Kind {
	case chain.ObjectTrigger:
		create += "IF " + applyVar + " IS NULL THEN " + d.body + "; END IF"
	case chain.ObjectEvent:
		e := *d
		e.post = d.disabled(t.eventDisabled())
		create = "CREATE " + e.withDefiner(definer)
	}
	return append(out, drop, create), nil
}

// eventDisabled is the status an event is created with on this server.
func (t *Target) eventDisabled() string {
	f := t.flavor
	if !f.mariadb && (f.major > 8 || f.major == 8 && (f.minor > 0 || f.patch >= 22)) {
		return "DISABLE ON REPLICA"
	}
	return "DISABLE ON SLAVE"
}

// mariaOnlyModes are sql_mode words MySQL 8 does not know (or no longer
// knows): a MariaDB object created on MySQL runs without them.
var mariaOnlyModes = map[string]bool{
	"NO_AUTO_CREATE_USER": true, "EMPTY_STRING_IS_NULL": true, "SIMULTANEOUS_ASSIGNMENT": true,
	"TIME_ROUND_FRACTIONAL": true, "NO_FIELD_OPTIONS": true, "NO_KEY_OPTIONS": true, "NO_TABLE_OPTIONS": true,
	"POSTGRESQL": true, "ORACLE": true, "MSSQL": true, "DB2": true, "MAXDB": true, "MYSQL323": true, "MYSQL40": true,
}

// sqlModeFor is an object's recorded sql_mode as this server takes it.
func (t *Target) sqlModeFor(mode string) string {
	if t.flavor.mariadb || mode == "" {
		return mode
	}
	var keep []string
	for _, m := range strings.Split(mode, ",") {
		if !mariaOnlyModes[m] {
			keep = append(keep, m)
		}
	}
	return strings.Join(keep, ",")
}

// quoteLiteral is a MySQL string literal of s (backslash escapes on: the
// target's sql_mode never sets NO_BACKSLASH_ESCAPES while it sends one).
func quoteLiteral(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`, "\x00", `\0`).Replace(s) + "'"
}

// resolveDefiners decides the DEFINER of every object plan creates:
// the recorded account when the server has it, or the one the operator
// gave instead of them all. It refuses, naming each, the accounts the
// server lacks, before anything runs.
func (t *Target) resolveDefiners(ctx context.Context, conn *sql.Conn, plan []step, override string) (map[string]string, error) {
	out := map[string]string{}
	var recorded []string
	for _, st := range plan {
		if st.op == opDrop || st.obj.Kind == chain.ObjectComment {
			continue
		}
		if _, seen := out[st.obj.Definer]; !seen {
			out[st.obj.Definer] = ""
			recorded = append(recorded, st.obj.Definer)
		}
	}
	if len(recorded) == 0 {
		return out, nil
	}
	var current string
	if err := conn.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&current); err != nil {
		return nil, classify(err, "read the target's current user")
	}
	if override != "" {
		clause, err := t.definerClause(ctx, conn, override, current)
		if err != nil {
			return nil, err
		}
		if clause == "" {
			return nil, &errcode.Error{Code: errcode.TargetDefinerMissing,
				Message: fmt.Sprintf("the definer given for the schema objects, %s, is not an account of the target %s", override, t.name)}
		}
		for k := range out {
			out[k] = clause
		}
		return out, nil
	}
	var missing []string
	for _, d := range recorded {
		if d == "" {
			// An object recorded without a definer runs as the account
			// that creates it.
			out[d] = "CURRENT_USER"
			continue
		}
		clause, err := t.definerClause(ctx, conn, d, current)
		if err != nil {
			return nil, err
		}
		if clause == "" {
			missing = append(missing, d)
			continue
		}
		out[d] = clause
	}
	if len(missing) > 0 {
		return nil, &errcode.Error{Code: errcode.TargetDefinerMissing,
			Message: fmt.Sprintf("the chain's views, routines, triggers or events run as %s, which the target %s has no account for", strings.Join(missing, ", "), t.name)}
	}
	return out, nil
}

// definerClause renders account ("user@host", "role", "CURRENT_USER") as
// a DEFINER value when the server has it, "" when it does not. current is
// CURRENT_USER().
func (t *Target) definerClause(ctx context.Context, conn *sql.Conn, account, current string) (string, error) {
	if strings.EqualFold(strings.TrimSuffix(account, "()"), "CURRENT_USER") {
		return "CURRENT_USER", nil
	}
	user, host, hasHost := splitAccount(account)
	rendered := quoteIdent(user)
	if hasHost {
		rendered += "@" + quoteIdent(host)
	}
	if hasHost && user+"@"+host == current {
		return rendered, nil
	}
	var n int
	err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = ?", user, host).Scan(&n)
	if err != nil {
		if privileged(err) {
			return "", &errcode.Error{Code: errcode.TargetPrivileges, Err: err,
				Message: fmt.Sprintf("the target user may not read mysql.user to check that definer %s exists", account),
				Hint:    "Grant the target user SELECT ON mysql.user, or pass --object-definer CURRENT_USER to create the objects as the account sluice connects as."}
		}
		return "", classify(err, "look up definer "+account+" on the target")
	}
	if n == 0 {
		return "", nil
	}
	return rendered, nil
}

// splitAccount reads "user@host" (the host after the last @), each part
// possibly quoted; a role has no host.
func splitAccount(account string) (user, host string, hasHost bool) {
	unq := func(s string) string {
		s = strings.TrimSpace(s)
		if len(s) >= 2 && (s[0] == '`' && s[len(s)-1] == '`' || s[0] == '\'' && s[len(s)-1] == '\'') {
			q := s[:1]
			return strings.ReplaceAll(s[1:len(s)-1], q+q, q)
		}
		return s
	}
	i := strings.LastIndex(account, "@")
	if i < 0 {
		return unq(account), "", false
	}
	return unq(account[:i]), unq(account[i+1:]), true
}
