package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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
	return newStallRigVia(t, name, chainURL, storeFlags, "")
}

// newStallRigVia is newStallRig with the producer reaching the source
// through pgAddr (a proxy in front of the test server), when given.
func newStallRigVia(t *testing.T, name, chainURL string, storeFlags []string, pgAddr string) *stallRig {
	r := &stallRig{t: t, worker: ownWorker(t, fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1e6)),
		chainURL: chainURL, storeFlags: storeFlags}
	r.src = testenv.CreateDB(t, "src")
	r.dst = testenv.CreateDB(t, "dst")
	testenv.Exec(t, r.src, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT i, 'v' FROM generate_series(1, 100) i`)
	r.stream = fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1e6)
	r.producerKey, r.brokerID = chainURL, r.stream
	r.must("backup", "full", "--source", testenv.DSN(r.src), "--target", chainURL, "--chain-slot")
	streamSource := testenv.DSN(r.src)
	if pgAddr != "" {
		streamSource = viaProxy(t, streamSource, pgAddr)
	}
	r.must(append([]string{"backup", "stream", "run", "--source", streamSource, "--target", chainURL, "--detach"}, producerHealthFlags...)...)
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

// viaProxy returns dsn pointed at addr (a proxy in front of its server).
func viaProxy(t *testing.T, dsn, addr string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// terminate ends a workflow through Temporal directly (cleanup only).
func terminate(id string) error {
	cl, err := client.Dial(client.Options{HostPort: h.temporal, Namespace: h.namespace})
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
	// What the chain holds says whether the producer kept delivering.
	if l := sluice(r.t, append([]string{"backup", "list", "--target", r.chainURL}, r.storeFlags...)...); l.exit == 0 {
		r.t.Logf("the chain now:\n%s", tail(l.stdout, 3000))
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
//
// sluice:exclusive — beside the other shards' bulk workloads the producer
// twice failed to reach its expected verdict within the bound (it stayed
// healthy, or did not catch up), most likely because its slot decodes the
// whole cluster's WAL; it passes alone. Isolation, not a looser bound.
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
	unlock := lockTable(t, r.dst, "t")
	r.insertSome(6000)
	r.both("broker", "stalled", "chain_not_advancing", time.Minute)
	unlock()
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
	proxy, url, ep, flags := s3ChainBehindProxy(t)
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

// A window reaches the chain but the source connection breaks before the
// slot is confirmed to it: the producer stalls with
// unconfirmed_source_position (SLUICE-E-SLOT-UNCONFIRMED) while it cannot
// reach the source again, recovers by itself once it can, and no
// transaction is stored twice.
//
// sluice:exclusive — it failed in CI beside the other shards' bulk
// workloads and passes alone, as TestStallCausesTargetAndWorker does: its
// producer waits on the same verdicts. Isolation, not a looser bound.
func TestStallCauseUnconfirmedSlot(t *testing.T) {
	store, chainURL, ep, flags := s3ChainBehindProxy(t)
	admin, err := url.Parse(testenv.AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	pg := startGatedProxy(t, admin.Host)
	r := newStallRigVia(t, "stall-slot", chainURL, flags, pg.addr())
	stop := r.writing()
	r.both("producer", "healthy", "", time.Minute)
	stop()
	r.both("producer", "idle", "", 30*time.Second)

	// The next window's first write to the store is held; meanwhile every
	// connection to the source breaks and new ones hang. Released, the
	// window reaches the catalog and its confirmation hits the dead
	// replication connection.
	store.holdPuts()
	t.Cleanup(store.releasePuts)
	r.insertSome(7000)
	store.awaitHeldPut(t, time.Minute)
	pg.block()
	t.Cleanup(pg.unblock)
	pg.reset()
	store.releasePuts()
	r.both("producer", "stalled", "unconfirmed_source_position", time.Minute)
	if !strings.Contains(r.worker.log.String(), "SLUICE-E-SLOT-UNCONFIRMED") {
		t.Errorf("the worker logged no SLUICE-E-SLOT-UNCONFIRMED:\n%s", tail(r.worker.log.String(), 4000))
	}

	// The source answers again: the producer confirms what the chain holds
	// and idles; nothing was captured twice.
	pg.unblock()
	r.both("producer", "idle", "", 2*time.Minute)
	waitCaughtUp(t, r.src, time.Minute)
	waitBrokerAtTip(t, r.stream, chainURL, []string{"--backup-endpoint", ep}, time.Minute)
	requireSameRows(t, r.src, r.dst)
	chainAudit(t, chainURL, "--backup-endpoint", ep, "--backup-path-style")
}

// s3ChainBehindProxy returns an S3 chain URL whose store the CLI and worker
// reach through a gated proxy (flags say so), with the store's own endpoint.
func s3ChainBehindProxy(t *testing.T) (proxy *gatedProxy, chainURL, endpoint string, flags []string) {
	endpoint = testenv.S3Endpoint(t)
	testenv.S3Bucket(t)
	proxy = startGatedProxy(t, strings.TrimPrefix(endpoint, "http://"))
	chainURL, _ = s3Chain(t)
	return proxy, chainURL, endpoint, []string{"--backup-endpoint", "http://" + proxy.addr(), "--backup-path-style", "--backup-region", "us-east-1"}
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
	// holdingPuts holds each HTTP PUT request (and what follows it on its
	// connection) while set; other requests pass. heldPuts counts them.
	holdingPuts bool
	heldPuts    int
	// pairs are the live client and backend connections, for reset; the
	// backends of abandoned pairs stay open until the test ends.
	pairs     map[[2]net.Conn]struct{}
	abandoned map[[2]net.Conn]bool
	// refusing closes every new connection at once.
	refusing atomic.Bool
}

func (p *gatedProxy) refuse(on bool) { p.refusing.Store(on) }

func startGatedProxy(t *testing.T, backend string) *gatedProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gatedProxy{ln: ln, backend: backend, pairs: map[[2]net.Conn]struct{}{}, abandoned: map[[2]net.Conn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() {
		p.unblock()
		p.releasePuts()
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for pair := range p.abandoned {
			pair[1].Close()
		}
	})
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

// holdPuts makes the proxy hold HTTP PUT requests until releasePuts.
func (p *gatedProxy) holdPuts() { p.mu.Lock(); p.holdingPuts = true; p.mu.Unlock() }

func (p *gatedProxy) releasePuts() {
	p.mu.Lock()
	p.holdingPuts = false
	p.mu.Unlock()
	p.cond.Broadcast()
}

// awaitHeldPut waits until a PUT request is being held.
func (p *gatedProxy) awaitHeldPut(t *testing.T, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p.mu.Lock()
		n := p.heldPuts
		p.mu.Unlock()
		if n > 0 {
			return
		}
	}
	t.Fatalf("no PUT reached the proxy within %s", within)
}

// holdPut waits while data (read from a client, on a connection whose PUT is
// already held when *held) is a PUT request to hold.
func (p *gatedProxy) holdPut(held *bool, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holdingPuts || (!*held && !bytes.HasPrefix(data, []byte("PUT "))) {
		return
	}
	if !*held {
		*held = true
		p.heldPuts++
	}
	for p.holdingPuts {
		p.cond.Wait()
	}
	*held = false
}

// reset breaks every live connection: the client side is reset (RST, so its
// next write fails at once), the backend side closed (so a server process
// behind it ends).
func (p *gatedProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pair := range p.pairs {
		if tc, ok := pair[0].(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		pair[0].Close()
		pair[1].Close()
	}
}

// abandon resets the client side of every live connection and leaves the
// backend side open and silent, as a network that dies between them does:
// the client sees its connection gone, the server a peer that says nothing.
func (p *gatedProxy) abandon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pair := range p.pairs {
		p.abandoned[pair] = true
		if tc, ok := pair[0].(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		pair[0].Close()
	}
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
	pair := [2]net.Conn{c, b}
	p.mu.Lock()
	p.pairs[pair] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.pairs, pair)
		if !p.abandoned[pair] {
			b.Close()
		}
	}()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		held := false
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if src == c {
					p.holdPut(&held, buf[:n])
				}
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
