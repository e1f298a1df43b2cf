package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
)

// Sequences reads, from pg_sequences, the last value of every sequence the
// session's schema records (identity sequences included), by qualified
// name. pg_sequences gives no value for a sequence that has handed out
// nothing since its creation or a setval(…, false), nor for one the
// session's role may not read; those are left out. The value is the one
// last written to disk, which with a cache above 1 may be ahead of what was
// handed out: a target raised to it collides with nothing either way.
func (c *Capture) Sequences(ctx context.Context) (map[string]int64, error) {
	var schema *chain.Schema
	if c.tracker != nil {
		schema = c.tracker.base
	}
	return readSequenceValues(ctx, c.sql, schema)
}

// readSequenceValues reads the last values of s's sequences over conn.
func readSequenceValues(ctx context.Context, conn *pgx.Conn, s *chain.Schema) (map[string]int64, error) {
	if s == nil || len(s.Sequences) == 0 {
		return nil, nil
	}
	schemas := make([]string, len(s.Sequences))
	names := make([]string, len(s.Sequences))
	for i, q := range s.Sequences {
		schemas[i], names[i] = q.Schema, q.Name
	}
	rows, err := conn.Query(ctx, `
		SELECT s.schemaname, s.sequencename, s.last_value
		FROM pg_sequences s
		JOIN unnest($1::text[], $2::text[]) AS w(schemaname, sequencename)
		  ON w.schemaname = s.schemaname AND w.sequencename = s.sequencename
		WHERE s.last_value IS NOT NULL`, schemas, names)
	if err != nil {
		return nil, classify(err, "read the source's sequence values")
	}
	defer rows.Close()
	var out map[string]int64
	for rows.Next() {
		var schema, name string
		var v int64
		if err := rows.Scan(&schema, &name, &v); err != nil {
			return nil, classify(err, "read the source's sequence values")
		}
		if out == nil {
			out = map[string]int64{}
		}
		out[schema+"."+name] = v
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err, "read the source's sequence values")
	}
	return out, nil
}
