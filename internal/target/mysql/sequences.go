package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// RaiseSequences moves the AUTO_INCREMENT counter of each recorded
// counter's table past the recorded value (the highest the source handed
// out, moved margin further) with ALTER TABLE … AUTO_INCREMENT, when the
// counter is below it; the
// server never lowers one under the column's largest value anyway. The
// counter of a table is a MySQL-family source's AUTO_INCREMENT, or a
// PostgreSQL source's serial or identity sequence, by the table that owns
// it. It moves only on a target table with an AUTO_INCREMENT column: the
// tables this target creates have none (a key is a plain column, written
// with the source's values), so such a counter is skipped, and so is a
// sequence no table owns (the target has no sequences).
func (t *Target) RaiseSequences(ctx context.Context, s *chain.Schema, values map[string]int64, margin int64, sel *target.Selection) (target.SequenceResult, error) {
	var res target.SequenceResult
	counters := target.Counters(s, values, sel)
	if len(counters) == 0 {
		return res, nil
	}
	conn, err := t.db.Conn(ctx)
	if err != nil {
		return res, classify(err, "connect to raise the AUTO_INCREMENT counters")
	}
	defer conn.Close()
	if !t.flavor.mariadb {
		// MySQL caches information_schema.TABLES.AUTO_INCREMENT for a day.
		if _, err := conn.ExecContext(ctx, "SET SESSION information_schema_stats_expiry = 0"); err != nil {
			return res, classify(err, "read the AUTO_INCREMENT counters")
		}
	}
	for _, c := range counters {
		switch {
		case c.Table == nil && c.Sequence != nil:
			res.Skipped = append(res.Skipped, c.Name+": a sequence no table owns has no counterpart on this target")
			continue
		case c.Table == nil:
			res.Skipped = append(res.Skipped, c.Name+": not in the chain's schema")
			continue
		}
		v, ok := target.WithMargin(c.Value, margin, 1)
		if !ok || v == math.MaxInt64 {
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s: %d with a margin of %d leaves no next value", c.Name, c.Value, margin))
			continue
		}
		name := tableName(c.Table)
		var next sql.Null[uint64]
		var autoCols int
		err := conn.QueryRowContext(ctx, `SELECT t.AUTO_INCREMENT,
			(SELECT COUNT(*) FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME
			 AND LOWER(c.EXTRA) LIKE '%auto_increment%')
			FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = ?`, name).Scan(&next, &autoCols)
		switch {
		case err == sql.ErrNoRows:
			res.Skipped = append(res.Skipped, c.Name+": the target has no table "+name)
			continue
		case err != nil:
			return res, classify(err, "read the AUTO_INCREMENT counter of "+name)
		case autoCols == 0:
			res.Skipped = append(res.Skipped, c.Name+": the target's table "+name+" has no AUTO_INCREMENT column")
			continue
		}
		want := uint64(v) + 1
		if v < 0 {
			continue
		}
		if next.Valid && next.V >= want {
			res.Kept = append(res.Kept, target.Kept(c.Name, int64(next.V)-1, v))
			continue
		}
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s AUTO_INCREMENT = %d", quoteIdent(name), want)); err != nil {
			return res, classify(err, "raise the AUTO_INCREMENT counter of "+name)
		}
		res.Raised = append(res.Raised, target.Raised(c.Name, int64(next.V)-1, next.Valid && next.V > 1, v))
	}
	return res, nil
}
