package errcode

// Codes of points in a chain's history: restore --until and
// --until-position.
var (
	// PointInvalid is a point that does not parse.
	PointInvalid = register("SLUICE-E-POINT-INVALID", ExitUsage,
		"--until is not an RFC 3339 time, or --until-position is not a position of the chain's source engine (a PostgreSQL LSN such as 0/16B3748; a MariaDB GTID or GTID set such as 0-1-812; a MySQL GTID set such as 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-23; a binlog file:offset such as mariadb-bin.000003:4567).",
		"Give a time with its offset (2026-12-05T14:03:00Z, 2026-12-05T15:03:00+01:00) or a position in the chain's engine's own form; `sluice backup list --target URL` shows the times and positions the chain covers.")
	// PointOutsideChain is a point the chain does not cover.
	PointOutsideChain = register("SLUICE-E-POINT-OUTSIDE-CHAIN", ExitRefused,
		"The point given lies before the chain's oldest full backup or after its newest recorded transaction, so the chain cannot restore the database as it was then. Nothing was written.",
		"Pick a point inside the range the message names (`sluice backup list --target URL` shows each link's commit times and positions). A point after the newest transaction needs the producer to commit the next incremental first.")
)

// RestoreLinkRewritten is a link a restore to a point planned to stop inside
// that a compaction rewrote before the restore applied it.
var RestoreLinkRewritten = register("SLUICE-E-RESTORE-LINK-REWRITTEN", ExitRefused,
	"A restore to a point stops inside an incremental, counted when the restore planned; a compaction rewrote that incremental's records before the restore reached it, so the count no longer marks the same transaction. Nothing of that incremental was applied.",
	"Run the same restore again (with --replace-existing, since the target now holds its earlier links): it plans against the compacted chain.")

// RestorePositionMissing is a restore whose own position the target no
// longer holds (or never held: a restore prepared by a release that
// recorded incrementals in sluice_restore_links).
var RestorePositionMissing = register("SLUICE-E-RESTORE-POSITION-MISSING", ExitRefused,
	"A restore applies the incrementals after its full under a position of its own in the target's sluice_cdc_state (stream restore:<chain ID>), written when it prepared the target; that row is missing, so the restore cannot tell what it applied. Nothing of the incremental was applied.",
	"Run the restore again with --replace-existing: it prepares the target and writes the position anew. A restore started before an upgrade of the worker ends this way once.")

// PointPassed is a broker's --until point that its target has already
// applied past.
var PointPassed = register("SLUICE-E-POINT-PASSED", ExitRefused,
	"The broker was asked to stop at a point, but its target's position already holds a transaction that committed after that point; a broker never undoes what it applied. Nothing was written.",
	"Give a later point, or restore the chain --until the point into a fresh database (`sluice restore --until`); `sluice backup list --target URL` shows the chain's times and positions.")
