package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// `make demo` then `make demo-stop` must leave no replication slot behind
// (an abandoned one held 6.3 GB of the cluster's WAL within an afternoon),
// and `make demo-clean` removes the databases and files the demo made. The
// demo runs under its own database name, state folder and task queue, so a
// user's demo on this machine is not touched.
func TestDemoStopLeavesNoSlotAndCleanRemovesEverything(t *testing.T) {
	db := fmt.Sprintf("sluice_demo_it%d", time.Now().UnixNano()%1e6)
	state := t.TempDir()
	admin := testenv.Admin(t)
	defer admin.Close(context.Background())
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = admin.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, db)
		_, _ = admin.Exec(ctx, `DROP DATABASE IF EXISTS `+db+` WITH (FORCE)`)
		_, _ = admin.Exec(ctx, `DROP DATABASE IF EXISTS `+db+`_replica WITH (FORCE)`)
	})
	demo := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{"../deploy/dev/demo.sh"}, args...)...)
		cmd.Env = append(h.env(), "SLUICE_STATE="+state, "SLUICE_DEMO_DB="+db, "SLUICE_BIN="+filepath.Join(h.bin, "sluice"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("demo.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	slots := func() int {
		var n int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE database = $1`, db).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	demo()
	if slots() != 1 {
		t.Fatalf("the running demo has %d slots on %s, want its chain slot", slots(), db)
	}
	out := demo("stop")
	if n := slots(); n != 0 {
		t.Fatalf("after demo-stop %d replication slots remain on %s:\n%s", n, db, out)
	}
	if !strings.Contains(out, "dropped the replication slot") {
		t.Fatalf("demo-stop did not say it dropped the slot:\n%s", out)
	}
	if strings.Contains(out, "DIFFERENT") {
		t.Fatalf("demo-stop found the replica different:\n%s", out)
	}

	demo("clean")
	var dbs int
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname IN ($1, $2)`, db, db+"_replica").Scan(&dbs); err != nil {
		t.Fatal(err)
	}
	if dbs != 0 {
		t.Fatalf("demo-clean left %d of the demo's databases", dbs)
	}
	if _, err := os.Stat(filepath.Join(state, "demo")); !os.IsNotExist(err) {
		t.Fatalf("demo-clean left %s (stat: %v)", filepath.Join(state, "demo"), err)
	}
}
