package mysql

import (
	"context"
	"database/sql"
	"math"
)

// Sequences reads the AUTO_INCREMENT counter of every table the capture
// tracks (the chain's tables, those created since included) from
// information_schema.TABLES, by qualified name, as the highest value the
// table has handed out: the counter, which is the next value, less one. A
// table without an AUTO_INCREMENT column, or whose counter has handed out
// nothing, is left out. On MySQL the session first turns off the cache of
// table statistics (information_schema_stats_expiry), which would
// otherwise answer a value up to a day old.
func (c *capture) Sequences(ctx context.Context) (map[string]int64, error) {
	if c.track == nil || len(c.track.tables) == 0 {
		return nil, nil
	}
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, classify(err, "read the source's AUTO_INCREMENT counters")
	}
	defer conn.Close()
	if !c.srv.mariadb {
		if _, err := conn.ExecContext(ctx, "SET SESSION information_schema_stats_expiry = 0"); err != nil {
			return nil, classify(err, "read the source's AUTO_INCREMENT counters")
		}
	}
	rows, err := conn.QueryContext(ctx, `SELECT TABLE_NAME, AUTO_INCREMENT FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND AUTO_INCREMENT IS NOT NULL`, c.c.database)
	if err != nil {
		return nil, classify(err, "read the source's AUTO_INCREMENT counters")
	}
	defer rows.Close()
	var out map[string]int64
	for rows.Next() {
		var name string
		var next sql.Null[uint64]
		if err := rows.Scan(&name, &next); err != nil {
			return nil, classify(err, "read the source's AUTO_INCREMENT counters")
		}
		tr := c.track.tables[name]
		if tr == nil || tr.excluded || !next.Valid || next.V <= 1 || next.V > math.MaxInt64 {
			continue
		}
		if out == nil {
			out = map[string]int64{}
		}
		out[c.c.database+"."+name] = int64(next.V - 1)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err, "read the source's AUTO_INCREMENT counters")
	}
	return out, nil
}
