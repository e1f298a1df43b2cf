package target

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/internal/chain"
)

// Counter is one sequence counter an incremental records
// (chain.Manifest.Sequences), resolved against the schema in force.
type Counter struct {
	// Name is the recorded qualified name.
	Name string
	// Value is the highest value the source had handed out.
	Value int64
	// Sequence is the recorded PostgreSQL sequence of that name; nil for a
	// table's counter (a MySQL-family source's AUTO_INCREMENT).
	Sequence *chain.Sequence
	// Table is the table the counter serves: the table that owns the
	// sequence (a serial or identity column), or the table whose
	// AUTO_INCREMENT it is. Nil for a sequence no table owns.
	Table *chain.Table
	// Column is the column that owns the sequence ("" when unknown).
	Column string
}

// Known reports whether the schema names the counter at all.
func (c Counter) Known() bool { return c.Sequence != nil || c.Table != nil }

// Counters resolves recorded counter values against s, the schema in force
// after the incremental that recorded them, in name order. Counters of a
// table sel does not take are left out; a sequence no table owns is kept.
// A name s does not know comes back with neither Sequence nor Table.
func Counters(s *chain.Schema, values map[string]int64, sel *Selection) []Counter {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]Counter, 0, len(names))
	for _, n := range names {
		c := Counter{Name: n, Value: values[n]}
		if s != nil {
			for i := range s.Sequences {
				q := &s.Sequences[i]
				if q.Schema+"."+q.Name != n {
					continue
				}
				c.Sequence = q
				if q.OwnedByTable != "" {
					c.Table, c.Column = s.Table(q.Schema+"."+q.OwnedByTable), q.OwnedByColumn
				}
				break
			}
			if c.Sequence == nil {
				c.Table = s.Table(n)
			}
		}
		if c.Table != nil && sel != nil && !sel.Takes(c.Table.QualifiedName()) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// SequenceResult is what a target did with recorded counters.
type SequenceResult struct {
	// Raised lists the counters moved up, as "name: from → to": from is
	// the highest value the target's counter had handed out ("unused" when
	// it had handed out none), to the highest it counts as handed out now.
	Raised []string `json:"raised,omitempty"`
	// Skipped lists the counters the target had nothing to move for, as
	// "name: why".
	Skipped []string `json:"skipped,omitempty"`
	// Kept lists the counters already at or past the value asked for, as
	// "name: at N, at or past T"; they are left as they are.
	Kept []string `json:"kept,omitempty"`
}

// Raised formats one entry of SequenceResult.Raised; handed is false when
// the counter had handed out nothing.
func Raised(name string, from int64, handed bool, to int64) string {
	f := "unused"
	if handed {
		f = strconv.FormatInt(from, 10)
	}
	return fmt.Sprintf("%s: %s → %d", name, f, to)
}

// Kept formats one entry of SequenceResult.Kept.
func Kept(name string, at, want int64) string {
	return fmt.Sprintf("%s: at %d, at or past %d", name, at, want)
}

// WithMargin returns v moved margin further in a sequence's direction
// (down for a negative increment), and false when that leaves int64.
func WithMargin(v, margin, increment int64) (int64, bool) {
	if margin <= 0 {
		return v, true
	}
	if increment < 0 {
		if v < math.MinInt64+margin {
			return 0, false
		}
		return v - margin, true
	}
	if v > math.MaxInt64-margin {
		return 0, false
	}
	return v + margin, true
}
