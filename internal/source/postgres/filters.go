package postgres

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/filter"
)

// oidText is the OID of PostgreSQL's text type.
const oidText = 25

// readShapedSchema reads the schema in tx and shapes it through f: the
// schema the chain records (excluded tables and columns left out), the OIDs
// of its tables in its order, and each recorded table's shape by qualified
// name (nil without a filter). Only what crosses is checked for being
// carriable, so an excluded table or column of a type the chain cannot
// carry does not stop the full. The filter's refusals come back unchanged
// (they are coded).
func readShapedSchema(ctx context.Context, tx pgx.Tx, f *filter.Filter, enc filter.FixedEncoder) (*chain.Schema, []uint32, map[string]*filter.Shape, error) {
	s, oids, err := readSchema(ctx, tx)
	if err != nil {
		return nil, nil, nil, err
	}
	if f == nil {
		if err := checkCarried(ctx, tx, s, oids); err != nil {
			return nil, nil, nil, err
		}
		return s, oids, nil, nil
	}
	shaped, shapes, err := f.ShapeSchema(s, enc)
	if err != nil {
		return nil, nil, nil, err
	}
	byName := make(map[string]uint32, len(s.Tables))
	for i := range s.Tables {
		byName[s.Tables[i].QualifiedName()] = oids[i]
	}
	kept := make([]uint32, len(shaped.Tables))
	for i := range shaped.Tables {
		kept[i] = byName[shaped.Tables[i].QualifiedName()]
	}
	if err := checkCarried(ctx, tx, shaped, kept); err != nil {
		return nil, nil, nil, err
	}
	return shaped, kept, shapes, nil
}

// fixedEncoder is the filter.FixedEncoder of a PostgreSQL source: it asks
// the server, over conn, to cast a fixed:VALUE mask's value to the column's
// type, and returns the value's text output (under the chain's text
// settings, which conn carries) and its binary send form, the one a full's
// chunks hold for a binary-encoded column. A value the type (or a domain's
// check) refuses comes back as the server's error.
//
// The type is the column's format_type text as the source's own catalog
// printed it (schema-qualified, quoted where needed); it is never text read
// from a chain.
func fixedEncoder(ctx context.Context, conn *pgconn.PgConn) filter.FixedEncoder {
	return func(col chain.Column, text string) (string, []byte, error) {
		sql := "SELECT v::text, v FROM (SELECT $1::text::" + col.Type + " AS v) x"
		res := conn.ExecParams(ctx, sql, [][]byte{[]byte(text)}, []uint32{oidText}, []int16{0}, []int16{0, 1}).Read()
		if res.Err != nil {
			return "", nil, fmt.Errorf("cast %q to %s: %w", text, col.Type, res.Err)
		}
		if len(res.Rows) != 1 || len(res.Rows[0]) != 2 || res.Rows[0][0] == nil || res.Rows[0][1] == nil {
			return "", nil, fmt.Errorf("cast %q to %s: the server returned no value", text, col.Type)
		}
		return string(res.Rows[0][0]), res.Rows[0][1], nil
	}
}

// maskedFields maps each field of a table's chunk tuples (its supplied
// columns, in order) to the recorded column it holds when that column is
// masked, and to -1 otherwise. It returns nil when no column is masked, so
// the chunk path does no work per tuple.
func maskedFields(sh *filter.Shape) []int {
	if !sh.HasMasks() {
		return nil
	}
	var out []int
	for i, c := range sh.Table.Columns {
		if c.Generated != "" {
			continue // not in the chunks; a generated column is never masked
		}
		if sh.Masked(i) {
			out = append(out, i)
		} else {
			out = append(out, -1)
		}
	}
	return out
}

// maskTuples appends to dst the tuples of body (whole COPY BINARY tuples
// of len(fields) fields) with each masked field replaced by its mask:
// field j holds recorded column fields[j] of sh, masked through sh.Cell
// when that is not -1.
func maskTuples(dst, body []byte, fields []int, sh *filter.Shape) ([]byte, error) {
	it := chain.NewTupleIter(body, len(fields))
	for it.Next() {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(fields)))
		for j, v := range it.Values() {
			isNull := v == nil
			if i := fields[j]; i >= 0 {
				v, isNull = sh.Cell(i, v, isNull)
			}
			if isNull {
				dst = append(dst, 0xff, 0xff, 0xff, 0xff)
				continue
			}
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
			dst = append(dst, v...)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("mask tuples: %w", err)
	}
	return dst, nil
}
