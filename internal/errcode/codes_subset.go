package errcode

// BrokerSubsetChanged is a broker run whose --include-table and
// --exclude-table differ from those its stream's position was written
// under.
var BrokerSubsetChanged = register("SLUICE-E-BROKER-SUBSET-CHANGED", ExitRefused,
	"The broker was started with other --include-table or --exclude-table patterns than the stream's position records. A table newly taken would lack every change before this run, and one newly left out would go stale without notice, so nothing was applied.",
	"Run with the patterns `sluice sync from-backup status` or the refusal shows, or rebuild the target under the new subset with --reset-target-data (or use another --stream-id and another target).")
