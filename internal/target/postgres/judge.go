package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// Judgment is what the broker learned about an incremental (target.Judgment).
type Judgment = target.Judgment

// tableFacts gathers, per table, what an incremental does to it.
type tableFacts struct {
	def          *chain.Table
	changes      int64
	unidentified int64
}

// JudgeIncremental decides, before anything of m is applied, whether its
// replay into the target can be exactly-once. Each table m touches is judged
// twice — by the chain's recorded schema (a PRIMARY KEY or a NOT NULL UNIQUE
// index, partial ones not counting) and by the live target table (the
// ON CONFLICT arbiter the applier picks, primary key first, must be made of
// columns the rows supply; a view, foreign table or materialized view under
// the name is refused). A table that fails either judgment is replayed
// exactly once only through apply identities and marks; when the incremental
// records no identities, a change to the table carries none, or the marks
// cannot cover it, the replay is refused with SLUICE-E-BROKER-KEYLESS-TABLE
// naming the reason.
func JudgeIncremental(ctx context.Context, conn *pgx.Conn, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema) (Judgment, error) {
	var j Judgment
	defs := map[string]*chain.Table{}
	if schema != nil {
		for i := range schema.Tables {
			defs[schema.Tables[i].QualifiedName()] = &schema.Tables[i]
		}
	}
	facts := map[string]*tableFacts{}
	touch := func(name string) *tableFacts {
		f := facts[name]
		if f == nil {
			f = &tableFacts{def: defs[name]}
			facts[name] = f
		}
		return f
	}
	for _, ref := range m.Chunks {
		it, err := ch.ReadChangeChunk(ctx, ref)
		if err != nil {
			return j, err
		}
		for it.Next() {
			c := it.Change()
			switch c.Op {
			case chain.OpBegin, chain.OpCommit:
				continue
			case chain.OpSchema:
				if c.Schema != nil {
					t := *c.Schema
					defs[t.QualifiedName()] = &t
					touch(t.QualifiedName()).def = &t
				}
				continue
			case chain.OpTruncate:
				for _, name := range c.Tables {
					touch(name).changes++
				}
				continue
			}
			f := touch(c.Table)
			f.changes++
			if !c.Identified || !m.ApplyIdentity {
				f.unidentified++
			}
		}
		if err := it.Err(); err != nil {
			return j, err
		}
	}
	names := make([]string, 0, len(facts))
	for n := range facts {
		names = append(names, n)
	}
	sort.Strings(names)
	j.Tables = names

	marksOK, marksWhy, err := marksUsable(ctx, conn)
	if err != nil {
		return j, err
	}
	for _, name := range names {
		f := facts[name]
		tk, err := targetKey(ctx, conn, name, f.def)
		if err != nil {
			return j, err
		}
		if tk.kindRefusal != "" {
			return j, keyless(m, name, "target: "+tk.kindRefusal, "",
				"Drop or rename the object in the target that stands under the table's name; the broker writes only to tables.")
		}
		chainKey := f.def != nil && f.def.HasReplayKey()
		keyed := chainKey && (tk.missing || tk.supplied)
		if keyed {
			j.Unidentified += f.unidentified
			if tk.supplied {
				if j.Arbiters == nil {
					j.Arbiters = map[string][]string{}
				}
				j.Arbiters[name] = tk.arbiter
			}
			continue
		}
		var failed []string
		if !chainKey {
			failed = append(failed, "chain schema: no PRIMARY KEY or NOT NULL UNIQUE index (a partial UNIQUE index does not count)")
		}
		if !tk.missing && !tk.supplied {
			failed = append(failed, "target: "+tk.why)
		}
		judged := strings.Join(failed, "; ")
		switch {
		case tk.surrogate:
			return j, keyless(m, name, judged, "APPLY-MARKS-UNAVAILABLE: the target table is keyed only on columns the replayed rows do not carry ("+tk.keyCols+"), so a re-applied row draws a fresh key and collides with nothing",
				"Give the target table the source's key instead of a surrogate, or rebuild the target with --reset-target-data so the table is created from the chain's schema.")
		case !m.ApplyIdentity:
			return j, keyless(m, name, judged, "the incremental records no apply identities",
				"--reset-target-data restores the chain through its tail; then only later incrementals are judged, which a current producer writes with identities. Otherwise put a key on the source table and take a new full backup.")
		case f.unidentified > 0:
			return j, keyless(m, name, judged, fmt.Sprintf("BROKER-KEYLESS-NO-IDENTITY: %d of its %d changes in the incremental carry no apply identity", f.unidentified, f.changes),
				"Put a PRIMARY KEY (or a NOT NULL UNIQUE index) on the source table and take a new full backup, then start on the new chain with --reset-target-data; for a table keyless only on the target, give it the source's key.")
		case !marksOK:
			return j, keyless(m, name, judged, "APPLY-MARKS-UNAVAILABLE: "+marksWhy,
				"Let the target role create and write sluice_cdc_apply_marks (GRANT CREATE ON SCHEMA public, or create the table and GRANT SELECT, INSERT, DELETE on it).")
		}
		// Keyless, but every change is named and the marks cover it.
	}
	return j, nil
}

