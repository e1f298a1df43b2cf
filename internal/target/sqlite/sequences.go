package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// RaiseSequences moves the sqlite_sequence row of each recorded counter's
// table up to the recorded value (the highest the source handed out) moved
// margin further, in one transaction. The counter of a table is a MySQL-family source's
// AUTO_INCREMENT, or a PostgreSQL source's serial or identity sequence, by
// the table that owns it. Only an AUTOINCREMENT table keeps such a row; the
// tables this target creates are rowid tables, whose next key SQLite takes
// as the largest one plus one, so they need no counter and are skipped, as
// is a sequence no table owns (SQLite has no sequences).
func (t *Target) RaiseSequences(ctx context.Context, s *chain.Schema, values map[string]int64, margin int64, sel *target.Selection) (target.SequenceResult, error) {
	var res target.SequenceResult
	counters := target.Counters(s, values, sel)
	if len(counters) == 0 {
		return res, nil
	}
	err := withWrite(ctx, t.db, "raise the AUTOINCREMENT counters", func(conn *sql.Conn) error {
		for _, c := range counters {
			switch {
			case c.Table == nil && c.Sequence != nil:
				res.Skipped = append(res.Skipped, c.Name+": a sequence no table owns has no counterpart in SQLite")
				continue
			case c.Table == nil:
				res.Skipped = append(res.Skipped, c.Name+": not in the chain's schema")
				continue
			}
			v, ok := target.WithMargin(c.Value, margin, 1)
			if !ok {
				res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %d with a margin of %d leaves the 64-bit range", c.Name, c.Value, margin))
				continue
			}
			name := tableName(c.Table)
			var def string
			err := conn.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&def)
			switch {
			case err == sql.ErrNoRows:
				res.Skipped = append(res.Skipped, c.Name+": the target has no table "+name)
				continue
			case err != nil:
				return classify(err, "read the definition of "+name)
			case !strings.Contains(strings.ToUpper(def), "AUTOINCREMENT"):
				res.Skipped = append(res.Skipped, c.Name+": "+name+" is not an AUTOINCREMENT table (its next key is its largest plus one)")
				continue
			}
			var seq sql.NullInt64
			err = conn.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = ?`, name).Scan(&seq)
			switch {
			case err != nil && err != sql.ErrNoRows:
				return classify(err, "read the AUTOINCREMENT counter of "+name)
			case seq.Valid && seq.Int64 >= v:
				res.Kept = append(res.Kept, target.Kept(c.Name, seq.Int64, v))
				continue
			case seq.Valid:
				_, err = conn.ExecContext(ctx, `UPDATE sqlite_sequence SET seq = ? WHERE name = ?`, v, name)
			default:
				_, err = conn.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)`, name, v)
			}
			if err != nil {
				return classify(err, "raise the AUTOINCREMENT counter of "+name)
			}
			res.Raised = append(res.Raised, target.Raised(c.Name, seq.Int64, seq.Valid, v))
		}
		return nil
	})
	return res, err
}
