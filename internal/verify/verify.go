// Package verify compares a source database with a target table by table:
// row counts, and at checksum depth an order-independent digest of every
// row computed in sluice over values normalised by their neutral kind, so
// the two may be of different engines. Both sides are read through
// readback.Snapshot, each in one consistent snapshot; the tables and their
// kinds are the source's, as a full backup would record them.
package verify

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/value"
)

// Depth is how closely tables are compared.
type Depth string

// Depths of a comparison.
const (
	// DepthCount compares row counts.
	DepthCount Depth = "count"
	// DepthChecksum also compares a digest of every row's values.
	DepthChecksum Depth = "checksum"
)

// Statuses of a compared table.
const (
	StatusEqual    = "equal"
	StatusMissing  = "missing"  // no such table on the target
	StatusCount    = "count"    // row counts differ
	StatusChecksum = "checksum" // same count, different rows
)

// Filter selects tables by pattern (path.Match syntax). A pattern with a
// dot matches the qualified name "schema.name", one without the bare name
// in any schema. With includes, a table must match one; it must match no
// exclude.
type Filter struct {
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// Validate refuses a malformed pattern.
func (f Filter) Validate() error {
	for _, p := range append(append([]string(nil), f.Include...), f.Exclude...) {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("table pattern %q: %w", p, err)
		}
	}
	return nil
}

// Match reports whether the filter selects tb.
func (f Filter) Match(tb *chain.Table) bool {
	matches := func(patterns []string) bool {
		for _, p := range patterns {
			name := tb.Name
			if strings.Contains(p, ".") {
				name = tb.QualifiedName()
			}
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
	if len(f.Include) > 0 && !matches(f.Include) {
		return false
	}
	return !matches(f.Exclude)
}

// Options configure a comparison.
type Options struct {
	Depth  Depth
	Filter Filter
	// Progress, when set, is called before each table with how many are
	// done, and after the last.
	Progress func(done, total int, table string)
}

// Table is the outcome for one table.
type Table struct {
	Name       string `json:"table"`
	Status     string `json:"status"`
	SourceRows int64  `json:"source_rows"`
	TargetRows int64  `json:"target_rows"`
	// SourceChecksum and TargetChecksum are the digests' sums (checksum depth).
	SourceChecksum string `json:"source_checksum,omitempty"`
	TargetChecksum string `json:"target_checksum,omitempty"`
	// Detail says what differs, for an operator.
	Detail string `json:"detail,omitempty"`
}

// Report is the outcome of a comparison.
type Report struct {
	Depth  Depth   `json:"depth"`
	Tables []Table `json:"tables"`
	// Differences counts the tables that are not equal.
	Differences int `json:"differences"`
	// Skipped are source tables not compared: partitioned tables (their
	// partitions are) and tables the filter left out.
	Skipped []string `json:"skipped,omitempty"`
}

// Equal reports whether every compared table is equal.
func (r Report) Equal() bool { return r.Differences == 0 }

// Compare compares every table of the source's schema that the filter
// selects with the target's table of the same name.
func Compare(ctx context.Context, src readback.SourceSnapshot, dst readback.Snapshot, o Options) (Report, error) {
	rep := Report{Depth: o.Depth}
	if rep.Depth == "" {
		rep.Depth = DepthCount
	}
	schema, err := src.Schema(ctx)
	if err != nil {
		return rep, err
	}
	var tables []*chain.Table
	for i := range schema.Tables {
		tb := &schema.Tables[i]
		if tb.Partitioned() || !o.Filter.Match(tb) {
			rep.Skipped = append(rep.Skipped, tb.QualifiedName())
			continue
		}
		tables = append(tables, tb)
	}
	for i, tb := range tables {
		if o.Progress != nil {
			o.Progress(i, len(tables), tb.QualifiedName())
		}
		t, err := compareTable(ctx, src, dst, tb, rep.Depth)
		if err != nil {
			return rep, fmt.Errorf("compare %s: %w", tb.QualifiedName(), err)
		}
		if t.Status != StatusEqual {
			rep.Differences++
		}
		rep.Tables = append(rep.Tables, t)
	}
	if o.Progress != nil {
		o.Progress(len(tables), len(tables), "")
	}
	return rep, nil
}

func compareTable(ctx context.Context, src readback.SourceSnapshot, dst readback.Snapshot, tb *chain.Table, depth Depth) (Table, error) {
	t := Table{Name: tb.QualifiedName(), Status: StatusEqual}
	_, found, err := dst.Count(ctx, tb)
	if err != nil {
		return t, err
	}
	if !found {
		n, _, err := src.Count(ctx, tb)
		if err != nil {
			return t, err
		}
		t.SourceRows, t.Status = n, StatusMissing
		t.Detail = fmt.Sprintf("the target has no table %s (the source's holds %d rows)", tb.QualifiedName(), n)
		return t, nil
	}
	if depth == DepthCount {
		if t.SourceRows, _, err = src.Count(ctx, tb); err != nil {
			return t, err
		}
		if t.TargetRows, _, err = dst.Count(ctx, tb); err != nil {
			return t, err
		}
	} else {
		kinds := make([]value.Kind, len(tb.Columns))
		for i, c := range tb.Columns {
			kinds[i] = c.NeutralKind()
		}
		var sd, td Digest
		if err := src.Scan(ctx, tb, func(r []value.Value) error { sd.Add(kinds, r); return nil }); err != nil {
			return t, fmt.Errorf("source: %w", err)
		}
		if err := dst.Scan(ctx, tb, func(r []value.Value) error { td.Add(kinds, r); return nil }); err != nil {
			return t, fmt.Errorf("target: %w", err)
		}
		t.SourceRows, t.TargetRows = sd.Rows, td.Rows
		t.SourceChecksum, t.TargetChecksum = sd.Sum(), td.Sum()
		if t.SourceRows == t.TargetRows && !sd.Equal(&td) {
			t.Status = StatusChecksum
			t.Detail = fmt.Sprintf("both hold %d rows, but their checksums differ: at least one row's values differ", t.SourceRows)
		}
	}
	if t.SourceRows != t.TargetRows {
		t.Status = StatusCount
		switch d := t.TargetRows - t.SourceRows; {
		case d > 0:
			t.Detail = fmt.Sprintf("the target holds %d rows more than the source (%d against %d): a row duplicated or not deleted", d, t.TargetRows, t.SourceRows)
		default:
			t.Detail = fmt.Sprintf("the target holds %d rows fewer than the source (%d against %d): a row missing", -d, t.TargetRows, t.SourceRows)
		}
	}
	return t, nil
}
