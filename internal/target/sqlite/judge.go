package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// marksHint is the remedy when the marks table cannot be used.
const marksHint = "Let the broker write the SQLite database file and its directory (sluice_cdc_apply_marks lives in the file, beside its WAL), then run again."

// tableFacts gathers, per table, what an incremental does to it.
type tableFacts struct {
	def          *chain.Table
	changes      int64
	unidentified int64
}

// JudgeIncremental decides, before anything of m is applied, whether its
// replay into the target can be exactly-once. Each table m touches is
// judged twice: by the chain's recorded schema (a PRIMARY KEY or a NOT
// NULL UNIQUE index, partial ones not counting) and by the live SQLite
// table (a PRIMARY KEY or a UNIQUE index without predicate or expressions,
// of NOT NULL, non-generated columns the rows supply; a view under the
// name is refused). A table failing either is replayed exactly once only
// through apply identities and marks; when the incremental records no
// identities, a change to the table carries none, or the marks cannot
// cover it, the replay is refused with SLUICE-E-BROKER-KEYLESS-TABLE
// naming the reason. A rowid-only table is keyless.
func (t *Target) JudgeIncremental(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema) (target.Judgment, error) {
	var j target.Judgment
	facts, err := gatherFacts(ctx, ch, m, schema)
	if err != nil {
		return j, err
	}
	names := make([]string, 0, len(facts))
	for n := range facts {
		names = append(names, n)
	}
	sort.Strings(names)
	j.Tables = names

	conn, err := t.db.Conn(ctx)
	if err != nil {
		return j, classify(err, "connect to judge incremental "+m.ID)
	}
	defer conn.Close()
	marksOK, marksWhy, err := marksUsable(ctx, conn)
	if err != nil {
		return j, err
	}
	for _, name := range names {
		f := facts[name]
		lk, err := probeKey(ctx, conn, name, f.def)
		if err != nil {
			return j, err
		}
		if lk.kindRefusal != "" {
			return j, keyless(m, name, "target: "+lk.kindRefusal, "",
				"Drop or rename the object in the target that stands under the table's name; the broker writes only to tables.")
		}
		chainKey := f.def != nil && f.def.HasReplayKey()
		if chainKey && (lk.missing || lk.supplied) {
			j.Unidentified += f.unidentified
			if lk.supplied {
				if j.Arbiters == nil {
					j.Arbiters = map[string][]string{}
				}
				j.Arbiters[name] = lk.arbiter
			}
			continue
		}
		var failed []string
		if !chainKey {
			failed = append(failed, "chain schema: no PRIMARY KEY or NOT NULL UNIQUE index (a partial UNIQUE index does not count)")
		}
		if !lk.missing && !lk.supplied {
			failed = append(failed, "target: "+lk.why)
		}
		judged := strings.Join(failed, "; ")
		switch {
		case lk.surrogate:
			return j, keyless(m, name, judged, "APPLY-MARKS-UNAVAILABLE: the target table is keyed only on columns the replayed rows do not carry ("+lk.keyCols+"), so a re-applied row draws a fresh key and collides with nothing",
				"Give the target table the source's key instead of a surrogate, or rebuild the target with --reset-target-data so the table is created from the chain's schema.")
		case !m.ApplyIdentity:
			return j, keyless(m, name, judged, "the incremental records no apply identities",
				"--reset-target-data restores the chain through its tail; then only later incrementals are judged, which a current producer writes with identities. Otherwise put a key on the source table and take a new full backup.")
		case f.unidentified > 0:
			return j, keyless(m, name, judged, fmt.Sprintf("BROKER-KEYLESS-NO-IDENTITY: %d of its %d changes in the incremental carry no apply identity", f.unidentified, f.changes),
				"Put a PRIMARY KEY (or a NOT NULL UNIQUE index) on the source table and take a new full backup, then start on the new chain with --reset-target-data; for a table keyless only on the target, give it the source's key.")
		case !marksOK:
			return j, keyless(m, name, judged, "APPLY-MARKS-UNAVAILABLE: "+marksWhy, marksHint)
		}
		// Keyless, but every change is named and the marks cover it.
	}
	return j, nil
}

// gatherFacts reads m's changes and records, per table touched, its
// definition as of its last schema change and how many of its changes
// carry no identity.
func gatherFacts(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema) (map[string]*tableFacts, error) {
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
			return nil, err
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
			return nil, err
		}
	}
	return facts, nil
}

func keyless(m *chain.Manifest, table, judged, reason, hint string) error {
	msg := fmt.Sprintf("incremental %s: table %s has no key the replayed rows carry (%s)", m.ID, table, judged)
	if reason != "" {
		msg += ", and " + reason
	}
	return &errcode.Error{Code: errcode.BrokerKeylessTable, Message: msg, Hint: hint}
}

// marksUsable reports whether the broker can keep marks in the database:
// the marks table exists, or can be created now.
func marksUsable(ctx context.Context, conn *sql.Conn) (bool, string, error) {
	err := ensureControlTablesOn(ctx, conn)
	if err == nil {
		return true, "", nil
	}
	if errcode.Is(err, errcode.ApplyMarksUnavailable) || readOnly(err) {
		return false, "the target database file may not be written, so " + marksTable + " cannot be created or written", nil
	}
	return false, "", err
}

// JudgeColdStart runs, before a --reset-target-data cold start drops
// anything, the judgments that concern the target itself: the chain's
// names must map onto SQLite without colliding, no view may stand under a
// chain table's name, and the marks table must be usable.
func (t *Target) JudgeColdStart(ctx context.Context, schema *chain.Schema) error {
	if err := checkNames(schema); err != nil {
		return err
	}
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return classify(err, "connect to judge the cold start")
	}
	defer conn.Close()
	if schema != nil {
		for i := range schema.Tables {
			tb := &schema.Tables[i]
			lk, err := probeKey(ctx, conn, tb.QualifiedName(), tb)
			if err != nil {
				return err
			}
			if lk.kindRefusal != "" {
				return &errcode.Error{Code: errcode.BrokerKeylessTable,
					Message: fmt.Sprintf("cold start refused before the drop: table %s of the chain: target: %s", tb.QualifiedName(), lk.kindRefusal),
					Hint:    "Drop or rename the object in the target that stands under the table's name, then run the reset again."}
			}
		}
	}
	ok, why, err := marksUsable(ctx, conn)
	if err != nil {
		return err
	}
	if !ok {
		return &errcode.Error{Code: errcode.ApplyMarksUnavailable, Message: "cold start refused before the drop: " + why, Hint: marksHint}
	}
	return nil
}
