package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/workflows"
)

// lastIncremental returns the ID a broker that replayed the whole chain
// records as last applied: the newest incremental, or the tip when the
// chain has none after its start.
func lastIncremental(t *testing.T, chainURL string, storeFlags []string) string {
	t.Helper()
	_, cat := openChainAt(t, chainURL, storeFlags...)
	return lastIncrementalOf(cat)
}

// lastIncrementalOf returns the ID of the catalog's newest incremental (the
// tip when the chain has none): a broker at it has applied everything, a
// newer segment's full holding nothing more for it.
func lastIncrementalOf(cat *chain.Catalog) string {
	links := cat.Links()
	for i := len(links) - 1; i >= 0; i-- {
		if links[i].Kind == chain.KindIncremental {
			return links[i].ID
		}
	}
	return cat.Tip().ID
}

func brokerStatus(t *testing.T, cl client.Client, stream string) (workflows.BrokerStatus, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var st workflows.BrokerStatus
	res, err := cl.QueryWorkflow(ctx, "broker/"+stream, "", workflows.QueryStatus)
	if err != nil {
		return st, err
	}
	return st, res.Get(&st)
}

// waitBrokerAt waits until the broker's position records want as applied.
func waitBrokerAt(t *testing.T, stream, want string, within time.Duration) {
	t.Helper()
	waitBroker(t, stream, func() string { return want }, within)
}

// waitBrokerAtTip waits until the broker has applied the chain's last
// incremental, read again on every poll: a producer still streaming may
// append one more (a commit that landed late) after the test first looked.
func waitBrokerAtTip(t *testing.T, stream, chainURL string, storeFlags []string, within time.Duration) {
	t.Helper()
	waitBroker(t, stream, func() string { return lastIncremental(t, chainURL, storeFlags) }, within)
}

