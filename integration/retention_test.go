package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// grow writes a row at a time into src until the chain holds at least
// segments segments (the producer rotates after every incremental).
func grow(t *testing.T, src, chainURL string, segments int, from int) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for segmentsOf(t, chainURL) < segments {
		if time.Now().After(deadline) {
			t.Fatalf("the chain did not reach %d segments within two minutes (%d)", segments, segmentsOf(t, chainURL))
		}
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO t VALUES (%d, 'grow')`, from))
		from++
		time.Sleep(400 * time.Millisecond)
	}
	return from
}

// TestRetentionWithBrokers runs the producer with --retain-segments while a
// broker lags behind: the policy keeps what that broker needs, a manual
// prune is refused for it, a dry run changes nothing, a forced prune drops
// it, and the broker then refuses with BROKER-POSITION-PRUNED until it is
// rebuilt with --reset-target-data.
func TestRetentionWithBrokers(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'one')`)
	chainURL := fileChain(t)
	w := ownWorker(t, "retention")
	q := w.args()
	mustSluice(t, append(q, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	dst := testenv.CreateDB(t, "dst")
	stream := fmt.Sprintf("retain-%d", time.Now().UnixNano()%1e6)
	mustSluice(t, append(q, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--reset-target-data", "--yes", "--poll-interval", "300ms", "--detach")...)
	mustSluice(t, append(q, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s",
		"--idle-window", "1s", "--retain-rotate-at-chain-length", "1", "--retain-segments", "2", "--detach")...)
	next := grow(t, src, chainURL, 2, 100)
	waitBrokerAtTip(t, stream, chainURL, nil, time.Minute)
	stopBroker(t, chainURL, stream)
	stoppedAt := lastIncremental(t, chainURL, nil)

	// The policy keeps the segments the stopped broker still needs: the
	// chain grows past the two segments it keeps.
	next = grow(t, src, chainURL, 4, next)
	if _, cat := openChainAt(t, chainURL); !holds(cat, stoppedAt) {
		t.Fatalf("the policy pruned link %s, which the stopped broker applied last", stoppedAt)
	}

	// A manual prune is refused for the broker, and names it.
	r := sluice(t, "backup", "prune", "--target", chainURL, "--keep-segments", "1")
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-PRUNE-BROKER-BEHIND") || !strings.Contains(r.stderr, stream) {
		t.Fatalf("want SLUICE-E-PRUNE-BROKER-BEHIND naming %s, got %s", stream, r)
	}
	// A forced dry run shows the plan and changes nothing.
	r = mustSluice(t, "backup", "prune", "--target", chainURL, "--keep-segments", "1", "--force", "--dry-run")
	if !strings.Contains(r.stdout, "would drop segment 0") || !strings.Contains(r.stdout, "nothing was changed") {
		t.Fatalf("dry run output:\n%s", r)
	}
	if _, cat := openChainAt(t, chainURL); !holds(cat, stoppedAt) {
		t.Fatalf("the dry run pruned link %s", stoppedAt)
	}
	// Forced, the broker's segments go.
	mustSluice(t, "backup", "prune", "--target", chainURL, "--keep-segments", "1", "--force")
	if _, cat := openChainAt(t, chainURL); len(cat.Segments) > 2 || holds(cat, stoppedAt) {
		t.Fatalf("after the forced prune the chain holds %d segments (link %s kept: %v)", len(cat.Segments), stoppedAt, holds(cat, stoppedAt))
	}

	// The broker whose position was pruned refuses, naming the remedy.
	r = sluice(t, append(q, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--poll-interval", "300ms")...)
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-BROKER-POSITION-PRUNED") || !strings.Contains(r.stderr, "--reset-target-data") {
		t.Fatalf("want SLUICE-E-BROKER-POSITION-PRUNED naming --reset-target-data, got %s", r)
	}
	// Rebuilt, it follows the chain again while the policy keeps pruning.
	mustSluice(t, append(q, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--reset-target-data", "--yes", "--poll-interval", "300ms", "--detach")...)
	growRotations(t, src, chainURL, 3, next)
	// Every row written so far must be in the chain before the producer
	// stops: a stop ends it after its current window, which on a loaded
	// machine may close before the last insert commits.
	waitCaughtUp(t, src, time.Minute)
	mustSluice(t, append(q, "backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAtTip(t, stream, chainURL, nil, time.Minute)
	stopBroker(t, chainURL, stream)
	requireSameRows(t, src, dst)
	if n := segmentsOf(t, chainURL); n > 3 {
		t.Fatalf("the policy keeps 2 segments, the chain holds %d", n)
	}
}

// holds reports whether a broker whose last applied link is id could
// still go on from cat: the link is listed, or it is the pruned tip the
// first remaining full follows.
func holds(cat *chain.Catalog, id string) bool {
	if _, _, ok := cat.Find(id); ok {
		return true
	}
	return cat.Segments[0].Full.Parent == id
}

// growRotations writes into src until the producer rotated n more times.
func growRotations(t *testing.T, src, chainURL string, n, from int) {
	t.Helper()
	_, cat := openChainAt(t, chainURL)
	tipFull := cat.Segments[len(cat.Segments)-1].Full.ID
	deadline := time.Now().Add(2 * time.Minute)
	for n > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the producer did not rotate %d more times within two minutes", n)
		}
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO t VALUES (%d, 'grow')`, from))
		from++
		time.Sleep(400 * time.Millisecond)
		if _, cat = openChainAt(t, chainURL); cat.Segments[len(cat.Segments)-1].Full.ID != tipFull {
			tipFull = cat.Segments[len(cat.Segments)-1].Full.ID
			n--
		}
	}
}
