package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/workflows"
)

// activityCount counts the activities of type name a workflow's latest run
// has scheduled so far.
func activityCount(t *testing.T, id, name string) int {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	it := cl.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			n++
		}
	}
	return n
}

// idleThrough waits until workflow id has scheduled at least more further
// activities of type name than it had at from, and returns the new count.
func idleThrough(t *testing.T, id, name string, from, more int, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := activityCount(t, id, name)
		if n >= from+more {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s scheduled %d %s activities within %s; want %d more than %d", id, n, name, within, more, from)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// tipKind is the kind of the chain's newest link.
func tipKind(t *testing.T, chainURL string) string {
	t.Helper()
	_, cat := openChainAt(t, chainURL)
	return cat.Tip().Kind
}

// A quiet run must stay alive. Every durable loop meets nothing to do here,
// under short bounds so that a minute holds many idle cycles: a full of a
// database with no tables, a restore of a chain with no incrementals, a
// producer whose windows stay empty, a broker whose waits run out empty
// (also once the chain's tip is a rotation's full). Each then does real work
// when the source finally changes, and stops cleanly.
//
// sluice:exclusive — beside other tests' bulk workloads on the shared
// server it took 107 s once and missed its 2-minute bound once (20-26 s
// alone), most likely because logical decoding of its quiet source reads
// the whole cluster's WAL, theirs included; that is not the quiet chain
// this test is about (unconfirmed; see the session notes).
func TestQuietChainStaysAlive(t *testing.T) {
	src := testenv.CreateDB(t, "quietsrc")
	restored := testenv.CreateDB(t, "quietrestore")
	dst := testenv.CreateDB(t, "quietdst")
	chainURL := "file://" + filepath.Join(t.TempDir(), "chain")
	w := ownWorker(t, "quiet")
	q := w.args
	stream := fmt.Sprintf("quiet-%d", time.Now().UnixNano()%1e6)
	brokerWF, producerWF := "broker/"+stream, "producer/"+chainURL

	// Nothing to copy, and nothing to apply.
	r := mustSluice(t, q("backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	if !strings.Contains(r.stdout, "0 tables") {
		t.Errorf("a full of an empty database reports no tables:\n%s", r)
	}
	mustSluice(t, q("restore", "--backup-target", chainURL, "--target", testenv.DSN(restored))...)
	// A one-shot incremental of a source with nothing new commits nothing
	// and ends.
	mustSluice(t, q("backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)...)
	if _, cat := openChainAt(t, chainURL); len(cat.Links()) != 1 {
		t.Fatalf("an incremental of a quiet source adds no link; the chain holds %d", len(cat.Links()))
	}

	mustSluice(t, q("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--idle-window", "1s", "--retain-rotate-at-chain-length", "1",
		"--health-poll-stall", "5s", "--detach")...)
	mustSluice(t, q("sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--poll-interval", "200ms", "--max-wait", "1s", "--health-poll-stall", "3s",
		"--reset-target-data", "--yes", "--detach")...)

	// Many idle cycles on both loops: each wait and each window runs out
	// with nothing, and the runs go on.
	waits := idleThrough(t, brokerWF, "WaitForLinks", 0, 10, 2*time.Minute)
	windows := idleThrough(t, producerWF, "CaptureWindow", 0, 8, 2*time.Minute)
	st := mustSluice(t, q("sync", "from-backup", "status", "--stream-id", stream)...)
	if !strings.Contains(st.stdout, "verdict:") || !strings.Contains(st.stdout, " idle") || !strings.Contains(st.stdout, "phase:") {
		t.Fatalf("an idle broker answers its status query and reads idle:\n%s", st)
	}
	pst := mustSluice(t, q("backup", "stream", "status", "--target", chainURL)...)
	if !strings.Contains(pst.stdout, " idle") {
		t.Fatalf("an idle producer reads idle:\n%s", pst)
	}

	// The source changes at last: a new table and its rows. The producer
	// commits them, then rotates (one incremental per segment), so the
	// chain's tip becomes a rotation's full with nothing after it.
	testenv.Exec(t, src, `CREATE TABLE quiet (id int PRIMARY KEY, v text); INSERT INTO quiet SELECT g, 'row ' || g FROM generate_series(1, 50) g`)
	waitRows(t, dst, "quiet", 50, 2*time.Minute)
	deadline := time.Now().Add(2 * time.Minute)
	for tipKind(t, chainURL) != chain.KindFull {
		if time.Now().After(deadline) {
			t.Fatal("the producer did not rotate after its first incremental")
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Idle again, now on a tip that is a full, then one more change.
	waits = idleThrough(t, brokerWF, "WaitForLinks", waits, 6, 2*time.Minute)
	idleThrough(t, producerWF, "CaptureWindow", windows, 4, 2*time.Minute)
	testenv.Exec(t, src, `INSERT INTO quiet SELECT g, 'late ' || g FROM generate_series(51, 60) g; UPDATE quiet SET v = 'changed' WHERE id = 1`)
	waitRows(t, dst, "quiet", 60, 2*time.Minute)
	waitCaughtUp(t, src, time.Minute)

	mustSluice(t, q("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, producerWF, time.Minute)
	waitBrokerAtTip(t, stream, chainURL, nil, 2*time.Minute)
	requireSameRows(t, src, dst)
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	waitWorkflowEnd(t, brokerWF, time.Minute)

	cl := temporalClient(t)
	defer cl.Close()
	var res workflows.BrokerResult
	if err := cl.GetWorkflow(context.Background(), brokerWF, "").Get(context.Background(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Status.Phase != "stopped" || res.Status.Incrementals < 2 {
		t.Fatalf("the broker stops cleanly after applying both incrementals: %+v", res.Status)
	}
	if strings.Contains(w.log.String(), "Workflow panic") {
		t.Fatalf("a workflow panicked while idle:\n%s", tail(w.log.String(), 4000))
	}
	// An idle run's log stays quiet: no heartbeat is sent after an idle
	// wait or window returned (the SDK warns of each such one).
	if n := strings.Count(w.log.String(), "RecordActivityHeartbeat with error"); n > 0 {
		t.Fatalf("%d heartbeats were recorded after their activity returned:\n%s", n, tail(w.log.String(), 4000))
	}
	t.Logf("broker waited %d times, producer ran %d windows", waits, windows)
}

// waitRows waits until table in db holds want rows.
func waitRows(t *testing.T, db, table string, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	got := -1
	for time.Now().Before(deadline) {
		if publicTableExists(t, db, table) {
			if err := queryInt(t, db, "SELECT count(*) FROM "+table, &got); err == nil && got == want {
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("%s.%s holds %d rows after %s; want %d", db, table, got, within, want)
}