func waitBroker(t *testing.T, stream string, target func() string, within time.Duration) {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	deadline := time.Now().Add(within)
	var last workflows.BrokerStatus
	var want string
	for time.Now().Before(deadline) {
		want = target()
		st, err := brokerStatus(t, cl, stream)
		if err == nil {
			last = st
			if st.LastApplied == want && st.Applying == "" {
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("broker %s did not reach %s within %s; last status %+v", stream, want, within, last)
}

func stopBroker(t *testing.T, chainURL, stream string, storeFlags ...string) {
	t.Helper()
	mustSluice(t, append([]string{"sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream}, storeFlags...)...)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
}

// brokerScenario runs the producer and brokers together on a live workload
// and proves every target equal to the source at quiescence.
func brokerScenario(t *testing.T, chainURL string, storeFlags []string, lanes []int, steps int) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, workloadSchema)
	with := func(args ...string) []string { return append(args, storeFlags...) }
	mustSluice(t, with("backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	mustSluice(t, with("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--retain-rotate-at-chain-length", "5", "--detach")...)
	var dsts, streams []string
	for i, n := range lanes {
		dst := testenv.CreateDB(t, fmt.Sprintf("dst%d", i))
		stream := fmt.Sprintf("%s-%d-%d", strings.ToLower(t.Name()), i, time.Now().UnixNano()%1e6)
		mustSluice(t, with("sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
			"--stream-id", stream, "--apply-concurrency", fmt.Sprint(n), "--poll-interval", "500ms", "--reset-target-data", "--yes", "--detach")...)
		dsts, streams = append(dsts, dst), append(streams, stream)
	}
	wl := &workload{db: src, steps: steps, bigTx: 50_000, pause: 15 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := wl.run(ctx, t); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, src, 3*time.Minute)
	mustSluice(t, with("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	want := lastIncremental(t, chainURL, storeFlags)
	for i, stream := range streams {
		waitBrokerAt(t, stream, want, 3*time.Minute)
		requireSameRows(t, src, dsts[i])
		stopBroker(t, chainURL, stream, storeFlags...)
	}
}

func TestBrokerReplaysLiveWorkloadIntoTwoTargets(t *testing.T) {
	brokerScenario(t, fileChain(t), nil, []int{1, 4}, 300)
}

func TestBrokerReplaysFromS3(t *testing.T) {
	url, flags := s3Chain(t)
	brokerScenario(t, url, flags, []int{2}, 150)
}

func TestBrokerSurvivesWorkerKills(t *testing.T) { brokerSurvivesWorkerKills(t, nil, nil) }

// The same through an encrypted, signed chain: every producer and broker
// restart unwraps (or draws) its data keys again, and the broker verifies
// every generation it applies.
func TestBrokerSurvivesWorkerKillsEncryptedSigned(t *testing.T) {
	kp := newSigningPair(t)
	brokerSurvivesWorkerKills(t, writerTrust(kp), readerTrust(kp))
}

// brokerSurvivesWorkerKills runs the kill scenario with writer flags on
// the backup and producer and reader flags on the restore and broker.
func brokerSurvivesWorkerKills(t *testing.T, writer, reader []string) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, workloadSchema)
	chainURL := fileChain(t)
	worker := ownWorker(t, "brokerkills")
	q := worker.args

	// The chain: a full, then a workload of several hundred thousand changes.
	mustSluice(t, q(append([]string{"backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot"}, writer...)...)...)
	mustSluice(t, q(append([]string{"backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--retain-rotate-at-chain-length", "5", "--detach"}, writer...)...)...)
	wl := &workload{db: src, steps: 400, bigTx: 200_000, pause: 5 * time.Millisecond}
	if err := wl.run(context.Background(), t); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, src, `UPDATE accounts SET balance = balance + 1 WHERE id % 3 = 0`)
	waitCaughtUp(t, src, 3*time.Minute)
	mustSluice(t, q("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)

	// The broker's first run restores the newest segment's full; kills start
	// once it is applying incrementals.
	dst := testenv.CreateDB(t, "dst")
	stream := fmt.Sprintf("kills-%d", time.Now().UnixNano()%1e6)
	run := func(lanes int, flags ...string) {
		args := q(append(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
			"--stream-id", stream, "--apply-concurrency", fmt.Sprint(lanes), "--poll-interval", "300ms", "--detach"}, reader...), flags...)...)
		mustSluice(t, args...)
	}
	// Restore only the first segment's full, so every later link is applied
	// by the broker, under kills.
	ctx := context.Background()
	_, cat := openChainAt(t, chainURL)
	first := cat.Segments[0].Full.ID
	mustSluice(t, q(append([]string{"restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--through", first}, reader...)...)...)
	cl := temporalClient(t)
	defer cl.Close()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	// A run killed before it recorded its position (its start takes longer
	// on a loaded machine, and an encrypted chain's key stretch longer
	// still) left none: the next one asserts the full again, as an
	// operator would.
	start := func(lanes int) {
		if !hasPosition(dst, stream) {
			run(lanes, "--at-chain-id", first)
			return
		}
		run(lanes)
	}
	for i := 0; i < 20; i++ {
		lanes := []int{1, 4}[i%2]
		start(lanes)
		time.Sleep(time.Duration(200+rng.Intn(1200)) * time.Millisecond)
		st, _ := brokerStatus(t, cl, stream) // queries need a live worker: ask just before the kill
		worker.kill()
		t.Logf("kill %d (lanes %d): last applied %s, applying %s, %d changes", i+1, lanes, short(st.LastApplied), short(st.Applying), st.ChangesApplied)
		_ = cl.TerminateWorkflow(ctx, "broker/"+stream, "", "crash test: change --apply-concurrency")
		worker.restart()
	}
	start(4)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 5*time.Minute)
	requireSameRows(t, src, dst)
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
}

func short(id string) string {
	if len(id) > 10 {
		return id[:10]
	}
	return id
}

// brokerFixture is a small chain: a full and one incremental over a keyed
// and a keyless table.
func brokerFixture(t *testing.T) (src, chainURL, fullID, incID string) {
	src = testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE k (a int, b text); ALTER TABLE k REPLICA IDENTITY FULL;
		INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 100) i; INSERT INTO k VALUES (1, 'x'), (1, 'x');`)
	chainURL = fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	testenv.Exec(t, src, `INSERT INTO t SELECT i, 'n' || i FROM generate_series(101, 200) i; UPDATE t SET v = 'u' WHERE id <= 10; DELETE FROM t WHERE id = 50;
		INSERT INTO k VALUES (2, 'y'); UPDATE k SET b = 'z' WHERE ctid = (SELECT ctid FROM k WHERE a = 1 LIMIT 1);`)
	mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
	ctx := context.Background()
	bs, _ := blobstore.Open(ctx, chainURL, blobstore.Options{})
	cat, err := chain.Open(bs).LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	links := cat.Links()
	return src, chainURL, links[0].ID, links[len(links)-1].ID
}

func tableCount(t *testing.T, db string) int {
	t.Helper()
	var n int
	if err := queryInt(t, db, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// hasPosition reports whether database db holds a broker position for
// stream.
func hasPosition(db, stream string) bool {
	_, err := positionToken(db, stream)
	return err == nil
}

// positionToken reads the position token of stream in database db.
func positionToken(db, stream string) (string, error) {
	var s string
	err := queryString(db, `SELECT token FROM public.sluice_cdc_state WHERE stream_id = $1`, &s, stream)
	return s, err
}

func stateToken(t *testing.T, db, stream string) string {
	t.Helper()
	s, err := positionToken(db, stream)
	if err != nil {
		t.Fatalf("read position of %s: %v", stream, err)
	}
	return s
}

func TestBrokerStartModes(t *testing.T) {
	src, chainURL, fullID, incID := brokerFixture(t)
	suffix := fmt.Sprintf("-%d", time.Now().UnixNano()%1e6)
	run := func(dst, stream string, flags ...string) result {
		if stream != "" {
			stream += suffix
		}
		args := append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
			"--stream-id", stream, "--poll-interval", "300ms"}, flags...)
		return sluice(t, args...)
	}
	expect := func(r result, exit int, code string, also ...string) {
		t.Helper()
		if r.exit != exit || !strings.Contains(r.stderr, code) {
			t.Fatalf("want %s exit %d, got %s", code, exit, r)
		}
		for _, s := range also {
			if !strings.Contains(r.stderr, s) {
				t.Fatalf("stderr lacks %q:\n%s", s, r.stderr)
			}
		}
	}

	t.Run("first launch without a flag is refused and writes nothing", func(t *testing.T) {
		dst := testenv.CreateDB(t, "dst")
		expect(run(dst, "s1"), 3, "SLUICE-E-BROKER-NO-POSITION", "--reset-target-data", "--at-chain-id")
		if n := tableCount(t, dst); n != 0 {
			t.Fatalf("the refusal wrote %d tables", n)
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		dst := testenv.CreateDB(t, "dst")
		expect(run(dst, "s1", "--reset-target-data"), 2, "SLUICE-E-RESET-NOT-CONFIRMED", "--yes")
		expect(run(dst, "s1", "--reset-target-data", "--yes", "--at-chain-id", fullID), 2, "SLUICE-E-USAGE")
		expect(run(dst, ""), 2, "SLUICE-E-USAGE", "--stream-id")
		expect(run(dst, "s1", "--apply-concurrency", "0"), 2, "SLUICE-E-USAGE")
		if n := tableCount(t, dst); n != 0 {
			t.Fatalf("a usage error wrote %d tables", n)
		}
	})
	t.Run("reset, warm resume, at-chain-id conflict", func(t *testing.T) {
		dst := testenv.CreateDB(t, "dst")
		r := run(dst, "s2", "--reset-target-data", "--yes", "--detach")
		if r.exit != 0 {
			t.Fatal(r)
		}
		waitBrokerAt(t, "s2"+suffix, incID, time.Minute)
		requireSameRows(t, src, dst)
		stopBroker(t, chainURL, "s2"+suffix)
		before := stateToken(t, dst, "s2"+suffix)

		expect(run(dst, "s2", "--at-chain-id", fullID), 1, "SLUICE-E-BROKER-AT-CHAIN-ID-CONFLICT", fullID, incID)
		if stateToken(t, dst, "s2"+suffix) != before {
			t.Fatal("the refused run changed the position")
		}
		// The link it records, with nothing in progress, is accepted: a warm resume.
		if r := run(dst, "s2", "--at-chain-id", incID, "--detach"); r.exit != 0 {
			t.Fatal(r)
		}
		waitBrokerAt(t, "s2"+suffix, incID, time.Minute)
		stopBroker(t, chainURL, "s2"+suffix)
		// Without a flag: a warm resume.
		if r := run(dst, "s2", "--detach"); r.exit != 0 {
			t.Fatal(r)
		}
		waitBrokerAt(t, "s2"+suffix, incID, time.Minute)
		stopBroker(t, chainURL, "s2"+suffix)
		requireSameRows(t, src, dst)
	})
	t.Run("at-chain-id after an operator's restore", func(t *testing.T) {
		dst := testenv.CreateDB(t, "dst")
		mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--through", fullID)
		if r := run(dst, "s3", "--at-chain-id", fullID, "--detach"); r.exit != 0 {
			t.Fatal(r)
		}
		waitBrokerAt(t, "s3"+suffix, incID, time.Minute)
		stopBroker(t, chainURL, "s3"+suffix)
		requireSameRows(t, src, dst)
		expect(run(testenv.CreateDB(t, "dst"), "s3x", "--at-chain-id", "0000000000000000000000000000000000000000"), 3, "SLUICE-E-LINK-NOT-FOUND")
	})
	t.Run("a row of another writer is refused with or without flags", func(t *testing.T) {
		dst := testenv.CreateDB(t, "dst")
		testenv.Exec(t, dst, `CREATE TABLE public.sluice_cdc_state (stream_id text PRIMARY KEY, token text NOT NULL, checksum text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
			INSERT INTO public.sluice_cdc_state (stream_id, token, checksum) VALUES ('s4`+suffix+`', '{"_engine":"sync-start-v3","lsn":"0/1"}', 'x'),
			  ('s5`+suffix+`', '{"lsn":"0/1"}', 'x')`)
		expect(run(dst, "s4"), 3, "SLUICE-E-BROKER-POSITION-FOREIGN", "sync-start-v3")
		expect(run(dst, "s4", "--reset-target-data", "--yes"), 3, "SLUICE-E-BROKER-POSITION-FOREIGN")
		expect(run(dst, "s4", "--at-chain-id", fullID), 3, "SLUICE-E-BROKER-POSITION-FOREIGN")
		expect(run(dst, "s5"), 3, "SLUICE-E-BROKER-POSITION-FOREIGN", "no _engine")
	})
	t.Run("a damaged broker row is refused, then reset", func(t *testing.T) {
		dst := testenv.CreateDB(t, "dst")
		if r := run(dst, "s6", "--reset-target-data", "--yes", "--detach"); r.exit != 0 {
			t.Fatal(r)
		}
		waitBrokerAt(t, "s6"+suffix, incID, time.Minute)
		stopBroker(t, chainURL, "s6"+suffix)
		testenv.Exec(t, dst, `UPDATE public.sluice_cdc_state SET token = replace(token, '"last_applied"', '"last_applied" ') WHERE stream_id = 's6`+suffix+`'`)
		expect(run(dst, "s6"), 1, "SLUICE-E-BROKER-POSITION-CORRUPT", "--reset-target-data", "--at-chain-id")
		if r := run(dst, "s6", "--reset-target-data", "--yes", "--detach"); r.exit != 0 {
			t.Fatal(r)
		}
		waitBrokerAt(t, "s6"+suffix, incID, time.Minute)
		stopBroker(t, chainURL, "s6"+suffix)
		requireSameRows(t, src, dst)
	})
}

func TestBrokerInterruptInsideAnIncrementalResumesExactlyOnce(t *testing.T) {
	src, chainURL, fullID, _ := brokerFixture(t)
	// 200 transactions of 10,000 rows into the keyless table: the
	// position advances between them, so an interruption lands inside
	// (sixty were enough before the applier sent them as set statements;
	// the apply must outlast the cancellation's way to the activity).
	for i := 0; i < 200; i++ {
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO k SELECT i, 'bulk' FROM generate_series(%d, %d) i`, i*10000, i*10000+9999))
	}
	testenv.Exec(t, src, `INSERT INTO t SELECT i, 'late' FROM generate_series(1000, 1100) i`)
	mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
	dst := testenv.CreateDB(t, "dst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--through", fullID)
	stream := fmt.Sprintf("intr-%d", time.Now().UnixNano()%1e6)

	cmd := exec.Command(filepath.Join(h.bin, "sluice"), "sync", "from-backup", "run", "--backup-target", chainURL,
		"--target", testenv.DSN(dst), "--stream-id", stream, "--at-chain-id", fullID, "--poll-interval", "300ms")
	cmd.Env = h.env()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cl := temporalClient(t)
	defer cl.Close()
	var text strings.Builder
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// Interrupt once the big incremental has committed part of its work.
	signalled := false
	deadline := time.After(2 * time.Minute)
	for !signalled {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the broker ended before it was interrupted:\n%s", text.String())
			}
			text.WriteString(l + "\n")
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("the broker never got inside the big incremental")
		}
		st, err := brokerStatus(t, cl, stream)
		if err == nil && st.Applying != "" {
			var n int
			if queryInt(t, dst, `SELECT count(*) FROM public.k WHERE b = 'bulk'`, &n) == nil && n > 0 {
				_ = cmd.Process.Signal(syscall.SIGINT)
				signalled = true
			}
		}
	}
	for l := range lines {
		text.WriteString(l + "\n")
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(text.String(), "SLUICE-E-BROKER-INCREMENTAL-PARTIAL") {
		t.Fatalf("want BROKER-INCREMENTAL-PARTIAL exit 1, got %v:\n%s", err, text.String())
	}
	// Re-running the same command resumes and converges exactly once, the
	// keyless table included.
	if r := sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--poll-interval", "300ms", "--detach"); r.exit != 0 {
		t.Fatal(r)
	}
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 2*time.Minute)
	requireSameRows(t, src, dst)

	// A stop between incrementals ends a following run with exit 0.
	r := make(chan result, 1)
	mustSluice(t, "sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
	prev := runIDOf(t, "broker/"+stream)
	go func() {
		r <- sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream, "--poll-interval", "300ms")
	}()
	waitNewRun(t, "broker/"+stream, prev, time.Minute)
	mustSluice(t, "sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)
	if res := <-r; res.exit != 0 {
		t.Fatalf("a stopped broker must exit 0: %s", res)
	}
}
