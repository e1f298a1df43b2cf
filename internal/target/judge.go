package target

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// LiveKey is what an engine's probe found of one table's key on the live
// target.
type LiveKey struct {
	// Missing: no relation of that name; the broker creates it from the chain.
	Missing bool
	// Supplied: the key inserts arbitrate on is made of columns the rows supply.
	Supplied bool
	// Surrogate: keyed, but only on columns the rows do not carry.
	Surrogate bool
	// KeyCols names the key's columns, for messages.
	KeyCols string
	// Arbiter is the key's columns, when Supplied.
	Arbiter []string
	// Why says why Supplied is false.
	Why string
	// KindRefusal is set when something other than a table (a view, a
	// foreign table) stands under the name.
	KindRefusal string
}

// KeyProbe is what the judgment asks of a target engine.
type KeyProbe interface {
	// ProbeKey inspects the live table named qualified ("schema.name")
	// whose recorded definition is def (nil when the chain has none).
	ProbeKey(ctx context.Context, qualified string, def *chain.Table) (LiveKey, error)
	// MarksUsable reports whether the broker can read, write and prune the
	// marks table, and if not why and what the operator should do.
	MarksUsable(ctx context.Context) (ok bool, why, hint string, err error)
}

// Judge decides, before anything of incremental m is applied, whether its
// replay into a target can be exactly-once; engines' JudgeIncremental call
// it with their probe. Each table m touches is judged twice — by the
// chain's recorded schema (a PRIMARY KEY or a NOT NULL UNIQUE index,
// partial ones not counting) and by the live target table (probe.ProbeKey).
// A table that fails either is replayed exactly once only through apply
// identities and marks; when the incremental records no identities, a
// change to the table carries none, or the marks cannot cover it, the
// replay is refused with SLUICE-E-BROKER-KEYLESS-TABLE naming the reason.
// schema is the schema in force before m. Tables sel does not take are
// neither judged nor listed: nothing of them is applied.
func Judge(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, sel *Selection, probe KeyProbe) (Judgment, error) {
	var j Judgment
	facts, err := gatherFacts(ctx, ch, m, schema, sel)
	if err != nil {
		return j, err
	}
	names := make([]string, 0, len(facts))
	for n := range facts {
		names = append(names, n)
	}
	sort.Strings(names)
	j.Tables = names

	marksOK, marksWhy, marksHint, err := probe.MarksUsable(ctx)
	if err != nil {
		return j, err
	}
	for _, name := range names {
		f := facts[name]
		lk, err := probe.ProbeKey(ctx, name, f.def)
		if err != nil {
			return j, err
		}
		if lk.KindRefusal != "" {
			return j, keyless(m, name, "target: "+lk.KindRefusal, "",
				"Drop or rename the object in the target that stands under the table's name; the broker writes only to tables.")
		}
		chainKey := f.def != nil && f.def.HasReplayKey()
		if chainKey && (lk.Missing || lk.Supplied) {
			j.Unidentified += f.unidentified
			if lk.Supplied {
				if j.Arbiters == nil {
					j.Arbiters = map[string][]string{}
				}
				j.Arbiters[name] = lk.Arbiter
			}
			continue
		}
		var failed []string
		if !chainKey {
			failed = append(failed, "chain schema: no PRIMARY KEY or NOT NULL UNIQUE index (a partial UNIQUE index does not count)")
		}
		if !lk.Missing && !lk.Supplied {
			failed = append(failed, "target: "+lk.Why)
		}
		judged := strings.Join(failed, "; ")
		switch {
		case lk.Surrogate:
			return j, keyless(m, name, judged, "APPLY-MARKS-UNAVAILABLE: the target table is keyed only on columns the replayed rows do not carry ("+lk.KeyCols+"), so a re-applied row draws a fresh key and collides with nothing",
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

// tableFacts gathers, per table, what an incremental does to it.
type tableFacts struct {
	def          *chain.Table
	changes      int64
	unidentified int64
}

// gatherFacts reads m's changes and records, per table touched, its
// definition as of its last schema change and how many of its changes
// carry no identity; tables sel does not take are left out.
func gatherFacts(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, sel *Selection) (map[string]*tableFacts, error) {
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
			c, keep := sel.Keep(it.Change())
			if !keep {
				continue
			}
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

// keyless is the refusal of a table whose replay cannot be exactly once.
func keyless(m *chain.Manifest, table, judged, reason, hint string) error {
	msg := fmt.Sprintf("incremental %s: table %s has no key the replayed rows carry (%s)", m.ID, table, judged)
	if reason != "" {
		msg += ", and " + reason
	}
	return &errcode.Error{Code: errcode.BrokerKeylessTable, Message: msg, Hint: hint}
}

// JudgeColdStart runs, before a --reset-target-data cold start drops
// anything, the judgments that concern the target itself: nothing but a
// table may stand under a chain table's name (the restore would drop it),
// and the broker must be able to use the marks table. The restore's
// incrementals apply each in one transaction, so they need no per-table key
// judgment. Engines run their own checks first (extensions, names).
func JudgeColdStart(ctx context.Context, schema *chain.Schema, probe KeyProbe) error {
	if schema != nil {
		for i := range schema.Tables {
			t := &schema.Tables[i]
			lk, err := probe.ProbeKey(ctx, t.QualifiedName(), t)
			if err != nil {
				return err
			}
			if lk.KindRefusal != "" {
				return &errcode.Error{Code: errcode.BrokerKeylessTable,
					Message: fmt.Sprintf("cold start refused before the drop: table %s of the chain: target: %s", t.QualifiedName(), lk.KindRefusal),
					Hint:    "Drop or rename the object in the target that stands under the table's name, then run the reset again."}
			}
		}
	}
	ok, why, hint, err := probe.MarksUsable(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return &errcode.Error{Code: errcode.ApplyMarksUnavailable, Message: "cold start refused before the drop: " + why, Hint: hint}
	}
	return nil
}
