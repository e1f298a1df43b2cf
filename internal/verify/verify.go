// Package verify compares a source database with a target table by table:
// their stored columns, row counts, at checksum depth an order-independent
// digest of every row computed in sluice over values normalised by their
// neutral kind (and by the target's documented storage rules), so the two
// may be of different engines, and at rows depth the differing rows
// themselves. Both sides are read through
// readback.Snapshot, each in one consistent snapshot; the tables and their
// kinds are the source's, as a full backup would record them.
package verify

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
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
	// DepthRows compares as DepthChecksum does and, where a table differs,
	// narrows the difference down to the rows: their keys and both sides'
	// values, up to Options.MaxRows of them per table.
	DepthRows Depth = "rows"
)

// Depths lists every depth, shallowest first.
var Depths = []Depth{DepthCount, DepthChecksum, DepthRows}

// DefaultMaxRows and MaxMaxRows bound how many differing rows DepthRows
// names per table, by default and at most.
const (
	DefaultMaxRows = 20
	MaxMaxRows     = 1000
)

// Statuses of a compared table.
const (
	StatusEqual    = "equal"
	StatusMissing  = "missing"  // no such table on the target
	StatusCount    = "count"    // row counts differ
	StatusChecksum = "checksum" // same count, different rows
	StatusColumns  = "columns"  // a column missing on one side
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
	// MaxRows bounds the differing rows DepthRows names per table
	// (DefaultMaxRows when 0).
	MaxRows int
	// Progress, when set, is called before each table with how many are
	// done, and after the last.
	Progress func(done, total int, table string)
}

func (o Options) maxRows() int {
	if o.MaxRows <= 0 {
		return DefaultMaxRows
	}
	return min(o.MaxRows, MaxMaxRows)
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
	// Code is the SLUICE-E code of the difference (none when equal).
	Code string `json:"code,omitempty"`
	// MissingColumns are the source's stored columns the target's table
	// lacks; ExtraColumns the target's columns the source has not.
	MissingColumns []string `json:"missing_columns,omitempty"`
	ExtraColumns   []string `json:"extra_columns,omitempty"`
	// Columns and Key name the compared columns and the key columns
	// (none for a keyless table) that Rows' values follow (rows depth).
	Columns []string `json:"columns,omitempty"`
	Key     []string `json:"key,omitempty"`
	// Rows are the differing rows found (rows depth), at most the
	// comparison's MaxRows; MoreRows is set when more may differ.
	Rows     []RowDiff `json:"rows,omitempty"`
	MoreRows bool      `json:"more_rows,omitempty"`
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
		t, err := compareTable(ctx, src, dst, tb, Options{Depth: rep.Depth, MaxRows: o.MaxRows})
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

func compareTable(ctx context.Context, src readback.SourceSnapshot, dst readback.Snapshot, tb *chain.Table, o Options) (Table, error) {
	t := Table{Name: tb.QualifiedName(), Status: StatusEqual}
	// Only the stored columns are compared: no target stores a generated
	// column, and no row image carries one.
	stored := *tb
	stored.Columns = tb.SuppliedColumns()
	tb = &stored
	_, found, err := dst.Count(ctx, tb)
	if err != nil {
		return t, err
	}
	if !found {
		n, _, err := src.Count(ctx, tb)
		if err != nil {
			return t, err
		}
		t.SourceRows, t.Status, t.Code = n, StatusMissing, string(errcode.VerifyMismatch)
		t.Detail = fmt.Sprintf("the target has no table %s (the source's holds %d rows)", tb.QualifiedName(), n)
		return t, nil
	}
	if cr, ok := dst.(readback.ColumnReader); ok {
		names, listed, err := cr.Columns(ctx, tb)
		if err != nil {
			return t, fmt.Errorf("target: %w", err)
		}
		if listed {
			t.MissingColumns, t.ExtraColumns = columnDiff(tb.Columns, names)
		}
	}
	depth := o.Depth
	if len(t.MissingColumns)+len(t.ExtraColumns) > 0 {
		// Rows of other shapes cannot be compared value by value; their
		// counts still can.
		depth = DepthCount
	}
	switch depth {
	case DepthCount:
		if t.SourceRows, _, err = src.Count(ctx, tb); err != nil {
			return t, err
		}
		if t.TargetRows, _, err = dst.Count(ctx, tb); err != nil {
			return t, err
		}
	case DepthRows:
		if err := compareRows(ctx, src, dst, newShape(tb, dst), o.maxRows(), &t); err != nil {
			return t, err
		}
	default:
		sh := newShape(tb, dst)
		var sd, td Digest
		if err := src.Scan(ctx, tb, func(r []value.Value) error { sd.Add(sh.kinds, sh.normalise(r)); return nil }); err != nil {
			return t, fmt.Errorf("source: %w", err)
		}
		if err := dst.Scan(ctx, tb, func(r []value.Value) error { td.Add(sh.kinds, sh.normalise(r)); return nil }); err != nil {
			return t, fmt.Errorf("target: %w", err)
		}
		t.SourceRows, t.TargetRows = sd.Rows, td.Rows
		t.SourceChecksum, t.TargetChecksum = sd.Sum(), td.Sum()
	}
	switch {
	case len(t.MissingColumns)+len(t.ExtraColumns) > 0:
		t.Status, t.Code = StatusColumns, string(errcode.VerifyColumnsDiffer)
		var parts []string
		if len(t.MissingColumns) > 0 {
			parts = append(parts, "the target lacks column(s) "+strings.Join(t.MissingColumns, ", "))
		}
		if len(t.ExtraColumns) > 0 {
			parts = append(parts, "the target has column(s) the source has not: "+strings.Join(t.ExtraColumns, ", "))
		}
		t.Detail = strings.Join(parts, "; ") + fmt.Sprintf(" (rows not compared; the source holds %d, the target %d)", t.SourceRows, t.TargetRows)
	case t.SourceRows != t.TargetRows:
		t.Status, t.Code = StatusCount, string(errcode.VerifyMismatch)
		switch d := t.TargetRows - t.SourceRows; {
		case d > 0:
			t.Detail = fmt.Sprintf("the target holds %d rows more than the source (%d against %d): a row duplicated or not deleted", d, t.TargetRows, t.SourceRows)
		default:
			t.Detail = fmt.Sprintf("the target holds %d rows fewer than the source (%d against %d): a row missing", -d, t.TargetRows, t.SourceRows)
		}
	case t.SourceChecksum != t.TargetChecksum:
		t.Status, t.Code = StatusChecksum, string(errcode.VerifyMismatch)
		t.Detail = fmt.Sprintf("both hold %d rows, but their checksums differ: at least one row's values differ", t.SourceRows)
	}
	if t.Status != StatusEqual && depth == DepthRows {
		t.Detail += rowsSummary(t)
	}
	return t, nil
}

// columnDiff names the source's stored columns the target lacks, and the
// target's columns the source has not.
func columnDiff(src []chain.Column, dst []string) (missing, extra []string) {
	have := make(map[string]bool, len(dst))
	for _, n := range dst {
		have[n] = true
	}
	want := make(map[string]bool, len(src))
	for _, c := range src {
		want[c.Name] = true
		if !have[c.Name] {
			missing = append(missing, c.Name)
		}
	}
	for _, n := range dst {
		if !want[n] {
			extra = append(extra, n)
		}
	}
	return missing, extra
}
