package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// judgment is what the broker learned about an incremental (target.judgment).
type judgment = target.Judgment

// judgeIncremental decides, before anything of m is applied, whether its
// replay into the target can be exactly-once, by the rules of target.Judge:
// the live table's side is the ON CONFLICT arbiter the applier picks,
// primary key first, which must be made of columns the rows supply (a view,
// foreign table or materialized view under the name is refused).
func judgeIncremental(ctx context.Context, conn *pgx.Conn, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, sel *target.Selection) (judgment, error) {
	checked, err := checkedSchema(schema)
	if err != nil {
		return judgment{}, err
	}
	return target.Judge(ctx, ch, m, checked, sel, keyProbe{conn: conn})
}

// keyProbe is the PostgreSQL target's side of the judgment.
type keyProbe struct{ conn *pgx.Conn }

func (p keyProbe) ProbeKey(ctx context.Context, name string, def *chain.Table) (target.LiveKey, error) {
	return targetKey(ctx, p.conn, name, def)
}

func (p keyProbe) MarksUsable(ctx context.Context) (bool, string, string, error) {
	ok, why, err := marksUsable(ctx, p.conn)
	return ok, why, marksHint, err
}

// marksHint is the remedy when the role cannot use the marks table.
const marksHint = "Let the target role create and write sluice_cdc_apply_marks (GRANT CREATE ON SCHEMA public, or create the table and GRANT SELECT, INSERT, DELETE on it)."

// marksUsable reports whether the target role may read, write and prune the
// marks table (creating it when missing).
func marksUsable(ctx context.Context, conn *pgx.Conn) (bool, string, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, marksTable).Scan(&exists); err != nil {
		return false, "", classify(err, "look up "+marksTable)
	}
	var ok bool
	var err error
	if exists {
		err = conn.QueryRow(ctx, `SELECT has_table_privilege($1, 'SELECT') AND has_table_privilege($1, 'INSERT') AND has_table_privilege($1, 'DELETE')`, marksTable).Scan(&ok)
	} else {
		err = conn.QueryRow(ctx, `SELECT has_schema_privilege('public', 'CREATE')`).Scan(&ok)
	}
	if err != nil {
		return false, "", classify(err, "check the privileges on "+marksTable)
	}
	if !ok {
		return false, "the target role may not create or write " + marksTable, nil
	}
	return true, "", nil
}

// targetKey probes the live table's key: the applier's ON CONFLICT arbiter
// is the primary key, else the first unique index without predicate or
// expressions over NOT NULL columns the rows supply.
func targetKey(ctx context.Context, conn *pgx.Conn, name string, def *chain.Table) (target.LiveKey, error) {
	var f target.LiveKey
	schema, table, ok := strings.Cut(name, ".")
	if !ok {
		return f, fmt.Errorf("table name %q is not qualified", name)
	}
	var oid uint32
	var kind string
	err := conn.QueryRow(ctx, `SELECT c.oid, c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, table).Scan(&oid, &kind)
	if errors.Is(err, pgx.ErrNoRows) {
		f.Missing = true
		return f, nil
	}
	if err != nil {
		return f, classify(err, "inspect target table "+name)
	}
	switch kind {
	case "r", "p":
	case "v":
		f.KindRefusal = name + " is a view"
		return f, nil
	case "m":
		f.KindRefusal = name + " is a materialized view"
		return f, nil
	case "f":
		f.KindRefusal = name + " is a foreign table"
		return f, nil
	default:
		f.KindRefusal = fmt.Sprintf("%s is not a table (relkind %s)", name, kind)
		return f, nil
	}
	supplied := map[string]bool{}
	if def != nil {
		for _, c := range def.Columns {
			if c.Generated == "" {
				supplied[c.Name] = true
			}
		}
	}
	// Candidate arbiters: the primary key, else unique indexes without a
	// predicate or expressions, over NOT NULL columns.
	rows, err := conn.Query(ctx, `
		SELECT i.indisprimary, array_agg(a.attname::text ORDER BY k.ord), bool_or(a.attgenerated <> ''), bool_and(a.attnotnull)
		FROM pg_index i
		CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
		LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = $1 AND i.indisunique AND i.indpred IS NULL AND i.indisvalid
		GROUP BY i.indexrelid, i.indisprimary
		HAVING bool_and(k.attnum > 0)
		ORDER BY i.indisprimary DESC, i.indexrelid`, oid)
	if err != nil {
		return f, classify(err, "read the keys of target table "+name)
	}
	type cand struct {
		primary, generated, notNull bool
		cols                        []string
	}
	var cands []cand
	for rows.Next() {
		var c cand
		if err := rows.Scan(&c.primary, &c.cols, &c.generated, &c.notNull); err != nil {
			rows.Close()
			return f, classify(err, "read the keys of target table "+name)
		}
		cands = append(cands, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return f, classify(err, "read the keys of target table "+name)
	}
	allSupplied := func(c cand) bool {
		if c.generated {
			return false
		}
		for _, col := range c.cols {
			if !supplied[col] {
				return false
			}
		}
		return true
	}
	if len(cands) == 0 {
		f.Why = "the table has no PRIMARY KEY or UNIQUE index"
		return f, nil
	}
	if cands[0].primary {
		// The applier's arbiter is the primary key, whatever else exists.
		f.KeyCols = strings.Join(cands[0].cols, ", ")
		if allSupplied(cands[0]) {
			f.Supplied, f.Arbiter = true, cands[0].cols
			return f, nil
		}
		f.Surrogate = true
		f.Why = "its PRIMARY KEY (" + f.KeyCols + ") is not made of columns the rows supply"
		if cands[0].generated {
			f.Why = "its PRIMARY KEY (" + f.KeyCols + ") has a generated column"
		}
		return f, nil
	}
	for _, c := range cands {
		if c.notNull && allSupplied(c) {
			f.Supplied, f.KeyCols, f.Arbiter = true, strings.Join(c.cols, ", "), c.cols
			return f, nil
		}
	}
	f.Surrogate = true
	f.KeyCols = strings.Join(cands[0].cols, ", ")
	f.Why = "no UNIQUE index of NOT NULL columns the rows supply"
	return f, nil
}

// judgeColdStart runs, before a --reset-target-data cold start drops
// anything, the judgments that concern the target itself: no view, foreign
// table or materialized view may stand under a chain table's name (the
// restore would drop it), and the role must be able to use the marks table.
// The restore's incrementals apply each in one transaction, so they need no
// per-table key judgment.
func judgeColdStart(ctx context.Context, conn *pgx.Conn, schema *chain.Schema) error {
	if schema != nil {
		if err := checkExtensions(ctx, conn, schema); err != nil {
			return err
		}
	}
	return target.JudgeColdStart(ctx, schema, keyProbe{conn: conn})
}
