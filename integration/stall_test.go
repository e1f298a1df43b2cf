package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The tests here drive each health verdict and stall cause for real — a
// target database that stops accepting connections, a lock that holds the
// apply, a store the network no longer reaches, a source left idle, a worker
// killed — and read the verdict both from the worker's /metrics and from
// `sluice ... status`. Runs are started with short thresholds so the
// verdicts change within seconds.

// fast thresholds for the runs these tests start.
var (
	brokerHealthFlags   = []string{"--poll-interval", "500ms", "--health-poll-stall", "3s", "--health-delivery-stall", "6s", "--health-not-running", "30s"}
	producerHealthFlags = []string{"--rollover-window", "1s", "--health-poll-stall", "4s", "--health-delivery-stall", "8s", "--health-not-running", "30s"}
)

// stallRig is a producer and a broker on a worker of their own.
type stallRig struct {
	t                     *testing.T
	worker                *ownedWorker
	src, dst              string
	chainURL, stream      string
	storeFlags            []string
	producerKey, brokerID string
}

func newStallRig(t *testing.T, name, chainURL string, storeFlags []string) *stallRig {
	r := &stallRig{t: t, worker: ownWorker(t, fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1e6)),
		chainURL: chainURL, storeFlags: storeFlags}
	r.src = testenv.CreateDB(t, "src")
	r.dst = testenv.CreateDB(t, "dst")
	testenv.Exec(t, r.src, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT i, 'v' FROM generate_series(1, 100) i`)
	r.stream = fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1e6)
	r.producerKey, r.brokerID = chainURL, r.stream
	r.must("backup", "full", "--source", testenv.DSN(r.src), "--target", chainURL, "--chain-slot")
	r.must(append([]string{"backup", "stream", "run", "--source", testenv.DSN(r.src), "--target", chainURL, "--detach"}, producerHealthFlags...)...)
	r.must(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(r.dst),
		"--stream-id", r.stream, "--reset-target-data", "--yes", "--detach"}, brokerHealthFlags...)...)
	t.Cleanup(func() {
		// Stop both runs whatever happened (a test may have failed with the
		// store blocked or the worker dead): terminate rather than wait.
		for _, id := range []string{"producer/" + chainURL, "broker/" + r.stream} {
			_ = terminate(id)
		}
		// The worker lets go of the chain slot before the databases drop.
		r.worker.stop()
	})
	return r
}

// terminate ends a workflow through Temporal directly (cleanup only).
func terminate(id string) error {
	cl, err := client.Dial(client.Options{HostPort: h.temporal})
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.TerminateWorkflow(context.Background(), id, "", "test cleanup")
}

func (r *stallRig) args(args ...string) []string {
	return append(r.worker.args(args...), r.storeFlags...)
}

func (r *stallRig) must(args ...string) result {
	r.t.Helper()
	return mustSluice(r.t, r.args(args...)...)
}

// cliVerdict runs `status --json` for the producer or the broker.
func (r *stallRig) cliVerdict(role string) (verdict, cause string, raw string) {
	r.t.Helper()
	var res result
	if role == "producer" {
		res = sluice(r.t, r.worker.args("backup", "stream", "status", "--target", r.chainURL, "--json")...)
	} else {
		res = sluice(r.t, r.worker.args("sync", "from-backup", "status", "--stream-id", r.stream, "--json")...)
	}
	if res.exit != 0 {
		return "", "", res.String()
	}
	var v struct {
		Verdict string `json:"verdict"`
		Cause   string `json:"cause"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
		r.t.Fatalf("status --json is not JSON: %v\n%s", err, res)
	}
	return v.Verdict, v.Cause, res.stdout
}

// metricVerdict reads a run's verdict and stall cause from the worker's /metrics.
func (r *stallRig) metricVerdict(role string) (verdict, cause string, raw string) {
	name := r.producerKey
	if role == "broker" {
		name = r.brokerID
	}
	body, err := getBody("http://" + r.worker.admin + "/metrics")
	if err != nil {
		return "", "", err.Error()
	}
	return parseVerdict(body, role, name)
}

var verdictLine = regexp.MustCompile(`(?m)^sluice_run_(health|stall_cause)\{([^}]*)\} 1$`)

// parseVerdict finds the run's one-hot verdict and its stall cause in a
// Prometheus text exposition.
func parseVerdict(body, role, name string) (verdict, cause, raw string) {
	var lines []string
	for _, m := range verdictLine.FindAllStringSubmatch(body, -1) {
		labels := m[2]
		if !strings.Contains(labels, `role="`+role+`"`) || !strings.Contains(labels, `name="`+name+`"`) {
			continue
		}
		lines = append(lines, m[0])
		if v := labelValue(labels, "verdict"); m[1] == "health" && v != "" {
			verdict = v
		}
		if c := labelValue(labels, "cause"); m[1] == "stall_cause" && c != "" {
			cause = c
		}
	}
	return verdict, cause, strings.Join(lines, "\n")
}

