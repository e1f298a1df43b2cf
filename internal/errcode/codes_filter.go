package errcode

// Codes of filters and masks: what of a source crosses into the chain
// (--include-table, --exclude-table, --exclude-column, --mask). A filter the
// operator wrote wrongly exits 2; a change of a running chain's filters
// without a new segment is a refusal (exit 3).
var (
	// FilterInvalid is a filter or mask that does not parse, or names a
	// table or column the source lacks.
	FilterInvalid = register("SLUICE-E-FILTER-INVALID", ExitUsage,
		"A table pattern, an excluded column or a mask does not parse, names a table or column the source does not have, or names a table the table filters leave out. Nothing was read or written.",
		"Patterns are globs over schema.table (MySQL family: db.table), or a bare table name for any schema; columns are schema.table.column; masks are schema.table.column=STRATEGY with STRATEGY one of null, fixed:VALUE, hash, email, truncate:N, keep-last:N (docs/filters.md).")
	// FilterKeyColumn is an excluded column the target needs as a key.
	FilterKeyColumn = register("SLUICE-E-FILTER-KEY-COLUMN", ExitUsage,
		"--exclude-column names a column of the table's primary key or of a unique index: without it the target cannot find the row an update or delete changes. Nothing was read or written.",
		"Keep the column, or mask it with hash (deterministic, so the key stays a key): --mask schema.table.column=hash --mask-key-env VAR.")
	// MaskUnsupported is a mask its column cannot take.
	MaskUnsupported = register("SLUICE-E-MASK-UNSUPPORTED", ExitUsage,
		"A --mask strategy cannot produce a value the column holds, or would break one of its constraints: a text strategy on a column of another kind, null on a NOT NULL column, a strategy that can make two rows equal on a key or unique column, a hash longer than the column's length, a fixed value the type refuses, or a CHECK or foreign key over the column. Nothing was read or written; no slot or publication was created.",
		"Pick a strategy the message allows for the column (docs/filters.md lists which kinds each takes), widen the column, or exclude it (--exclude-column) instead of masking it.")
	// MaskKeyMissing is a keyed mask without its key.
	MaskKeyMissing = register("SLUICE-E-MASK-KEY-MISSING", ExitUsage,
		"A keyed mask strategy (hash, email) was asked for, and the key is missing: no --mask-key-env was given, or the worker's environment does not hold the variable, or its value is shorter than 16 bytes.",
		"Set the variable in the worker's environment (for example to 32 random bytes in base64: `openssl rand -base64 32`) and pass its name with --mask-key-env. Keep the key: a new key masks the same value differently, so it needs a new segment.")
	// FilterChanged is a producer run whose filters differ from its chain's.
	FilterChanged = register("SLUICE-E-FILTER-CHANGED", ExitRefused,
		"The producer was started with table filters, excluded columns, masks or a mask key other than those the chain's newest segment was written with. Incrementals under other filters than their full would leave targets inconsistent, so nothing was captured.",
		"Run the producer with the filters `sluice backup list --target URL` shows for the newest segment, or pass --rotate-on-filter-change to start a new segment (a new full) under the new filters.")
)
