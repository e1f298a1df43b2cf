package integration

import (
	"context"
	"fmt"
	"math/rand"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// chainAudit reads every incremental of a chain and checks that each holds
// whole source transactions and that no transaction appears twice anywhere
// in the chain (by apply identity). It returns the transactions seen.
func chainAudit(t *testing.T, chainURL string, storeFlags ...string) (transactions int, segments int) {
	t.Helper()
	ctx := context.Background()
	ch, cat := openChainAt(t, chainURL, storeFlags...)
	if err := ch.Verify(ctx, cat, ""); err != nil {
		t.Fatalf("chain does not verify: %v", err)
	}
	seen := map[string]string{}
	for _, l := range cat.Links() {
		if l.Kind != chain.KindIncremental {
			continue
		}
		m, err := ch.GetManifest(ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		inTx := false
		var cur string
		var txs, changes int64
		for _, ref := range m.Chunks {
			it, err := ch.ReadChangeChunk(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
				c := it.Change()
				switch c.Op {
				case chain.OpBegin:
					if inTx {
						t.Fatalf("incremental %s: begin inside a transaction", l.ID)
					}
					inTx = true
					// A MySQL-family transaction is named by its GTID, a
					// PostgreSQL one by its xid and commit LSN.
					cur = c.Tx
					if cur == "" {
						cur = fmt.Sprintf("xid %d commit %X", c.XID, c.CommitLSN)
					}
					if prev, dup := seen[cur]; dup {
						t.Fatalf("transaction %s appears in incremental %s and again in %s", cur, prev, l.ID)
					}
					seen[cur] = l.ID
				case chain.OpCommit:
					if !inTx {
						t.Fatalf("incremental %s: commit outside a transaction", l.ID)
					}
					inTx = false
					txs++
				default:
					if !inTx {
						t.Fatalf("incremental %s: change outside a transaction", l.ID)
					}
					if !c.Identified {
						t.Fatalf("incremental %s: change without identity", l.ID)
					}
					changes++
				}
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
		}
		if inTx {
			t.Fatalf("incremental %s ends inside a source transaction", l.ID)
		}
		if txs != m.Transactions || changes != m.Changes {
			t.Fatalf("incremental %s: decoded %d transactions / %d changes, manifest says %d / %d", l.ID, txs, changes, m.Transactions, m.Changes)
		}
	}
	return len(seen), len(cat.Segments)
}

// waitCaughtUp waits until the chain's slot has confirmed the source's
// current position: every transaction so far is committed in the chain.
func waitCaughtUp(t *testing.T, db string, within time.Duration) {
	t.Helper()
	var target string
	if err := queryString(db, `SELECT pg_current_wal_lsn()::text`, &target); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var ok bool
		if err := queryBool(db, `SELECT coalesce(bool_and(confirmed_flush_lsn >= $1::pg_lsn), false) FROM pg_replication_slots WHERE database = current_database() AND slot_name LIKE 'sluice\_%' AND slot_type = 'logical' AND NOT temporary`, &ok, target); err == nil && ok {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("the producer did not catch up to %s within %s", target, within)
}

// streamScenario runs the producer on a live workload (with rotation every
// five links), optionally killing the worker at random moments, then stops
// it, restores the chain into a fresh database and compares.
func streamScenario(t *testing.T, kills int) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, workloadSchema)
	chainURL := "file://" + filepath.Join(t.TempDir(), "chain")
	worker := ownWorker(t, strings.ToLower(t.Name()))
	q := worker.args()
	mustSluice(t, append(q, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	mustSluice(t, append(q, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--retain-rotate-at-chain-length", "5", "--detach")...)

	wl := &workload{db: src, steps: 300, bigTx: 100_000, pause: 15 * time.Millisecond}
	if kills > 0 {
		// Long enough for the kills to land while it runs.
		wl.steps, wl.pause = 600, 30*time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wlErr := make(chan error, 1)
	go func() { wlErr <- wl.run(ctx, t) }()

	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(500+rng.Intn(1500)) * time.Millisecond)
		worker.kill()
		t.Logf("kill %d: worker killed at workload step %d", i+1, wl.progress())
		worker.restart()
	}
	if err := <-wlErr; err != nil {
		t.Fatal(err)
	}
	// Keep a trickle of writes going until the producer has rotated at
	// least once, so rotation runs under the same conditions.
	rotateBy := time.Now().Add(4 * time.Minute)
	for i := 0; segmentsOf(t, chainURL) < 2; i++ {
		if time.Now().After(rotateBy) {
			t.Fatal("the producer did not rotate within four minutes")
		}
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO moves VALUES (%d, 'trickle')`, 900000+i))
		time.Sleep(300 * time.Millisecond)
	}
	waitCaughtUp(t, src, 3*time.Minute)
	mustSluice(t, append(q, "backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)

	txs, segments := chainAudit(t, chainURL)
	t.Logf("chain: %d transactions in %d segments", txs, segments)

	dst := testenv.CreateDB(t, "dst")
	mustSluice(t, append(q, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst))...)
	requireSameRows(t, src, dst)
}

// segmentsOf returns how many segments the chain's catalog lists now.
func segmentsOf(t *testing.T, chainURL string) int {
	t.Helper()
	ctx := context.Background()
	bs, err := blobstore.Open(ctx, chainURL, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := chain.Open(bs).LoadCatalog(ctx)
	if err != nil {
		return 0
	}
	return len(cat.Segments)
}

func TestStreamUnderWorkloadRestoresEqual(t *testing.T) { streamScenario(t, 0) }

func TestStreamSurvivesWorkerKills(t *testing.T) { streamScenario(t, 10) }

func TestWindowNeverSplitsATransaction(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	testenv.Exec(t, src, `INSERT INTO t SELECT i, 'x' FROM generate_series(1, 500000) i`)
	testenv.Exec(t, src, `INSERT INTO t VALUES (0, 'after')`)
	// Bounds far below the transaction's size still end the window only
	// after its commit.
	mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "100ms", "--rollover-max-changes", "1000", "--rollover-max-bytes", "65536", "--detach")
	waitCaughtUp(t, src, 4*time.Minute)
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	txs, _ := chainAudit(t, chainURL)
	if txs != 2 {
		t.Fatalf("want the two transactions, whole, got %d", txs)
	}
}

func TestProducerRefusals(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY)`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")

	t.Run("chain of another source", func(t *testing.T) {
		other := testenv.CreateDB(t, "other")
		r := sluice(t, "backup", "incremental", "--source", testenv.DSN(other), "--target", chainURL)
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-SOURCE-MISMATCH") {
			t.Fatalf("want SLUICE-E-SOURCE-MISMATCH exit 3, got %s", r)
		}
	})
	t.Run("second producer", func(t *testing.T) {
		mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s", "--detach")
		defer func() {
			mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
			waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
		}()
		waitSlotActive(t, src, true)
		r := sluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-SOURCE-READER-IN-USE (formerly SLUICE-E-SLOT-IN-USE)") {
			t.Fatalf("want SLUICE-E-SOURCE-READER-IN-USE (formerly SLUICE-E-SLOT-IN-USE) exit 3, got %s", r)
		}
		r = sluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--detach")
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-ALREADY-RUNNING") {
			t.Fatalf("want SLUICE-E-ALREADY-RUNNING exit 3, got %s", r)
		}
	})
	t.Run("missing publication privilege", func(t *testing.T) {
		db := testenv.CreateDB(t, "nopub")
		testenv.Exec(t, db, loginRole("sluice_it_repl")+`CREATE TABLE t (id int PRIMARY KEY);
			GRANT SELECT ON t TO sluice_it_repl;`)
		t.Cleanup(func() { testenv.Exec(t, db, `DROP OWNED BY sluice_it_repl`) })
		dsn := strings.Replace(testenv.DSN(db), "postgres@", "sluice_it_repl@", 1)
		r := sluice(t, "backup", "full", "--source", dsn, "--target", fileChain(t), "--chain-slot")
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-SOURCE-PRIVILEGES") || !strings.Contains(r.stderr, "publication") {
			t.Fatalf("want SLUICE-E-SOURCE-PRIVILEGES about the publication, exit 3; got %s", r)
		}
	})
	t.Run("named publication missing", func(t *testing.T) {
		r := sluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL, "--publication", "no_such_pub")
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-PUBLICATION-MISSING") {
			t.Fatalf("want SLUICE-E-PUBLICATION-MISSING exit 3, got %s", r)
		}
	})
	t.Run("chain without a slot", func(t *testing.T) {
		plain := fileChain(t)
		mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", plain)
		r := sluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", plain)
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-SOURCE-ANCHOR-MISSING (formerly SLUICE-E-SLOT-MISSING)") {
			t.Fatalf("want SLUICE-E-SOURCE-ANCHOR-MISSING (formerly SLUICE-E-SLOT-MISSING) exit 3, got %s", r)
		}
	})
}

