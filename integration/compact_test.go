package integration

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestCompactionUnderAStoppedBroker stops a broker inside a big incremental
// of what becomes a capped segment. A smart compaction of a copy of the
// chain makes it refuse (BROKER-INCREMENTAL-REWRITTEN), and a broker that
// reaches a smart-compacted incremental touching a keyless table refuses
// (BROKER-KEYLESS-TABLE, "records no apply identities"); after a plain
// compaction of the chain itself the stopped broker resumes where it was and
// finishes exactly once, keyless duplicates included.
func TestCompactionUnderAStoppedBroker(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE k (a int, b text); ALTER TABLE k REPLICA IDENTITY FULL;
		INSERT INTO k VALUES (0, 'seed')`)
	dir := filepath.Join(t.TempDir(), "chain")
	chainURL := "file://" + dir
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	full := lastIncremental(t, chainURL, nil)
	for i := 0; i < 3; i++ { // small incrementals: what compaction merges
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO t VALUES (%d, 'small')`, 1_000_000+i))
		mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
	}
	for i := 0; i < 100; i++ {
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO t SELECT i, 'bulk' FROM generate_series(%d, %d) i`, i*10000, i*10000+9999))
	}
	mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
	for i := 0; i < 3; i++ { // a keyless table's duplicate rows, in transactions of their own
		testenv.Exec(t, src, `INSERT INTO k VALUES (1, 'dup'); UPDATE t SET v = 'touched' WHERE id = 7`)
	}
	mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
	keyless := lastIncremental(t, chainURL, nil)
	// Rotate, so that segment is capped.
	w := ownWorker(t, "compactproducer")
	mustSluice(t, append(w.args(), "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s",
		"--idle-window", "1s", "--retain-rotate-at-chain-length", "1", "--detach")...)
	waitFor(t, 2*time.Minute, "a rotation", func() bool { return segmentsOf(t, chainURL) >= 2 })
	mustSluice(t, append(w.args(), "backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)

	dst := testenv.CreateDB(t, "dst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--through", full)
	stream := fmt.Sprintf("compact-%d", time.Now().UnixNano()%1e6)
	interruptInside(t, chainURL, dst, stream, full, "public.t")
	before := describeRows(t, dst, "public.t") + describeRows(t, dst, "public.k")
	var inside int
	if err := queryInt(t, dst, `SELECT count(*) FROM t WHERE v = 'bulk'`, &inside); err != nil {
		t.Fatal(err)
	}

	// Smart compaction of a copy: the stopped broker refuses.
	copyDir := filepath.Join(t.TempDir(), "smart")
	if out, err := exec.Command("cp", "-a", dir, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("copy chain: %v %s", err, out)
	}
	r := mustSluice(t, "backup", "compact", "--target", "file://"+copyDir, "--smart-compaction", "--local", "--keep-replaced", "0")
	if !strings.Contains(r.stdout, "folded 5 incrementals") {
		t.Fatalf("smart compaction output:\n%s", r)
	}
	r = sluice(t, "sync", "from-backup", "run", "--backup-target", "file://"+copyDir, "--target", testenv.DSN(dst), "--stream-id", stream, "--poll-interval", "300ms")
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-BROKER-INCREMENTAL-REWRITTEN") || !strings.Contains(r.stderr, "--reset-target-data") {
		t.Fatalf("want SLUICE-E-BROKER-INCREMENTAL-REWRITTEN, got %s", r)
	}
	if after := describeRows(t, dst, "public.t") + describeRows(t, dst, "public.k"); after != before {
		t.Fatalf("the refused run applied something")
	}
	// A broker that reaches a smart-compacted incremental touching the
	// keyless table refuses it before applying any of it.
	dst2 := testenv.CreateDB(t, "dst2")
	mustSluice(t, "restore", "--backup-target", "file://"+copyDir, "--target", testenv.DSN(dst2), "--through", full)
	r = sluice(t, "sync", "from-backup", "run", "--backup-target", "file://"+copyDir, "--target", testenv.DSN(dst2), "--stream-id", stream+"-k",
		"--at-chain-id", full, "--poll-interval", "300ms")
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-BROKER-KEYLESS-TABLE") || !strings.Contains(r.stderr, "public.k") ||
		!strings.Contains(r.stderr, "records no apply identities") || !strings.Contains(r.stderr, keyless) {
		t.Fatalf("want SLUICE-E-BROKER-KEYLESS-TABLE for public.k in %s, got %s", keyless, r)
	}

	// Plain compaction of the chain itself, as a workflow: the stopped
	// broker resumes inside the compacted incremental, exactly once.
	_, cat := openChainAt(t, chainURL)
	gen := cat.Generation
	r = mustSluice(t, "backup", "compact", "--target", chainURL, "--dry-run")
	if _, cat = openChainAt(t, chainURL); cat.Generation != gen || !strings.Contains(r.stdout, "dry run") {
		t.Fatalf("the dry run committed, or said:\n%s", r)
	}
	r = mustSluice(t, "backup", "compact", "--target", chainURL)
	if _, cat = openChainAt(t, chainURL); cat.Segments[0].Layout == "" || !strings.Contains(r.stdout, "merged") {
		t.Fatalf("segment 0 was not compacted:\n%s", r)
	}
	mustSluice(t, "backup", "verify-chain", "--target", chainURL, "--chunks")
	if r := sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--poll-interval", "300ms", "--detach"); r.exit != 0 {
		t.Fatal(r)
	}
	waitBrokerAtTip(t, stream, chainURL, nil, 2*time.Minute)
	cl := temporalClient(t)
	st, err := brokerStatus(t, cl, stream)
	cl.Close()
	if err != nil || st.ChangesSkipped != int64(inside) {
		t.Fatalf("the resumed run skipped %d changes (%v); the stopped one had committed %d of the compacted incremental", st.ChangesSkipped, err, inside)
	}
	stopBroker(t, chainURL, stream)
	requireSameRows(t, src, dst)
	mustSluice(t, "verify", "--source", testenv.DSN(src), "--target", testenv.DSN(dst), "--depth", "checksum", "--local")
}
