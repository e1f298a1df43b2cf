package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/errcode"
)

// ownerAppName is the application_name of an owner's replication
// connections: a digest of the owner, so it fits PostgreSQL's 63 bytes and
// shows no store path. Without an owner it is plain "sluice".
func ownerAppName(owner string) string {
	if owner == "" {
		return "sluice"
	}
	sum := sha256.Sum256([]byte(owner))
	return "sluice producer " + hex.EncodeToString(sum[:8])
}

// slotInUse reports a start refused because another connection holds the slot.
func slotInUse(err error) bool {
	e, ok := errcode.As(err)
	return ok && e.Code == errcode.SourceReaderInUse
}

// slotReleaseWait bounds how long a takeover waits for the ended connection
// to let go of the slot.
const slotReleaseWait = 10 * time.Second

// takeOverSlot looks at the connection holding slot. When it carries
// appName it is an earlier attempt of the same owner whose connection died
// unnoticed by the server: it is ended, and took reports whether the slot
// came free. Any other holder is left alone (took false, with its pid).
func takeOverSlot(ctx context.Context, conn *pgx.Conn, slot, appName string) (pid int32, took bool, err error) {
	var holder string
	err = conn.QueryRow(ctx, `SELECT s.active_pid, coalesce(a.application_name, '')
		FROM pg_replication_slots s LEFT JOIN pg_stat_activity a ON a.pid = s.active_pid
		WHERE s.slot_name = $1 AND s.active`, slot).Scan(&pid, &holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, true, nil // released meanwhile
	}
	if err != nil {
		return 0, false, classify(err, "read which connection holds slot "+slot)
	}
	if holder != appName {
		return pid, false, nil
	}
	var ended bool
	if err := conn.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ended); err != nil {
		return pid, false, errSlotInUse(classify(err, "end the earlier connection"),
			"replication slot %s is still held by an earlier connection of this producer (process %d), which could not be ended", slot, pid)
	}
	deadline := time.Now().Add(slotReleaseWait)
	for {
		var active bool
		err := conn.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active)
		if errors.Is(err, pgx.ErrNoRows) {
			return pid, false, errSlotMissing(nil, "replication slot %s does not exist", slot)
		}
		if err != nil {
			return pid, false, classify(err, "read slot "+slot)
		}
		if !active {
			return pid, true, nil
		}
		if time.Now().After(deadline) {
			return pid, false, errSlotInUse(nil,
				"replication slot %s is still held by an earlier connection of this producer (process %d) %s after it was ended", slot, pid, slotReleaseWait)
		}
		select {
		case <-ctx.Done():
			return pid, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