func labelValue(labels, key string) string {
	m := regexp.MustCompile(key + `="([^"]*)"`).FindStringSubmatch(labels)
	if m == nil {
		return ""
	}
	return m[1]
}

func getBody(url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// source reads the verdict from the CLI or the worker's metrics.
type source func(role string) (verdict, cause, raw string)

// awaitVerdict waits until src reports want (and cause, when given) for role.
func (r *stallRig) awaitVerdict(what string, src source, role, want, cause string, within time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		v, c, raw := src(role)
		if v == want && (cause == "" || c == cause) {
			r.t.Logf("%s: %s %s %s", what, role, v, c)
			return
		}
		last = fmt.Sprintf("%s/%s: %s", v, c, raw)
		time.Sleep(300 * time.Millisecond)
	}
	r.t.Fatalf("%s: the %s did not become %s %s within %s; last seen %s", what, role, want, cause, within, last)
}

// both waits for the verdict in /metrics and in `status`.
func (r *stallRig) both(role, want, cause string, within time.Duration) {
	r.t.Helper()
	r.awaitVerdict("/metrics", r.metricVerdict, role, want, cause, within)
	r.awaitVerdict("status", r.cliVerdict, role, want, cause, within)
}

// writing inserts into the source until the returned stop is called.
func (r *stallRig) writing() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgxConnect(r.src)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for i := 1000; ctx.Err() == nil; i++ {
			_, _ = conn.Exec(ctx, `INSERT INTO t VALUES ($1, 'w')`, i)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// insertSome commits a few rows on the source.
func (r *stallRig) insertSome(from int) {
	testenv.Exec(r.t, r.src, fmt.Sprintf(`INSERT INTO t SELECT i, 'x' FROM generate_series(%d, %d) i`, from, from+9))
}

// A live workload is healthy; a quiet source makes both runs idle (never
// stalled); a target that refuses connections stalls the broker with
// target_refusing_apply and it recovers once the target is back; a lock held
// on the target stalls it with chain_not_advancing; a killed worker makes
// both runs stalled (poll_loop_not_turning) and then not_running in
// `status`, and a new worker brings them back.
func TestStallCausesTargetAndWorker(t *testing.T) {
	r := newStallRig(t, "stall-target", fileChain(t), nil)

	stop := r.writing()
	r.both("producer", "healthy", "", time.Minute)
	r.both("broker", "healthy", "", time.Minute)
	stop()

	// Leave the source idle: idle, not stalled, with the ages moving on.
	r.both("producer", "idle", "", 30*time.Second)
	r.both("broker", "idle", "", 30*time.Second)

	// The target stops accepting connections.
	testenv.Exec(t, "postgres", `ALTER DATABASE `+r.dst+` ALLOW_CONNECTIONS false`)
	testenv.Exec(t, "postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, r.dst)
	reopened := false
	reopen := func() {
		if !reopened {
			reopened = true
			testenv.Exec(t, "postgres", `ALTER DATABASE `+r.dst+` ALLOW_CONNECTIONS true`)
		}
	}
	t.Cleanup(reopen)
	r.insertSome(5000)
	r.both("broker", "stalled", "target_refusing_apply", time.Minute)
	r.awaitVerdict("/metrics", r.metricVerdict, "producer", "idle", "", 30*time.Second)
	if !strings.Contains(r.worker.log.String(), "cause=target_refusing_apply") {
		t.Errorf("the worker logged no WARN naming the cause:\n%s", tail(r.worker.log.String(), 4000))
	}
	reopen()
	r.both("broker", "idle", "", time.Minute)
	if !strings.Contains(r.worker.log.String(), "run recovered from stall") {
		t.Errorf("the worker logged no recovery")
	}
	waitCaughtUp(t, r.src, time.Minute)
	waitBrokerAtTip(t, r.stream, r.chainURL, nil, time.Minute)
	requireSameRows(t, r.src, r.dst)

	// A lock on the target holds the apply: the loop turns, nothing commits.
	lockConn, err := pgxConnect(r.dst)
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Close(context.Background())
	lockTx, err := lockConn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockTx.Exec(context.Background(), `LOCK TABLE t IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	r.insertSome(6000)
	r.both("broker", "stalled", "chain_not_advancing", time.Minute)
	_ = lockTx.Rollback(context.Background())
	r.both("broker", "idle", "", time.Minute)

	// Kill the worker: nobody runs either workflow any more.
	r.worker.kill()
	r.awaitVerdict("status", r.cliVerdict, "broker", "stalled", "poll_loop_not_turning", 30*time.Second)
	r.awaitVerdict("status", r.cliVerdict, "producer", "stalled", "poll_loop_not_turning", 30*time.Second)
	r.awaitVerdict("status", r.cliVerdict, "broker", "not_running", "", 2*time.Minute)
	r.awaitVerdict("status", r.cliVerdict, "producer", "not_running", "", 2*time.Minute)
	r.worker.restart()
	stop = r.writing()
	r.both("broker", "healthy", "", 2*time.Minute)
	r.both("producer", "healthy", "", time.Minute)
	stop()
	waitCaughtUp(t, r.src, time.Minute)
	waitBrokerAtTip(t, r.stream, r.chainURL, nil, time.Minute)
	requireSameRows(t, r.src, r.dst)
}

// A store the network stops reaching (every byte held, as in a partition)
// stalls both runs with poll_loop_not_turning; a store that refuses every
// connection stalls them with store_unreachable; once it answers again both
// recover and nothing is lost.
func TestStallCauseBlockedStore(t *testing.T) {
	ep := testenv.S3Endpoint(t)
	testenv.S3Bucket(t)
	proxy := startGatedProxy(t, strings.TrimPrefix(ep, "http://"))
	url, _ := s3Chain(t)
	flags := []string{"--backup-endpoint", "http://" + proxy.addr(), "--backup-path-style", "--backup-region", "us-east-1"}
	r := newStallRig(t, "stall-store", url, flags)

	// Healthy lasts a poll threshold after each delivery: keep writing
	// while both readers look.
	stop := r.writing()
	r.both("broker", "healthy", "", time.Minute)
	stop()
	r.both("producer", "idle", "", 30*time.Second)

	proxy.block()
	t.Cleanup(proxy.unblock)
	r.insertSome(3000)
	r.both("producer", "stalled", "poll_loop_not_turning", time.Minute)
	r.both("broker", "stalled", "poll_loop_not_turning", time.Minute)
	// The worker still runs both, blocked: past the not-running threshold
	// they read stalled, never not_running.
	time.Sleep(35 * time.Second)
	r.both("producer", "stalled", "poll_loop_not_turning", 10*time.Second)
	r.both("broker", "stalled", "poll_loop_not_turning", 10*time.Second)
	proxy.unblock()
	r.both("producer", "idle", "", 2*time.Minute)
	r.both("broker", "idle", "", 2*time.Minute)

	// A store that refuses every connection fails fast: once its requests
	// exhausted their retries the cause is store_unreachable. The broker's
	// polls read the store even on a quiet chain; with nothing written it has
	// nothing to deliver once the store answers, so its first good poll alone
	// must clear the stall.
	proxy.refuse(true)
	t.Cleanup(func() { proxy.refuse(false) })
	r.both("broker", "stalled", "store_unreachable", time.Minute)
	proxy.refuse(false)
	r.both("broker", "idle", "", time.Minute)
	// An idle producer does not touch the store; one with a window to write does.
	proxy.refuse(true)
	r.insertSome(4000)
	r.both("producer", "stalled", "store_unreachable", time.Minute)
	r.both("broker", "stalled", "store_unreachable", time.Minute)
	proxy.refuse(false)
	r.both("producer", "idle", "", 2*time.Minute)
	r.both("broker", "idle", "", 2*time.Minute)
	waitCaughtUp(t, r.src, time.Minute)
	waitBrokerAtTip(t, r.stream, r.chainURL, []string{"--backup-endpoint", ep}, time.Minute)
	requireSameRows(t, r.src, r.dst)
}

// gatedProxy forwards TCP connections to a backend. While blocked it still
// accepts and reads, but holds every byte in both directions, as a network
// partition does: requests neither fail nor complete.
type gatedProxy struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	cond    *sync.Cond
	blocked bool
	// refusing closes every new connection at once.
	refusing atomic.Bool
}

func (p *gatedProxy) refuse(on bool) { p.refusing.Store(on) }

func startGatedProxy(t *testing.T, backend string) *gatedProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gatedProxy{ln: ln, backend: backend}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { p.unblock(); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *gatedProxy) addr() string { return p.ln.Addr().String() }

func (p *gatedProxy) block() { p.mu.Lock(); p.blocked = true; p.mu.Unlock() }

func (p *gatedProxy) unblock() {
	p.mu.Lock()
	p.blocked = false
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *gatedProxy) wait() {
	p.mu.Lock()
	for p.blocked {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

func (p *gatedProxy) serve(c net.Conn) {
	defer c.Close()
	if p.refusing.Load() {
		return
	}
	b, err := net.Dial("tcp", p.backend)
	if err != nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.wait()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pipe(b, c)
	go pipe(c, b)
	<-done
}
