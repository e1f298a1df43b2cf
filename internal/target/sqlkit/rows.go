package sqlkit

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/value"
)

// LoadRows walks the tuples of td's row chunks of ncols columns in order,
// handing each to add (its buffers are valid only during the call) while
// the next chunks are fetched and verified, checks each chunk's count
// against its header, reports progress after each, and returns how many
// tuples it handed over.
func LoadRows(ctx context.Context, ch *chain.Chain, td chain.TableData, ncols int, add func(values [][]byte) error, progress target.LoadProgress) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	it := chain.NewTupleIter(nil, ncols)
	var total int64
	for c := range chain.PrefetchRows(ctx, ch, td, ncols) {
		if c.Err != nil {
			return 0, c.Err
		}
		it.Reset(c.Body, ncols)
		var n int64
		for it.Next() {
			if err := add(it.Values()); err != nil {
				return 0, err
			}
			n++
		}
		if err := it.Err(); err != nil {
			return 0, fmt.Errorf("table %s, chunk %s: %w", td.Table, c.Key, err)
		}
		if n != c.Rows {
			return 0, errcode.New(errcode.ChunkCorrupt, "chunk %s of table %s holds %d tuples, its header records %d", c.Key, td.Table, n, c.Rows)
		}
		total += n
		if progress != nil {
			progress(n, int64(len(c.Body)))
		}
	}
	return total, nil
}

// EachRow reads every row of r, each of n columns scanned as the driver
// gives them, turns column i's value into a neutral one with decode, and
// calls fn with the row (its slice is reused: valid only during the call).
func EachRow(r *sql.Rows, n int, decode func(i int, x any) (value.Value, error), fn func(row []value.Value) error) error {
	raw := make([]any, n)
	ptrs := make([]any, n)
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	row := make([]value.Value, n)
	for r.Next() {
		clear(raw)
		if err := r.Scan(ptrs...); err != nil {
			return err
		}
		for i, x := range raw {
			v, err := decode(i, x)
			if err != nil {
				return err
			}
			row[i] = v
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	return r.Err()
}

// ScanValues reads every row of r as EachRow does and returns them.
func ScanValues(r *sql.Rows, n int, decode func(i int, x any) (value.Value, error)) ([][]value.Value, error) {
	var out [][]value.Value
	err := EachRow(r, n, decode, func(row []value.Value) error {
		out = append(out, slices.Clone(row))
		return nil
	})
	return out, err
}
