package sqlite

import (
	"context"
	"database/sql"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// marksHint is the remedy when the marks table cannot be used.
const marksHint = "Let the broker write the SQLite database file and its directory (sluice_cdc_apply_marks lives in the file, beside its WAL), then run again."

// JudgeIncremental decides, before anything of m is applied, whether its
// replay into the target can be exactly-once, by the rules of target.Judge:
// the live table's side is a PRIMARY KEY or a UNIQUE index without
// predicate or expressions, of NOT NULL, non-generated columns the rows
// supply (a view under the name is refused); a rowid-only table is
// keyless.
func (t *Target) JudgeIncremental(ctx context.Context, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, sel *target.Selection) (target.Judgment, error) {
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return target.Judgment{}, classify(err, "connect to judge incremental "+m.ID)
	}
	defer conn.Close()
	return target.Judge(ctx, ch, m, schema, sel, keyProbe{conn: conn})
}

// keyProbe is the SQLite target's side of the judgment.
type keyProbe struct{ conn *sql.Conn }

func (p keyProbe) ProbeKey(ctx context.Context, qualified string, def *chain.Table) (target.LiveKey, error) {
	return probeKey(ctx, p.conn, qualified, def)
}

func (p keyProbe) MarksUsable(ctx context.Context) (bool, string, string, error) {
	ok, why, err := marksUsable(ctx, p.conn)
	return ok, why, marksHint, err
}

// marksUsable reports whether the broker can keep marks in the database:
// the marks table exists, or can be created now.
func marksUsable(ctx context.Context, conn *sql.Conn) (bool, string, error) {
	err := control.Ensure(ctx, conn)
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
	return target.JudgeColdStart(ctx, schema, keyProbe{conn: conn})
}