func waitSlotActive(t *testing.T, db string, active bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var ok bool
		if err := queryBool(db, `SELECT coalesce(bool_or(active), false) = $1 FROM pg_replication_slots WHERE database = current_database() AND NOT temporary`, &ok, active); err == nil && ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("slot of %s never became active=%t", db, active)
}

func queryString(db, sql string, out *string, args ...any) error {
	conn, err := pgxConnect(db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(context.Background(), sql, args...).Scan(out)
}

func queryBool(db, sql string, out *bool, args ...any) error {
	conn, err := pgxConnect(db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(context.Background(), sql, args...).Scan(out)
}

// sluice:exclusive — it sets max_slot_wal_keep_size on the shared server,
// which invalidates any other test's lagging slot: deploy/dev/test.sh runs it
// alone, after every other test.
func TestInvalidatedSlotRefused(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")

	// Let PostgreSQL keep almost no WAL for slots, then write well past it:
	// the next checkpoint invalidates the idle chain slot.
	testenv.Exec(t, "postgres", `ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`)
	testenv.Exec(t, "postgres", `SELECT pg_reload_conf()`)
	t.Cleanup(func() {
		testenv.Exec(t, "postgres", `ALTER SYSTEM RESET max_slot_wal_keep_size`)
		testenv.Exec(t, "postgres", `SELECT pg_reload_conf()`)
	})
	deadline := time.Now().Add(time.Minute)
	for {
		testenv.Exec(t, src, `INSERT INTO t SELECT i, repeat('w', 200) FROM generate_series(1, 50000) i ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v || '.'`)
		testenv.Exec(t, src, `SELECT pg_switch_wal()`)
		testenv.Exec(t, src, `CHECKPOINT`)
		var lost bool
		if err := queryBool(src, `SELECT coalesce(bool_or(wal_status = 'lost'), false) FROM pg_replication_slots WHERE database = current_database()`, &lost); err != nil {
			t.Fatal(err)
		}
		if lost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("PostgreSQL did not invalidate the slot")
		}
	}
	before := refusalCount(t, adminGet(t, "/metrics"), "SLUICE-E-SOURCE-LOG-LOST")
	for _, args := range [][]string{
		{"backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL},
		{"backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s"},
	} {
		start := time.Now()
		r := sluice(t, args...)
		// The concept code, with the code of earlier releases beside it.
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-SOURCE-LOG-LOST (formerly SLUICE-E-SLOT-INVALIDATED)") || !strings.Contains(r.stderr, "new full") {
			t.Fatalf("sluice %s: want SLUICE-E-SOURCE-LOG-LOST (formerly SLUICE-E-SLOT-INVALIDATED) exit 3 with its hint, got %s", args[1], r)
		}
		// A refusal ends the run at once: no retry loop into the same refusal.
		if time.Since(start) > 30*time.Second {
			t.Errorf("sluice %s took %s to refuse", args[1], time.Since(start))
		}
	}
	// The worker that met the refusal shows the run stalled on a lost source
	// position (until the not-running threshold passes) and counts it.
	metrics := adminGet(t, "/metrics")
	if v, cause, raw := parseVerdict(metrics, "producer", chainURL); v != "stalled" || cause != "source_position_lost" {
		t.Errorf("/metrics: want the producer stalled with source_position_lost, got %s/%s:\n%s", v, cause, raw)
	}
	if after := refusalCount(t, metrics, "SLUICE-E-SOURCE-LOG-LOST"); after != before+2 {
		t.Errorf("/metrics counts SLUICE-E-SOURCE-LOG-LOST refusals %d → %d, want two more (the incremental and the stream)", before, after)
	}
}

// A source connection that dies where the server does not notice (the
// network between them gone) leaves the chain slot held by a walsender
// nobody reads, until wal_sender_timeout. The producer's next attempt ends
// that connection of its own and goes on, rather than refusing its own
// ghost with SLUICE-E-SOURCE-READER-IN-USE; nothing is captured twice.
func TestProducerTakesItsSlotBackFromADeadConnection(t *testing.T) {
	admin, err := url.Parse(testenv.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	pg := startGatedProxy(t, admin.Host)
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	mustSluice(t, "backup", "stream", "run", "--source", viaProxy(t, testenv.DSN(src), pg.addr()), "--target", chainURL,
		"--rollover-window", "1s", "--detach")
	t.Cleanup(func() { _ = terminate("producer/" + chainURL) })
	testenv.Exec(t, src, `INSERT INTO t SELECT i, 'a' FROM generate_series(1, 10) i`)
	waitCaughtUp(t, src, time.Minute)
	// Between two windows the slot is free for a moment: wait for the
	// next window to hold it.
	ghost := awaitSlotHolder(t, src, 0, 30*time.Second)
	if ghost == 0 {
		t.Fatal("the chain slot is not held while the producer streams")
	}

	// The network between them goes: the producer's connections are reset,
	// the server keeps a silent peer, and nothing new gets through — not
	// even the cancel request the driver sends as it drops a connection.
	failures := func() int {
		return strings.Count(h.workerLog.String(), "WorkflowID=producer/"+chainURL+" ")
	}
	before := failures()
	pg.refuse(true)
	pg.abandon()
	for deadline := time.Now().Add(time.Minute); failures() == before; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the producer did not notice its connection was gone")
		}
	}
	pg.refuse(false)
	testenv.Exec(t, src, `INSERT INTO t SELECT i, 'b' FROM generate_series(11, 20) i`)
	waitCaughtUp(t, src, time.Minute)
	if now := awaitSlotHolder(t, src, ghost, 30*time.Second); now == 0 || now == ghost {
		t.Fatalf("want the slot held by a new connection, got process %d (the dead one was %d)", now, ghost)
	}
	// Ended, the walsender lets go of the slot first and exits just after.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var left int
		if err := queryInt(t, src, fmt.Sprintf(`SELECT count(*) FROM pg_stat_activity WHERE pid = %d`, ghost), &left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			var state string
			_ = queryString(src, fmt.Sprintf(`SELECT coalesce(state, '') || ' / ' || coalesce(wait_event_type, '') || ':' || coalesce(wait_event, '') || ' / ' || coalesce(backend_type, '') FROM pg_stat_activity WHERE pid = %d`, ghost), &state)
			t.Fatalf("the dead connection's walsender (process %d) is still there (state / wait / type: %s)", ghost, state)
		}
	}
	if !strings.Contains(h.workerLog.String(), fmt.Sprintf("pid=%d", ghost)) || !strings.Contains(h.workerLog.String(), "SLOT-TAKEN-OVER") {
		t.Errorf("the worker did not log SLOT-TAKEN-OVER for process %d", ghost)
	}

	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	chainAudit(t, chainURL)
	dst := testenv.CreateDB(t, "dst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst))
	requireSameRows(t, src, dst)
}