func keyless(m *chain.Manifest, table, judged, reason, hint string) error {
	msg := fmt.Sprintf("incremental %s: table %s has no key the replayed rows carry (%s)", m.ID, table, judged)
	if reason != "" {
		msg += ", and " + reason
	}
	return &errcode.Error{Code: errcode.BrokerKeylessTable, Message: msg, Hint: hint}
}

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

// targetKeyFacts is the live target table's side of the key judgment.
type targetKeyFacts struct {
	missing     bool     // no relation of that name: the broker creates it from the chain
	supplied    bool     // the arbiter the applier picks is made of supplied columns
	surrogate   bool     // keyed, but only on columns the rows do not carry
	keyCols     string   // the arbiter's columns, for messages
	arbiter     []string // the arbiter's columns, when supplied
	why         string   // why supplied is false
	kindRefusal string   // a view, foreign table or materialized view stands there
}

func targetKey(ctx context.Context, conn *pgx.Conn, name string, def *chain.Table) (targetKeyFacts, error) {
	var f targetKeyFacts
	schema, table, ok := strings.Cut(name, ".")
	if !ok {
		return f, fmt.Errorf("table name %q is not qualified", name)
	}
	var oid uint32
	var kind string
	err := conn.QueryRow(ctx, `SELECT c.oid, c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`, schema, table).Scan(&oid, &kind)
	if errors.Is(err, pgx.ErrNoRows) {
		f.missing = true
		return f, nil
	}
	if err != nil {
		return f, classify(err, "inspect target table "+name)
	}
	switch kind {
	case "r", "p":
	case "v":
		f.kindRefusal = name + " is a view"
		return f, nil
	case "m":
		f.kindRefusal = name + " is a materialized view"
		return f, nil
	case "f":
		f.kindRefusal = name + " is a foreign table"
		return f, nil
	default:
		f.kindRefusal = fmt.Sprintf("%s is not a table (relkind %s)", name, kind)
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
		f.why = "the table has no PRIMARY KEY or UNIQUE index"
		return f, nil
	}
	if cands[0].primary {
		// The applier's arbiter is the primary key, whatever else exists.
		f.keyCols = strings.Join(cands[0].cols, ", ")
		if allSupplied(cands[0]) {
			f.supplied, f.arbiter = true, cands[0].cols
			return f, nil
		}
		f.surrogate = true
		f.why = "its PRIMARY KEY (" + f.keyCols + ") is not made of columns the rows supply"
		if cands[0].generated {
			f.why = "its PRIMARY KEY (" + f.keyCols + ") has a generated column"
		}
		return f, nil
	}
	for _, c := range cands {
		if c.notNull && allSupplied(c) {
			f.supplied, f.keyCols, f.arbiter = true, strings.Join(c.cols, ", "), c.cols
			return f, nil
		}
	}
	f.surrogate = true
	f.keyCols = strings.Join(cands[0].cols, ", ")
	f.why = "no UNIQUE index of NOT NULL columns the rows supply"
	return f, nil
}

// JudgeColdStart runs, before a --reset-target-data cold start drops
// anything, the judgments that concern the target itself: no view, foreign
// table or materialized view may stand under a chain table's name (the
// restore would drop it), and the role must be able to use the marks table.
// The restore's incrementals apply each in one transaction, so they need no
// per-table key judgment.
func JudgeColdStart(ctx context.Context, conn *pgx.Conn, schema *chain.Schema) error {
	if schema != nil {
		if err := CheckExtensions(ctx, conn, schema); err != nil {
			return err
		}
		for i := range schema.Tables {
			t := &schema.Tables[i]
			tk, err := targetKey(ctx, conn, t.QualifiedName(), t)
			if err != nil {
				return err
			}
			if tk.kindRefusal != "" {
				return &errcode.Error{Code: errcode.BrokerKeylessTable,
					Message: fmt.Sprintf("cold start refused before the drop: table %s of the chain: target: %s", t.QualifiedName(), tk.kindRefusal),
					Hint:    "Drop or rename the object in the target that stands under the table's name, then run the reset again."}
			}
		}
	}
	ok, why, err := marksUsable(ctx, conn)
	if err != nil {
		return err
	}
	if !ok {
		return errcode.New(errcode.ApplyMarksUnavailable, "cold start refused before the drop: %s", why)
	}
	return nil
}
