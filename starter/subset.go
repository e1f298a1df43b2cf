package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/target"
)

// subsetFlags choose the tables of a chain a restore or a broker stream
// takes (--include-table, --exclude-table), so one chain feeds targets
// that each hold a part of it.
type subsetFlags struct {
	subset target.Subset
}

func (f *subsetFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.subset.IncludeTables, "include-table", nil,
		"take only the chain's tables matching this glob (schema.table, MySQL family db.table, or a bare table name for any schema; repeatable)")
	fl.StringArrayVar(&f.subset.ExcludeTables, "exclude-table", nil,
		"leave out the chain's tables matching this glob (repeatable; applied after --include-table)")
}

// value checks the patterns (SLUICE-E-FILTER-INVALID, exit 2) and returns
// the subset (zero when no flag was given).
func (f *subsetFlags) value() (target.Subset, error) {
	if err := f.subset.Validate(); err != nil {
		return target.Subset{}, err
	}
	return f.subset, nil
}

// printExcluded says which tables of the chain a subset left out.
func printExcluded(w io.Writer, subset target.Subset, excluded []string) {
	if subset.IsZero() {
		return
	}
	if len(excluded) == 0 {
		fmt.Fprintf(w, "the subset (%s) left out no table of the full\n", subset)
		return
	}
	fmt.Fprintf(w, "the subset (%s) left out %d tables: %s\n", subset, len(excluded), strings.Join(excluded, ", "))
}
