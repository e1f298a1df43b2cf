package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/workflows"
)

// markerWorkload writes one marker row per step (stamped with the source's
// clock inside the transaction) and adds one to every account in the same
// transaction, so a transaction applied twice shows in the balances.
type markerWorkload struct {
	stepCounter
	db       string
	from, to int
	pause    time.Duration
	// onStep, when set, runs after step i committed.
	onStep func(i int)
}

func (w *markerWorkload) run(ctx context.Context) error {
	for i := w.from; i <= w.to; i++ {
		if err := execErr(w.db, fmt.Sprintf(`BEGIN; INSERT INTO marker (step) VALUES (%d); UPDATE acct SET bal = bal + 1; COMMIT;`, i)); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		if w.onStep != nil {
			w.onStep(i)
		}
		if err := w.finished(ctx, i-w.from, w.pause); err != nil {
			return err
		}
	}
	return nil
}

// A delayed broker (--apply-delay) never lets the target hold a
// transaction younger than the delay, while its worker is SIGKILLed again
// and again, and catches up once the source is quiet. Then a broker run
// with --until applies exactly the transactions committed at or before the
// point under more kills, ends with exit 0 saying it reached it, and a run
// without --until continues from there exactly once. A point the target
// already passed, a malformed one and a position of another engine are
// refused before anything is written.
func TestBrokerApplyDelayAndUntilSurviveKills(t *testing.T) {
	const delay = 5 * time.Second
	src := testenv.CreateDB(t, "delaysrc")
	testenv.Exec(t, src, `
CREATE TABLE marker (step int PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL);
INSERT INTO acct SELECT i, 0 FROM generate_series(1, 3) i;`)
	dst := testenv.CreateDB(t, "delaydst")
	chainURL := fileChain(t)
	producer := ownWorker(t, "delayproducer")
	pq := producer.args
	worker := ownWorker(t, "delaybroker")
	q := worker.args
	stream := fmt.Sprintf("delay-%d", time.Now().UnixNano()%1e6)
	mustSluice(t, pq("backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	mustSluice(t, pq("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--detach")...)
	broker := func(flags ...string) []string {
		return q(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
			"--stream-id", stream, "--poll-interval", "300ms"}, flags...)...)
	}
	mustSluice(t, broker("--reset-target-data", "--yes", "--apply-delay", delay.String(), "--detach")...)

	// The delay, measured on the one server's clock: the newest marker the
	// target holds is never younger than the delay.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	minAge, samples := 1e9, 0
	go func() {
		for ctx.Err() == nil {
			var age string
			if err := queryString(dst, `SELECT coalesce(extract(epoch FROM clock_timestamp() - max(at))::text, '') FROM marker`, &age); err == nil && age != "" {
				if v, err := strconv.ParseFloat(age, 64); err == nil {
					mu.Lock()
					minAge, samples = min(minAge, v), samples+1
					mu.Unlock()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	wl := &markerWorkload{db: src, from: 1, to: 150 * soakScale(), pause: 60 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- wl.run(ctx) }()
	kills, _ := killWhileApplying(t, worker, stream, wl, done, 4*soakScale(), func(reset bool) {
		if reset {
			mustSluice(t, broker("--reset-target-data", "--yes", "--apply-delay", delay.String(), "--detach")...)
			return
		}
		mustSluice(t, broker("--apply-delay", delay.String(), "--detach")...)
	})
	quiet := time.Now()
	// A liveness bound, not a speed one: after kills in a row the apply's
	// retry backs off to 30 s, and a loaded CI machine took over a minute.
	waitMarkers(t, dst, wl.to, 3*time.Minute)
	mu.Lock()
	t.Logf("delayed replica: %d kills; the target's newest marker was at least %.2f s old over %d samples; caught up %s after the source went quiet",
		kills, minAge, samples, time.Since(quiet).Round(100*time.Millisecond))
	if samples < 20 {
		t.Errorf("only %d samples of the target's lag: the test did not watch the delay", samples)
	}
	if minAge < delay.Seconds() {
		t.Errorf("the target held a transaction %.2f s old; --apply-delay %s must keep it at least that far behind", minAge, delay)
	}
	mu.Unlock()
	cancel()
	requireSameRows(t, src, dst)
	st := brokerStatusNow(t, stream)
	if st.ApplyDelaySeconds != delay.Seconds() || st.LastTransaction == nil {
		t.Errorf("the status does not show the delay held: %+v", st)
	}
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)

	// --until, under kills: the point is taken on the source's clock right
	// after step `at` committed; the workload goes on past it.
	at := wl.to + 60
	var point, pointMarkers string
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	wl2 := &markerWorkload{db: src, from: wl.to + 1, to: wl.to + 120, pause: 60 * time.Millisecond, onStep: func(i int) {
		if i == at {
			point = pgClock(t, src)
			pointMarkers, _ = pgSnapshot(t, src)
			time.Sleep(20 * time.Millisecond)
		}
	}}
	done2 := make(chan error, 1)
	go func() { done2 <- wl2.run(ctx2) }()
	for point == "" && ctx2.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	pointAccts := pointBalances(at)
	mustSluice(t, broker("--until", point, "--detach")...)
	killWhileApplying(t, worker, stream, wl2, done2, 3*soakScale(), func(bool) {
		mustSluice(t, broker("--until", point, "--detach")...)
	})
	waitCaughtUp(t, src, time.Minute)
	res := brokerResult(t, stream, 2*time.Minute)
	if !res.Status.Reached || res.Status.Phase != "reached the point" || res.Status.NextTransaction == nil {
		t.Fatalf("the broker run with --until %s ended with %+v, want it to have reached the point", point, res.Status)
	}
	gotMarkers, gotAccts := pgSnapshot(t, dst)
	if gotMarkers != pointMarkers || gotAccts != pointAccts {
		t.Fatalf("after --until %s the target holds markers %s and accounts %s; want markers %s and accounts %s",
			point, tail(gotMarkers, 80), gotAccts, tail(pointMarkers, 80), pointAccts)
	}
	// Run to the point in the foreground once more: it is there already,
	// so it ends at once, exit 0, saying so.
	r := mustSluice(t, broker("--until", point)...)
	if !strings.Contains(r.stdout, "reached "+point) || !strings.Contains(r.stdout, "run again without --until") {
		t.Errorf("a run at its point does not say it reached it:\n%s", r.stdout)
	}

	// Refusals, before anything is written: the target stays at the point.
	refused := func(what string, exit int, code string, args ...string) {
		t.Helper()
		r := sluice(t, broker(args...)...)
		if r.exit != exit || !strings.Contains(r.stderr, code) || !strings.Contains(r.stderr, "hint:") {
			t.Errorf("%s: want exit %d with %s, got %s", what, exit, code, r)
		}
	}
	refused("a point the target already passed", 3, "SLUICE-E-POINT-PASSED", "--until", time.Now().Add(-24*time.Hour).UTC().Format(time.RFC3339))
	refused("a time without an offset", 2, "SLUICE-E-POINT-INVALID", "--until", "2026-12-05 14:03:00")
	refused("a GTID for a PostgreSQL chain", 2, "SLUICE-E-POINT-INVALID", "--until-position", "0-1-42")
	refused("--until with --until-position", 2, "SLUICE-E-USAGE", "--until", point, "--until-position", "0/0")
	refused("a negative --apply-delay", 2, "SLUICE-E-USAGE", "--apply-delay", "-1s")
	if m, _ := pgSnapshot(t, dst); m != pointMarkers {
		t.Fatalf("a refused run changed the target")
	}

	// Without --until the broker continues exactly once.
	mustSluice(t, broker("--detach")...)
	waitMarkers(t, dst, wl2.to, 3*time.Minute)
	mustSluice(t, pq("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	waitBrokerAt(t, stream, lastIncremental(t, chainURL, nil), 2*time.Minute)
	requireSameRows(t, src, dst)
	mustSluice(t, q("sync", "from-backup", "stop", "--backup-target", chainURL, "--stream-id", stream)...)
	waitWorkflowEnd(t, "broker/"+stream, time.Minute)
}

// pointBalances is what the accounts held once step `at` committed: every
// step adds one to each of the three accounts, from zero.
func pointBalances(at int) string {
	return fmt.Sprintf("1:%d,2:%d,3:%d", at, at, at)
}

// waitMarkers waits until the target's marker table holds n rows.
func waitMarkers(t *testing.T, db string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var got string
	for time.Now().Before(deadline) {
		if err := queryString(db, `SELECT count(*)::text FROM marker`, &got); err == nil && got == strconv.Itoa(n) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the target holds %s markers after %s, want %d", got, within, n)
}

// brokerStatusNow queries the running broker's status.
func brokerStatusNow(t *testing.T, stream string) workflows.BrokerStatus {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	st, err := brokerStatus(t, cl, stream)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// brokerResult waits for the broker's latest run to end and returns its
// result.
func brokerResult(t *testing.T, stream string, within time.Duration) workflows.BrokerResult {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var res workflows.BrokerResult
	if err := cl.GetWorkflow(ctx, "broker/"+stream, "").Get(ctx, &res); err != nil {
		t.Fatalf("broker %s: %v", stream, err)
	}
	return res
}
