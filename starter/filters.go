package main

import (
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/filter"
)

// filterFlags are the producer's filter and mask flags (issue 29), shared
// by backup full, backup incremental and backup stream run.
type filterFlags struct {
	spec filter.Spec
}

func (f *filterFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.spec.IncludeTables, "include-table", nil,
		"only tables matching this glob cross into the chain (schema.table, MySQL family db.table, or a bare table name for any schema; repeatable)")
	fl.StringArrayVar(&f.spec.ExcludeTables, "exclude-table", nil,
		"tables matching this glob never cross into the chain (repeatable; applied after --include-table)")
	fl.StringArrayVar(&f.spec.ExcludeColumns, "exclude-column", nil,
		"schema.table.column never enters the chain; targets create the table without it (repeatable; not a key column)")
	fl.StringArrayVar(&f.spec.Masks, "mask", nil,
		"schema.table.column=STRATEGY: mask the column's values before they are encoded; STRATEGY is null, fixed:VALUE, hash, email, truncate:N or keep-last:N (repeatable; docs/filters.md)")
	fl.StringVar(&f.spec.MaskKeyEnv, "mask-key-env", "",
		"name of an environment variable of the worker holding the key of the hash and email masks (HMAC-SHA256; at least 16 bytes)")
}

// value checks the flags' syntax and returns the spec (zero when no flag
// was given).
func (f *filterFlags) value() (filter.Spec, error) {
	if err := f.spec.Validate(); err != nil {
		return filter.Spec{}, err
	}
	return f.spec, nil
}
