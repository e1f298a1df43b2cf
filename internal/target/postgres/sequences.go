package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// RaiseSequences is RaiseSequences on the control connection.
func (t *Target) RaiseSequences(ctx context.Context, s *chain.Schema, values map[string]int64, margin int64, sel *target.Selection) (target.SequenceResult, error) {
	return raiseSequences(ctx, t.conn, s, values, margin, sel)
}

// raiseSequences moves each recorded counter's sequence on the target up to
// the recorded value (the highest the source handed out) moved margin
// further in the sequence's direction, so the target's next value comes
// after it; a sequence already there or past it is left as it is. A recorded PostgreSQL sequence is the target's sequence of the
// same name (restore and the broker create serial and identity sequences
// under their recorded names). A table's counter (a MySQL-family source's
// AUTO_INCREMENT) moves the one sequence the target's table owns, when an
// operator gave it one: the target creates a MySQL-family table's integer
// key as a plain column. What has no sequence on the target is skipped.
func raiseSequences(ctx context.Context, conn *pgx.Conn, s *chain.Schema, values map[string]int64, margin int64, sel *target.Selection) (target.SequenceResult, error) {
	var res target.SequenceResult
	for _, c := range target.Counters(s, values, sel) {
		var seq string
		switch {
		case c.Sequence != nil:
			name := ident(c.Sequence.Schema, c.Sequence.Name)
			var found bool
			if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&found); err != nil {
				return res, classify(err, "look for sequence "+c.Name)
			}
			if !found {
				res.Skipped = append(res.Skipped, c.Name+": the target has no such sequence")
				continue
			}
			seq = name
		case c.Table != nil:
			owned, err := ownedSequences(ctx, conn, ident(c.Table.Schema, c.Table.Name))
			if err != nil {
				return res, err
			}
			if len(owned) != 1 {
				res.Skipped = append(res.Skipped, fmt.Sprintf("%s: the target's table owns %d sequences, not one", c.Name, len(owned)))
				continue
			}
			seq = owned[0]
		default:
			res.Skipped = append(res.Skipped, c.Name+": not in the chain's schema")
			continue
		}
		r, err := raiseSequence(ctx, conn, seq, c.Value, margin)
		if err != nil {
			return res, err
		}
		switch {
		case r.why != "":
			res.Skipped = append(res.Skipped, c.Name+": "+r.why)
		case r.raised:
			res.Raised = append(res.Raised, target.Raised(c.Name, r.last, r.called, r.to))
		default:
			res.Kept = append(res.Kept, target.Kept(c.Name, r.last, r.to))
		}
	}
	return res, nil
}

// raiseOutcome is what raiseSequence did: whether it moved the sequence,
// the sequence's last value and is_called before, the value asked for, and
// why it could not take it.
type raiseOutcome struct {
	raised, called bool
	last, to       int64
	why            string
}

// ownedSequences lists the sequences a table owns (serial and identity
// columns), quoted, when the table exists.
func ownedSequences(ctx context.Context, conn *pgx.Conn, table string) ([]string, error) {
	rows, err := conn.Query(ctx, `
		SELECT d.objid::regclass::text
		FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
		WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
		  AND d.refobjid = to_regclass($1) AND d.deptype IN ('a', 'i')
		ORDER BY 1`, table)
	if err != nil {
		return nil, classify(err, "list the sequences of "+table)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify(err, "list the sequences of "+table)
	}
	return out, nil
}

// raiseSequence sets seq (a quoted name) so that its next value follows v
// moved margin further, in its direction (up for a positive increment,
// down for a negative one), unless it already does; why says why a value
// cannot be taken.
func raiseSequence(ctx context.Context, conn *pgx.Conn, seq string, v, margin int64) (raiseOutcome, error) {
	var r raiseOutcome
	var inc, lo, hi int64
	err := conn.QueryRow(ctx, `SELECT s.last_value, s.is_called, p.seqincrement, p.seqmin, p.seqmax
		FROM `+seq+` s, pg_sequence p WHERE p.seqrelid = $1::regclass`, seq).Scan(&r.last, &r.called, &inc, &lo, &hi)
	if err != nil {
		return r, classify(err, "read sequence "+seq)
	}
	to, ok := target.WithMargin(v, margin, inc)
	if !ok {
		r.why = fmt.Sprintf("%d with a margin of %d leaves the 64-bit range", v, margin)
		return r, nil
	}
	r.to = to
	if to < lo || to > hi {
		r.why = fmt.Sprintf("%d is outside the target sequence's range %d..%d", to, lo, hi)
		if margin > 0 {
			r.why = fmt.Sprintf("%d (%d with a margin of %d) is outside the target sequence's range %d..%d", to, v, margin, lo, hi)
		}
		return r, nil
	}
	beyond := func(a, b int64) bool { // a comes after b in the sequence's direction
		if inc < 0 {
			return a < b
		}
		return a > b
	}
	// Handed out through last (is_called), or next to hand out last.
	if r.called && !beyond(to, r.last) || !r.called && beyond(r.last, to) {
		return r, nil
	}
	if _, err := conn.Exec(ctx, `SELECT setval($1::regclass, $2, true)`, seq, to); err != nil {
		return r, classify(err, "set sequence "+seq)
	}
	r.raised = true
	return r, nil
}