// awaitSlotHolder waits until a process other than not holds db's chain
// slot and returns it (0 if none did within the time).
func awaitSlotHolder(t *testing.T, db string, not int, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if pid := slotHolder(t, db); (pid != 0 && pid != not) || time.Now().After(deadline) {
			return pid
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// slotHolder returns the process holding db's chain slot (0: none).
func slotHolder(t *testing.T, db string) int {
	t.Helper()
	var pid int
	if err := queryInt(t, db, `SELECT coalesce(max(active_pid), 0) FROM pg_replication_slots
		WHERE database = current_database() AND slot_name LIKE 'sluice\_%' AND slot_type = 'logical' AND NOT temporary`, &pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// A stream reads its slot through one replication connection from window
// to window: reconnecting each window would make PostgreSQL decode again
// everything from the slot's restart point every time. The slot's active
// process stays the same while the chain gains incremental after
// incremental, and the stop frees the slot at once.
func TestStreamKeepsOneReplicationConnection(t *testing.T) {
	src := testenv.CreateDB(t, "onesession")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "300ms", "--detach")
	waitSlotActive(t, src, true)
	pids := map[string]bool{}
	for i := 1; i <= 40; i++ {
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO t VALUES (%d, 'x')`, i))
		var pid string
		if err := queryString(src, `SELECT coalesce(string_agg(active_pid::text, ','), '') FROM pg_replication_slots WHERE database = current_database() AND NOT temporary AND active`, &pid); err != nil {
			t.Fatal(err)
		}
		if pid != "" {
			pids[pid] = true
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitCaughtUp(t, src, time.Minute)
	txs, _ := chainAudit(t, chainURL)
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	if txs != 40 {
		t.Fatalf("the chain holds %d transactions, want the 40 inserts", txs)
	}
	links := 0
	_, cat := openChainAt(t, chainURL)
	for _, l := range cat.Links() {
		if l.Kind == chain.KindIncremental {
			links++
		}
	}
	if links < 5 {
		t.Fatalf("only %d incrementals from 300ms windows: the test did not span windows", links)
	}
	if len(pids) != 1 {
		t.Errorf("the slot was read by %d replication connections over %d incrementals (%v); want one for the whole stream", len(pids), links, pids)
	}
	waitSlotActive(t, src, false)
}

// The source ends the stream's replication connection again and again (the
// walsender terminated, as a DBA or a failover would), while the session
// is parked between windows or reading inside one: the producer opens a new
// session and goes on, and the chain holds every transaction exactly once.
func TestStreamSurvivesItsReplicationConnectionTerminated(t *testing.T) {
	src := testenv.CreateDB(t, "walkill")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "400ms", "--detach")
	waitSlotActive(t, src, true)
	const steps = 80
	terminated := 0
	for i := 1; i <= steps; i++ {
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO t VALUES (%d, 'x')`, i))
		if i%8 == 0 {
			// The producer is back on the slot (after the last
			// termination's retry) before it is cut again.
			waitSlotActive(t, src, true)
			var n string
			if err := queryString(src, `SELECT count(pg_terminate_backend(active_pid))::text FROM pg_replication_slots
				WHERE database = current_database() AND NOT temporary AND active`, &n); err != nil {
				t.Fatal(err)
			}
			if n == "1" {
				terminated++
			}
		}
		time.Sleep(60 * time.Millisecond)
	}
	waitCaughtUp(t, src, 2*time.Minute)
	mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	if terminated < 8 {
		t.Fatalf("only %d of 10 terminations found the stream's connection: the test did not exercise it", terminated)
	}
	// chainAudit refuses a transaction recorded twice and an incremental
	// that does not start where its parent ended.
	if txs, _ := chainAudit(t, chainURL); txs != steps {
		t.Fatalf("the chain holds %d transactions after %d terminations, want the %d inserts once each", txs, terminated, steps)
	}
	dst := testenv.CreateDB(t, "walkilldst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst))
	requireSameRows(t, src, dst)
	t.Logf("%d walsender terminations; the chain holds all %d transactions once", terminated, steps)
}
