package postgres

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/errcode"
)

// The PostgreSQL source raises the source log's concept codes, with the
// codes earlier releases raised beside them (errcode.Error.Formerly) and
// hints in PostgreSQL's terms: the chain's anchor is its replication slot,
// its log the WAL the slot retains.

// Hints of the slot refusals.
const (
	slotInUseHint       = "Run one producer per chain. Find the other one (SELECT active_pid FROM pg_replication_slots WHERE slot_name = '<slot>') and stop it, or wait for it to end."
	slotMissingHint     = "Incrementals need the slot that anchors the chain. Take a new full with --chain-slot into a new chain."
	slotInvalidatedHint = "The chain cannot continue. Take a new full with --chain-slot into a new chain, drop the invalidated slot, and raise max_slot_wal_keep_size or keep the producer running."
	walLevelHint        = "Set wal_level = logical (and max_replication_slots, max_wal_senders > 0) in postgresql.conf and restart the source."
)

// slotError is a refusal of the slot: concept code, the earlier code, the
// hint, a message and its cause (nil for none).
func slotError(code, formerly errcode.Code, hint string, cause error, format string, args ...any) *errcode.Error {
	return &errcode.Error{Code: code, Formerly: formerly, Hint: hint, Err: cause, Message: fmt.Sprintf(format, args...)}
}

// errSlotInUse: another connection streams from the chain's slot.
func errSlotInUse(cause error, format string, args ...any) *errcode.Error {
	return slotError(errcode.SourceReaderInUse, errcode.SlotInUse, slotInUseHint, cause, format, args...)
}

// errSlotMissing: the chain's slot does not exist, or the chain has none.
func errSlotMissing(cause error, format string, args ...any) *errcode.Error {
	return slotError(errcode.SourceAnchorMissing, errcode.SlotMissing, slotMissingHint, cause, format, args...)
}

// errSlotInvalidated: PostgreSQL removed the WAL the chain's slot needed.
func errSlotInvalidated(cause error, format string, args ...any) *errcode.Error {
	return slotError(errcode.SourceLogLost, errcode.SlotInvalidated, slotInvalidatedHint, cause, format, args...)
}

// errWalLevel: wal_level is not logical.
func errWalLevel(level string) *errcode.Error {
	return slotError(errcode.SourceLogConfig, errcode.SourceWalLevel, walLevelHint, nil,
		"source wal_level is %q; logical decoding needs wal_level = logical", level)
}
