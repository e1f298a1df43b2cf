package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sluicehq/sluice/internal/testenv"
)

// A worker SIGKILLed inside one of the short metadata activities (here the
// broker's start-mode check, held on a lock of the target's position table)
// must not hold the run: a new worker runs the next attempt within seconds,
// not after the activity's start-to-close timeout.
func TestKilledWorkerInsideShortActivityIsRetriedWithinSeconds(t *testing.T) {
	w := ownWorker(t, "deadworker")
	src := testenv.CreateDB(t, "src")
	dst := testenv.CreateDB(t, "dst")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT i, 'v' FROM generate_series(1, 50) i`)
	chainURL := "file://" + filepath.Join(t.TempDir(), "chain")
	stream := fmt.Sprintf("deadworker-%d", time.Now().UnixNano()%1e6)
	mustSluice(t, w.args("backup", "full", "--source", testenv.DSN(src), "--target", chainURL)...)
	run := w.args("sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--poll-interval", "500ms", "--detach")
	mustSluice(t, append(run, "--reset-target-data", "--yes")...)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), time.Minute)
	stopBroker(t, chainURL, stream)

	// Hold the position table so the next run's start-mode check blocks.
	unlock := lockTable(t, dst, "sluice_cdc_state")
	mustSluice(t, run...)
	cl := temporalClient(t)
	defer cl.Close()
	// pendingPrepare reports whether PrepareBroker is pending, and whether
	// a worker is running an attempt of it now.
	pendingPrepare := func() (pending, started bool) {
		d, err := cl.DescribeWorkflow(context.Background(), "broker/"+stream, "")
		if err != nil || d.RawResponse == nil {
			return true, false
		}
		for _, pa := range d.RawResponse.GetPendingActivities() {
			if pa.GetActivityType().GetName() == "PrepareBroker" {
				return true, pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED
			}
		}
		return false, false
	}
	waitFor(t, 30*time.Second, "the start-mode check to start", func() bool { _, s := pendingPrepare(); return s })

	w.kill()
	killed := time.Now()
	unlock()
	w.restart()
	waitFor(t, 60*time.Second, "the start-mode check to finish on the new worker", func() bool { p, _ := pendingPrepare(); return !p })
	if took := time.Since(killed); took > 30*time.Second {
		t.Fatalf("the attempt of the killed worker held the run for %s; want the next attempt within 30 s", took.Round(time.Second))
	} else {
		t.Logf("the new worker finished the start-mode check %s after the kill", took.Round(100*time.Millisecond))
	}
	stopBroker(t, chainURL, stream)
	requireSameRows(t, src, dst)
}
