package mysql

import (
	"context"
	"database/sql"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// marksHint is the remedy when the marks table cannot be used.
const marksHint = "Grant the target user CREATE, SELECT, INSERT, UPDATE and DELETE on the target database (or create sluice_cdc_state and sluice_cdc_apply_marks as an administrator and grant it SELECT, INSERT, UPDATE and DELETE on both), then run again."

// uniqueSeen records, per qualified table name, whether the live table had
// more than one unique index when the broker last judged it; lanes opened
// after the judgment then never use ON DUPLICATE KEY UPDATE on it.
type uniqueSeen struct {
	mu     sync.Mutex
	tables map[string]bool
}

func (t *Target) noteUnique(qualified string, multi bool) {
	t.unique.mu.Lock()
	defer t.unique.mu.Unlock()
	if t.unique.tables == nil {
		t.unique.tables = map[string]bool{}
	}
	t.unique.tables[qualified] = multi
}

// multiUniqueTables copies what the judgments found.
func (t *Target) multiUniqueTables() map[string]bool {
	t.unique.mu.Lock()
	defer t.unique.mu.Unlock()
	out := make(map[string]bool, len(t.unique.tables))
	for k, v := range t.unique.tables {
		out[k] = v
	}
	return out
}

// JudgeIncremental decides, before anything of m is applied, whether its
// replay into the target can be exactly-once, by the rules of target.Judge
// and the spec's MySQL-family key rule: the live table needs some PRIMARY
// KEY or UNIQUE index of NOT NULL, non-generated columns the rows supply in
// full — an index on a column prefix (SUB_PART) or an expression never
// counts — and a view under the name is refused.
func (t *Target) JudgeIncremental(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, sel *target.Selection) (target.Judgment, error) {
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return target.Judgment{}, classify(err, "connect to judge incremental "+m.ID)
	}
	defer conn.Close()
	return target.Judge(ctx, ch, m, schema, sel, keyProbe{t: t, conn: conn})
}

// JudgeColdStart runs, before a --reset-target-data cold start drops
// anything, the judgments that concern the target itself: the chain's
// names must map onto MySQL, no view may stand under a chain table's name,
// and the marks table must be usable.
func (t *Target) JudgeColdStart(ctx context.Context, schema *chain.Schema) error {
	if err := checkNames(schema); err != nil {
		return err
	}
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return classify(err, "connect to judge the cold start")
	}
	defer conn.Close()
	return target.JudgeColdStart(ctx, schema, keyProbe{t: t, conn: conn})
}

// keyProbe is the MySQL target's side of the judgment.
type keyProbe struct {
	t    *Target
	conn *sql.Conn
}

// keyCandidate is a PRIMARY KEY or UNIQUE index of a live table.
type keyCandidate struct {
	name    string
	primary bool
	cols    []string // "" for a prefix or functional key part
}

func (p keyProbe) ProbeKey(ctx context.Context, qualified string, def *chain.Table) (target.LiveKey, error) {
	var lk target.LiveKey
	name := nameOfQualified(qualified)
	if def != nil {
		name = tableName(def)
	}
	live, err := readLive(ctx, p.conn, name)
	if err != nil {
		return lk, err
	}
	switch {
	case !live.exists:
		lk.Missing = true
		return lk, nil
	case live.view:
		lk.KindRefusal = qualified + " is a view (MySQL " + name + ")"
		return lk, nil
	}
	var cands []keyCandidate
	for ix, cols := range live.indexes {
		if live.unique[ix] {
			cands = append(cands, keyCandidate{name: ix, primary: ix == "PRIMARY", cols: cols})
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].primary != cands[j].primary {
			return cands[i].primary
		}
		return cands[i].name < cands[j].name
	})
	p.t.noteUnique(qualified, len(cands) > 1)
	if len(cands) == 0 {
		lk.Why = "the table has no PRIMARY KEY or UNIQUE index"
		return lk, nil
	}
	supplied := map[string]bool{}
	if def != nil {
		for _, c := range def.SuppliedColumns() {
			supplied[foldName(c.Name)] = true
		}
	}
	carried, prefixOnly := false, true
	var qualifying []keyCandidate
	for _, k := range cands {
		whole, all, derived, notNull := true, true, true, true
		for _, c := range k.cols {
			if c == "" {
				whole = false
				continue
			}
			lc, _ := live.column(c)
			all = all && supplied[foldName(c)] && !lc.generated
			// A generated column is computed from the row, so a re-applied
			// row would collide on it: the key is no surrogate, though it
			// never counts as supplied.
			derived = derived && (supplied[foldName(c)] || lc.generated)
			notNull = notNull && !lc.nullable
		}
		if !whole {
			continue
		}
		prefixOnly = false
		carried = carried || derived
		if all && notNull {
			qualifying = append(qualifying, k)
		}
	}
	if len(qualifying) == 0 {
		lk.KeyCols = strings.Join(cands[0].cols, ", ")
		switch {
		case prefixOnly:
			lk.Why = "its only PRIMARY KEY or UNIQUE indexes are on column prefixes or expressions, which do not count"
		default:
			lk.Surrogate = !carried
			lk.Why = "no PRIMARY KEY or UNIQUE index of NOT NULL, non-generated columns the rows supply"
		}
		return lk, nil
	}
	pick := qualifying[0]
	if !pick.primary && def != nil {
		sup := def.SuppliedColumns()
	chainKeys:
		for _, key := range def.CandidateKeys() {
			names := make([]string, len(key))
			for i, k := range key {
				names[i] = sup[k].Name
			}
			for _, k := range qualifying {
				if sameColumns(k.cols, names) {
					pick = k
					break chainKeys
				}
			}
		}
	}
	lk.Supplied, lk.Arbiter, lk.KeyCols = true, slices.Clone(pick.cols), strings.Join(pick.cols, ", ")
	return lk, nil
}

func (p keyProbe) MarksUsable(ctx context.Context) (bool, string, string, error) {
	if err := p.t.control.Ensure(ctx, p.conn); err != nil {
		if privileged(err) {
			return false, "the target user may not create " + marksTable + " or " + stateTable, marksHint, nil
		}
		return false, "", "", err
	}
	for _, probe := range []string{
		`DELETE FROM ` + marksTable + ` WHERE 1 = 0`,
		`INSERT INTO ` + marksTable + ` SELECT * FROM ` + marksTable + ` WHERE 1 = 0`,
		`UPDATE ` + stateTable + ` SET token = token WHERE 1 = 0`,
	} {
		if _, err := p.conn.ExecContext(ctx, probe); err != nil {
			if privileged(err) {
				return false, "the target user may not write " + marksTable + " and " + stateTable, marksHint, nil
			}
			return false, "", "", classify(err, "check the marks table")
		}
	}
	return true, "", "", nil
}
