package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/testenv"
)

func TestOwnerAppName(t *testing.T) {
	a, b := ownerAppName("producer/s3://bucket/"+strings.Repeat("p", 200)), ownerAppName("producer/file:///other")
	if a == b || len(a) > 63 || !strings.HasPrefix(a, "sluice producer ") || strings.Contains(a, "bucket") {
		t.Fatalf("owner names must differ, fit 63 bytes and hide the path: %q %q", a, b)
	}
	if ownerAppName("producer/file:///other") != b || ownerAppName("") != "sluice" {
		t.Fatal("owner names must be stable")
	}
}

// A slot held by a connection of the same owner is taken over; one held by
// anyone else is left alone and reported.
func TestTakeOverSlotOnlyFromTheSameOwner(t *testing.T) {
	ctx := context.Background()
	db := testenv.CreateDB(t, "owner")
	admin := testenv.Admin(t)
	defer admin.Close(ctx)
	slot := fmt.Sprintf("sluice_owner_test_%d", time.Now().UnixNano()%1e6)
	testenv.Exec(t, db, `CREATE PUBLICATION sluice_owner_pub FOR ALL TABLES`)
	conn, err := connect(ctx, testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot) })

	hold := func(app string) int32 {
		t.Helper()
		repl, err := replicationConnect(ctx, testenv.DSN(db), app)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = repl.Close(context.Background()) })
		if err := pglogrepl.StartReplication(ctx, repl, slot, 0, pglogrepl.StartReplicationOptions{
			Mode: pglogrepl.LogicalReplication, PluginArgs: []string{"proto_version '2'", "publication_names 'sluice_owner_pub'"},
		}); err != nil {
			t.Fatal(err)
		}
		return int32(repl.PID())
	}

	other := hold(ownerAppName("producer/someone-else"))
	pid, took, err := takeOverSlot(ctx, conn, slot, ownerAppName("producer/me"))
	if err != nil || took || pid != int32(other) {
		t.Fatalf("another owner's connection must be left alone: pid %d took %v err %v (holder %d)", pid, took, err, other)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, other); err != nil {
		t.Fatal(err)
	}
	waitInactive(t, admin, slot)

	mine := hold(ownerAppName("producer/me"))
	pid, took, err = takeOverSlot(ctx, conn, slot, ownerAppName("producer/me"))
	if err != nil || !took || pid != int32(mine) {
		t.Fatalf("the owner's own connection must be ended and the slot freed: pid %d took %v err %v (holder %d)", pid, took, err, mine)
	}
	var active bool
	if err := admin.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active); err != nil || active {
		t.Fatalf("the slot must be free after a takeover (active %v, %v)", active, err)
	}

	// A slot nobody holds (released meanwhile) is free to take.
	if pid, took, err := takeOverSlot(ctx, conn, slot, ownerAppName("producer/me")); err != nil || !took || pid != 0 {
		t.Fatalf("a slot nobody holds is free: pid %d took %v err %v", pid, took, err)
	}
}

func waitInactive(t *testing.T, admin *pgx.Conn, slot string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var active bool
		if err := admin.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active); err == nil && !active {
			return
		}
	}
	t.Fatalf("slot %s still active", slot)
}
