package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/value"
	"github.com/sluicehq/sluice/workflows"
)

// The fault tests (faults_*_test.go) run a producer and a broker on a live
// workload and inject one class of fault after another — the store's
// network misbehaving, the target's connections or server going away, the
// source's replication connection or server going away — then compare the
// target with the source row by row. Each logs one line per fault class,
//
//	FAULTS class=<name> injected=N rows=N lost=N duplicated=N wrong=N longest_recovery=1.2s
//
// which a soak run collects into its table: rows, lost, duplicated and wrong
// come from the comparison at the end of the run the faults were injected
// in, longest_recovery is the longest time from the end of one fault until
// the chain held everything the source had committed by then and the
// broker had applied it.

// faultClass counts the faults of one class and the longest recovery.
type faultClass struct {
	name     string
	injected int
	longest  time.Duration
}

// faultBook is the fault classes of one run, in the order first injected.
type faultBook struct {
	mu      sync.Mutex
	classes []*faultClass
}

// injected records one fault of class name and the time the run took to
// recover from it.
func (b *faultBook) injected(name string, recovery time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.classes {
		if c.name == name {
			c.injected++
			c.longest = max(c.longest, recovery)
			return
		}
	}
	b.classes = append(b.classes, &faultClass{name: name, injected: 1, longest: recovery})
}

// report logs each class's FAULTS line with the run's comparison, and fails
// the test when the comparison found any row lost, duplicated or wrong.
func (b *faultBook) report(t *testing.T, tally rowTally) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.classes {
		t.Logf("FAULTS class=%s injected=%d rows=%d lost=%d duplicated=%d wrong=%d longest_recovery=%.1fs",
			c.name, c.injected, tally.rows, tally.lost, tally.duplicated, tally.wrong, c.longest.Seconds())
	}
	if tally.lost+tally.duplicated+tally.wrong > 0 {
		t.Fatalf("after the faults the target differs from the source: %d rows lost, %d duplicated, %d wrong:\n%s",
			tally.lost, tally.duplicated, tally.wrong, strings.Join(tally.samples, "\n"))
	}
}

// rowTally is a row-by-row comparison of a target with its source.
type rowTally struct {
	rows, lost, duplicated, wrong int
	samples                       []string
}

// tallyRows compares every table of the chain's newest schema as readSrc
// and readDst read it, rows rendered through their neutral kinds: a source
// row the target lacks is lost, a target row the source lacks is
// duplicated, and the two sharing a primary key are one wrong row.
func tallyRows(t *testing.T, ch *chain.Chain, readSrc, readDst func(*chain.Table) ([][]value.Value, error)) rowTally {
	t.Helper()
	ctx := context.Background()
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := ch.SchemaAt(ctx, cat, cat.Tip().ID)
	if err != nil {
		t.Fatal(err)
	}
	var tally rowTally
	note := func(format string, args ...any) {
		if len(tally.samples) < 10 {
			tally.samples = append(tally.samples, fmt.Sprintf(format, args...))
		}
	}
	for i := range schema.Tables {
		tb := &schema.Tables[i]
		src, err := readSrc(tb)
		if err != nil {
			t.Fatalf("read the source's %s: %v", tb.Name, err)
		}
		dst, err := readDst(tb)
		if err != nil {
			t.Fatalf("read the target's %s: %v", tb.Name, err)
		}
		var keyCols []int
		for _, k := range tb.PrimaryKey {
			for j, c := range tb.Columns {
				if c.Name == k {
					keyCols = append(keyCols, j)
				}
			}
		}
		key := func(r []value.Value) string {
			if len(keyCols) == 0 {
				return ""
			}
			parts := make([]string, len(keyCols))
			for n, j := range keyCols {
				parts[n] = renderRow(t, &chain.Table{Columns: tb.Columns[j : j+1]}, r[j:j+1])
			}
			return strings.Join(parts, "|")
		}
		for _, rows := range [][][]value.Value{src, dst} {
			for _, row := range rows {
				normalizeJSON(tb, row) // jsonb's text and a target's rendering of one document differ in spacing
			}
		}
		want := map[string]int{}
		wantKey := map[string]string{}
		for _, r := range src {
			s := renderRow(t, tb, r)
			want[s]++
			if k := key(r); k != "" {
				wantKey[k] = s
			}
		}
		tally.rows += len(src)
		extra := map[string]string{} // key → target row, of rows the source lacks
		for _, r := range dst {
			s := renderRow(t, tb, r)
			if want[s] > 0 {
				want[s]--
				continue
			}
			if k := key(r); k != "" && wantKey[k] != "" {
				extra[k] = s
				continue
			}
			tally.duplicated++
			note("%s: the target has %q, the source not", tb.Name, s)
		}
		for s, n := range want {
			for ; n > 0; n-- {
				var k string
				for kk, v := range wantKey {
					if v == s {
						k = kk
						break
					}
				}
				if got, ok := extra[k]; ok && k != "" {
					tally.wrong++
					note("%s key %s: source %q, target %q", tb.Name, k, s, got)
					delete(extra, k)
					continue
				}
				tally.lost++
				note("%s: the source has %q, the target not", tb.Name, s)
			}
		}
		for k, s := range extra {
			tally.duplicated++
			note("%s key %s: the target has %q twice over", tb.Name, k, s)
		}
	}
	return tally
}

// faultSource is the source side of a fault rig: a PostgreSQL database (on
// the shared server or a scratch one) or a MariaDB one.
type faultSource struct {
	// driver is the CLI's --source-driver ("postgres", "mariadb").
	driver string
	// dsn is the source's URL.
	dsn string
}

// flags are the CLI's source flags.
func (s faultSource) flags() []string {
	return []string{"--source-driver", s.driver, "--source", s.dsn}
}

// mark returns the source's current log position, for covered.
func (s faultSource) mark(t *testing.T) string {
	t.Helper()
	if s.driver == "postgres" {
		var lsn string
		if err := pgQueryRow(s.dsn, `SELECT pg_current_wal_lsn()::text`, &lsn); err != nil {
			t.Fatalf("read the source's position: %v", err)
		}
		return lsn
	}
	db := testenv.MySQLAt(t, s.dsn)
	return masterPos(t, db).String()
}

// covered says whether the chain (its catalog in ch) holds everything the
// source committed up to mark: on PostgreSQL the chain's slot confirmed
// it (the producer confirms only what a catalog write covers); on MariaDB
// the chain's tip ends at or after it. An unreachable source (restarting)
// has not covered it yet.
func (s faultSource) covered(t *testing.T, ch *chain.Chain, mark string) bool {
	t.Helper()
	if s.driver == "postgres" {
		var ok bool
		err := pgQueryRow(s.dsn, `SELECT coalesce(bool_and(confirmed_flush_lsn >= $1::pg_lsn), false) FROM pg_replication_slots
			WHERE database = current_database() AND slot_name LIKE 'sluice\_%' AND slot_type = 'logical' AND NOT temporary`, &ok, mark)
		return err == nil && ok
	}
	want, err := parseChainPosition(mark)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := ch.LoadCatalog(context.Background())
	if err != nil {
		return false
	}
	at, err := parseChainPosition(cat.Tip().EndPosition)
	return err == nil && at.atOrAfter(want)
}

// rows reads the source's tables as neutral values.
func (s faultSource) rows(t *testing.T) func(*chain.Table) ([][]value.Value, error) {
	t.Helper()
	if s.driver == "postgres" {
		return pgNeutralRowsAt(t, s.dsn)
	}
	return mariaNeutralRows(t, s.dsn)
}

// withPG runs do on a new connection to the database a postgres:// URL
// names, within ten seconds, and closes it.
func withPG(dsn string, do func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return do(ctx, conn)
}

// pgQueryRow runs one query on the database a postgres:// URL names and
// scans its one row.
func pgQueryRow(dsn, query string, out any, args ...any) error {
	return withPG(dsn, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, query, args...).Scan(out)
	})
}

// pgExec runs statements (several, with the simple protocol) on the
// database a postgres:// URL names.
func pgExec(dsn, stmts string) error {
	return withPG(dsn, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, stmts)
		return err
	})
}

// faultRig is a producer and a broker, on a worker of the test's own, from
// a source through a chain into a target, with the fault book of the run.
type faultRig struct {
	t      *testing.T
	worker *ownedWorker
	src    faultSource
	// chainURL with the store flags of the CLI and the worker (through a
	// fault proxy, for store faults) and of the test's own reads.
	chainURL      string
	workerStore   []string
	directStore   []string
	dstDriver     string
	dstDSN        string
	stream        string
	lanes         int
	chain         *chain.Chain
	book          faultBook
	producerExtra []string
	// touch commits one small transaction on the source (its n-th): the
	// recovery after a fault is counted up to a transaction committed
	// after the fault's end, carried through the store and applied.
	touch   func(n int) error
	touches int
}

// newFaultRig returns a rig whose runs have not started yet.
func newFaultRig(t *testing.T, name string, src faultSource, chainURL string, workerStore, directStore []string, dstDriver, dstDSN string, lanes int) *faultRig {
	t.Helper()
	r := &faultRig{t: t, src: src, chainURL: chainURL, workerStore: workerStore, directStore: directStore,
		dstDriver: dstDriver, dstDSN: dstDSN, lanes: lanes,
		stream: fmt.Sprintf("faults-%s-%d", name, time.Now().UnixNano()%1e6)}
	r.worker = ownWorker(t, fmt.Sprintf("faults%s%d", name, time.Now().UnixNano()%1e6))
	r.chain = chain.Open(openStoreAt(t, chainURL, directStore...))
	t.Cleanup(func() {
		// Whatever happened, end both runs before the databases go.
		for _, id := range []string{"producer/" + chainURL, "broker/" + r.stream} {
			_ = terminate(id)
		}
	})
	return r
}

// cli runs a sluice command on the rig's worker with the worker's store flags.
func (r *faultRig) cli(args ...string) result {
	r.t.Helper()
	return mustSluice(r.t, r.worker.args(append(args, r.workerStore...)...)...)
}

// start takes the full, starts the producer and starts the broker cold
// (--reset-target-data).
func (r *faultRig) start() {
	r.t.Helper()
	full := append([]string{"backup", "full"}, r.src.flags()...)
	full = append(full, "--target", r.chainURL)
	if r.src.driver == "postgres" {
		full = append(full, "--chain-slot")
	}
	r.cli(full...)
	stream := append([]string{"backup", "stream", "run"}, r.src.flags()...)
	stream = append(stream, "--target", r.chainURL, "--rollover-window", "1s", "--idle-window", "1s",
		"--retain-rotate-at-chain-length", "5", "--detach")
	r.cli(append(stream, r.producerExtra...)...)
	r.runBroker("--reset-target-data", "--yes")
}

// runBroker starts the broker with extra flags.
func (r *faultRig) runBroker(flags ...string) {
	r.t.Helper()
	r.cli(append([]string{"sync", "from-backup", "run", "--backup-target", r.chainURL, "--target-driver", r.dstDriver,
		"--target", r.dstDSN, "--stream-id", r.stream, "--apply-concurrency", fmt.Sprint(r.lanes),
		"--poll-interval", "300ms", "--detach"}, flags...)...)
}

// awaitRecovery waits until the chain holds everything the source had
// committed when it was called and the broker has applied the link that
// holds it, and returns the time since from (the end of a fault). It fails
// the test after within.
func (r *faultRig) awaitRecovery(from time.Time, within time.Duration) time.Duration {
	r.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	if r.touch != nil {
		for r.touches++; ; time.Sleep(200 * time.Millisecond) {
			err := r.touch(r.touches)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				r.t.Fatalf("the source took no write within %s of the fault's end: %v", within, err)
			}
		}
	}
	mark := r.src.mark(r.t)
	for !r.src.covered(r.t, r.chain, mark) {
		if time.Now().After(deadline) {
			r.t.Fatalf("the producer did not cover the source's position %s within %s of the fault's end", mark, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cat, err := r.chain.LoadCatalog(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	// A tip that is a new segment's full holds nothing for the broker to
	// apply: the segment it caps ends with the incremental that reaches
	// the full's anchor, and that is what the broker must have applied.
	want := lastIncrementalOf(cat)
	cl := temporalClient(r.t)
	defer cl.Close()
	var last workflows.BrokerStatus
	for {
		if st, err := brokerStatus(r.t, cl, r.stream); err == nil {
			last = st
			if r.appliedThrough(st, want) {
				return time.Since(from)
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the broker did not apply %s within %s of the fault's end; last status %+v", short(want), within, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// appliedThrough says whether the broker's status shows link id (or a
// later one) applied.
func (r *faultRig) appliedThrough(st workflows.BrokerStatus, id string) bool {
	if st.LastApplied == "" {
		return false
	}
	if st.LastApplied == id {
		return true
	}
	cat, err := r.chain.LoadCatalog(context.Background())
	if err != nil {
		return false
	}
	links := cat.Links()
	return indexOf(links, st.LastApplied) >= indexOf(links, id) && indexOf(links, id) >= 0
}

func indexOf(links []chain.Link, id string) int {
	for i, l := range links {
		if l.ID == id {
			return i
		}
	}
	return -1
}

// awaitApplying waits up to within for the broker to be seen inside an
// incremental (so a fault lands mid-apply), and says whether it was.
func (r *faultRig) awaitApplying(within time.Duration) bool {
	cl := temporalClient(r.t)
	defer cl.Close()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if st, err := brokerStatus(r.t, cl, r.stream); err == nil && st.Applying != "" {
			return true
		}
	}
	return false
}

// finish stops the producer once it holds everything the source committed,
// waits for the broker to apply the whole chain, checks the chain with
// verify-chain --chunks, compares the target with the source row by row,
// reports the fault classes and stops the broker.
func (r *faultRig) finish() rowTally {
	r.t.Helper()
	r.awaitRecovery(time.Now(), 3*time.Minute)
	r.cli("backup", "stream", "stop", "--target", r.chainURL)
	waitWorkflowEnd(r.t, "producer/"+r.chainURL, time.Minute)
	waitBrokerAt(r.t, r.stream, lastIncremental(r.t, r.chainURL, r.directStore), 3*time.Minute)
	if v := sluice(r.t, append([]string{"backup", "verify-chain", "--target", r.chainURL, "--chunks"}, r.directStore...)...); v.exit != 0 {
		r.t.Fatalf("verify-chain --chunks after the faults: %s", v)
	}
	tally := tallyRows(r.t, r.chain, r.src.rows(r.t), targetNeutralRows(r.t, r.dstDriver, r.dstDSN))
	r.book.report(r.t, tally)
	r.cli("sync", "from-backup", "stop", "--backup-target", r.chainURL, "--stream-id", r.stream)
	waitWorkflowEnd(r.t, "broker/"+r.stream, time.Minute)
	return tally
}

// chainWatcher reads the chain the way a reader does, again and again while
// faults are injected: every link each catalog generation lists, its
// manifest and every chunk (checking each chunk's SHA-256). A link that is
// listed but cannot be read whole is a half-written link made visible.
type chainWatcher struct {
	stop    context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	links   int
	gens    map[int64]bool
	badness []string
}

// watchChain starts a watcher on ch (reached directly, not through a
// fault proxy).
func watchChain(ch *chain.Chain) *chainWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &chainWatcher{stop: cancel, done: make(chan struct{}), gens: map[int64]bool{}}
	go func() {
		defer close(w.done)
		read := map[string]bool{}
		for ctx.Err() == nil {
			cat, err := ch.LoadCatalog(ctx)
			switch {
			case errors.Is(err, blobstore.ErrNotFound) || ctx.Err() != nil:
			case err != nil:
				w.bad("load the catalog: %v", err)
			default:
				w.mu.Lock()
				w.gens[cat.Generation] = true
				w.mu.Unlock()
				for _, l := range cat.Links() {
					if read[l.ID] || ctx.Err() != nil {
						continue
					}
					if err := readWholeLink(ctx, ch, cat, l.ID); err != nil {
						if ctx.Err() == nil {
							w.bad("generation %d lists %s %s, which does not read whole: %v", cat.Generation, l.Kind, l.ID, err)
						}
						continue
					}
					read[l.ID] = true
					w.mu.Lock()
					w.links++
					w.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *chainWatcher) bad(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.badness) < 20 {
		w.badness = append(w.badness, fmt.Sprintf(format, args...))
	}
}

// check stops the watcher and fails the test if it ever saw a listed link
// it could not read, or read none.
func (w *chainWatcher) check(t *testing.T) {
	t.Helper()
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.badness) > 0 {
		t.Fatalf("a reader saw links it could not read whole:\n%s", strings.Join(w.badness, "\n"))
	}
	if w.links < 3 {
		t.Fatalf("the watcher read only %d links: it did not watch the run", w.links)
	}
	t.Logf("a reader read %d links whole across %d catalog generations while the faults ran", w.links, len(w.gens))
}

// readWholeLink reads a link's manifest and every chunk it names.
func readWholeLink(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, id string) error {
	m, err := ch.LinkManifest(ctx, cat, id)
	if err != nil {
		return err
	}
	refs := slices.Clone(m.Chunks)
	for _, tb := range m.Tables {
		refs = append(refs, tb.Chunks...)
	}
	for _, ref := range refs {
		if _, _, err := ch.ReadChunk(ctx, ref); err != nil {
			return err
		}
	}
	return nil
}

// toxics is an in-process toxiproxy server whose proxies stand between
// the worker and a store (or any TCP service) in the fault tests; its log
// feeds proxyEvents.
var toxics = sync.OnceValue(func() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.New(&proxyEvents).Level(zerolog.InfoLevel))
})

// proxyEvents counts, per proxy, the client connections toxiproxy accepted,
// from its log: proof that traffic went through a proxy while a fault was on.
var proxyEvents proxyCounter

type proxyCounter struct {
	mu       sync.Mutex
	accepted map[string]int
}

// Write takes one JSON log line of toxiproxy.
func (c *proxyCounter) Write(p []byte) (int, error) {
	var ev struct {
		Name    string `json:"name"`
		Message string `json:"message"`
	}
	if json.Unmarshal(p, &ev) == nil && ev.Message == "Accepted client" {
		c.mu.Lock()
		if c.accepted == nil {
			c.accepted = map[string]int{}
		}
		c.accepted[ev.Name]++
		c.mu.Unlock()
	}
	return len(p), nil
}

// accepted returns how many connections the proxy has accepted so far.
func (f *faultProxy) accepted() int {
	proxyEvents.mu.Lock()
	defer proxyEvents.mu.Unlock()
	return proxyEvents.accepted[f.p.Name]
}

// faultProxy is one toxiproxy proxy in front of upstream (host:port).
type faultProxy struct {
	t *testing.T
	p *toxiproxy.Proxy
}

// startFaultProxy starts a proxy on a free port in front of upstream; it
// stops when the test ends.
func startFaultProxy(t *testing.T, name, upstream string) *faultProxy {
	t.Helper()
	p := toxiproxy.NewProxy(toxics(), fmt.Sprintf("%s-%d", name, time.Now().UnixNano()), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("start the fault proxy in front of %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	return &faultProxy{t: t, p: p}
}

// addr is the proxy's listening host:port.
func (f *faultProxy) addr() string { return f.p.Listen }

// add turns a toxic on: typ is a toxiproxy toxic type, stream "upstream"
// (what the client sends) or "downstream" (what it receives), toxicity the
// share of connections it touches, attrs the toxic's attributes as JSON.
func (f *faultProxy) add(name, typ, stream string, toxicity float64, attrs string) {
	f.t.Helper()
	body := fmt.Sprintf(`{"name": %q, "type": %q, "stream": %q, "toxicity": %g, "attributes": %s}`, name, typ, stream, toxicity, attrs)
	if _, err := f.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		f.t.Fatalf("add toxic %s: %v", body, err)
	}
}

// clear turns every toxic off.
func (f *faultProxy) clear() {
	f.p.Toxics.ResetToxics(context.Background())
}

// proxiedFlags returns store flags with the host of endpoint (an http://
// URL) replaced by the proxy's address in every flag that names it.
func proxiedFlags(t *testing.T, flags []string, endpoint string, proxy *faultProxy) []string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = strings.ReplaceAll(f, u.Host, proxy.addr())
	}
	return out
}

// scratchPostgres is a PostgreSQL server of a test's own
// (deploy/dev/scratch-postgres.sh), for a test that restarts it.
type scratchPostgres struct {
	t    *testing.T
	dir  string
	port string
}

// startScratchPostgres starts a scratch server; it stops and its folder
// goes when the test ends.
func startScratchPostgres(t *testing.T) *scratchPostgres {
	t.Helper()
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/initdb"); err != nil && os.Getenv("SLUICE_PG_BIN") == "" {
		testenv.Missing(t, "PostgreSQL 15's binaries are not installed")
	}
	// Under /tmp itself: as root the server runs as postgres, which must
	// reach the folder (t.TempDir's parents are closed to it).
	dir, err := os.MkdirTemp("", "sluice-scratch-pg-")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(freePort(), ":")
	s := &scratchPostgres{t: t, dir: dir, port: port}
	s.run("start", s.dir, s.port)
	t.Cleanup(func() {
		if out, err := exec.Command("bash", s.script(), "stop", s.dir, "immediate").CombinedOutput(); err != nil {
			t.Logf("stop the scratch PostgreSQL: %v\n%s", err, out)
		}
		_ = os.RemoveAll(s.dir)
	})
	return s
}

func (s *scratchPostgres) script() string {
	return filepath.Join("..", "deploy", "dev", "scratch-postgres.sh")
}

func (s *scratchPostgres) run(args ...string) {
	s.t.Helper()
	if out, err := exec.Command("bash", append([]string{s.script()}, args...)...).CombinedOutput(); err != nil {
		s.t.Fatalf("scratch-postgres.sh %v: %v\n%s", args, err, out)
	}
}

// restart stops the server (immediate: as a crash would) and starts it again.
func (s *scratchPostgres) restart(immediate bool) {
	s.t.Helper()
	mode := "fast"
	if immediate {
		mode = "immediate"
	}
	s.run("stop", s.dir, mode)
	s.run("start", s.dir, s.port)
}

// dsn is the postgres:// URL of database db on the server.
func (s *scratchPostgres) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/%s?sslmode=disable", s.port, db)
}

// createDB creates database db on the server and returns its URL.
func (s *scratchPostgres) createDB(db string) string {
	s.t.Helper()
	var ignored int
	if err := pgQueryRow(s.dsn("postgres"), `SELECT 1 FROM (SELECT 1) x`, &ignored); err != nil {
		s.t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		s.t.Fatal(err)
	}
	return s.dsn(db)
}

// crash kills the scratch MariaDB with SIGKILL and starts it again (crash
// recovery) with the options it was started with, as a server that died
// would come back.
func (s *scratchMariaDB) crash() {
	s.t.Helper()
	if b, err := os.ReadFile(filepath.Join(s.dir, "mariadbd.pid")); err == nil {
		if out, err := exec.Command("kill", "-9", strings.TrimSpace(string(b))).CombinedOutput(); err != nil {
			s.t.Logf("kill the scratch MariaDB: %v %s", err, out)
		}
		for i := 0; i < 100 && exec.Command("kill", "-0", strings.TrimSpace(string(b))).Run() == nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
	s.restart(s.options...)
}

// resilientLoad is a live workload that outlives its server's restarts:
// single- and multi-row transactions of inserts, updates (also of the key)
// and deletes on a keyed table and inserts and deletes on a keyless one. A
// transaction that fails (the server went away) is retried on a new
// connection once the server answers again; one whose commit may have
// landed before the failure is never retried, so the source holds whatever
// it holds and the comparison is with that.
type resilientLoad struct {
	driver string // "postgres" or "mariadb"
	dsn    string
	steps  int
	pause  time.Duration

	stepCounter
}

// resilientSchema creates the workload's tables (both engines' SQL).
const resilientSchema = `CREATE TABLE items (id bigint PRIMARY KEY, v varchar(64), n int);
CREATE TABLE notes (k varchar(32), body varchar(200));
INSERT INTO items (id, v, n) VALUES (1, 'seed', 0), (2, 'seed', 0), (3, 'seed', 0);`

func (w *resilientLoad) run(ctx context.Context, t *testing.T) error {
	exec, closeAll := w.session(t)
	defer closeAll()
	rng := rand.New(rand.NewSource(7))
	next := int64(100)
	pick := func() int64 { return 100 + rng.Int63n(max(next-100, 1)) }
	for step := 0; step < w.steps; step++ {
		var stmts []string
		for i, n := 0, 1+rng.Intn(4); i < n; i++ {
			switch rng.Intn(6) {
			case 0, 1:
				stmts = append(stmts, fmt.Sprintf(`INSERT INTO items (id, v, n) VALUES (%d, 'i%d', %d)`, next, step, rng.Intn(100)))
				next++
			case 2:
				stmts = append(stmts, fmt.Sprintf(`UPDATE items SET n = n + 1, v = 'u%d' WHERE id = %d`, step, pick()))
			case 3:
				stmts = append(stmts, fmt.Sprintf(`DELETE FROM items WHERE id = %d`, pick()))
			case 4:
				stmts = append(stmts, fmt.Sprintf(`INSERT INTO notes VALUES ('k%d', 'step %d'), ('dup', 'same')`, step%7, step))
			case 5:
				stmts = append(stmts, fmt.Sprintf(`UPDATE items SET id = id + 1000000 WHERE id = %d`, pick()))
			}
		}
		for attempt := 0; ; attempt++ {
			err := exec(ctx, stmts)
			if err == nil || ctx.Err() != nil || errors.Is(err, errCommitUnknown) {
				// A transaction that failed once sent may have landed: it
				// is not run twice (the target is compared with what the
				// source holds either way).
				break
			}
			if attempt > 600 {
				return fmt.Errorf("workload step %d: %w", step, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := w.finished(ctx, step, w.pause); err != nil {
			return err
		}
	}
	return nil
}

// errCommitUnknown marks a transaction that failed after it was sent: it
// may have committed.
var errCommitUnknown = errors.New("transaction outcome unknown")

// session returns a function running statements in one transaction on a
// connection it opens (again after a failure), and the closer of it.
func (w *resilientLoad) session(t *testing.T) (exec func(context.Context, []string) error, closeAll func()) {
	if w.driver == "postgres" {
		var conn *pgx.Conn
		return func(ctx context.Context, stmts []string) error {
				if conn == nil {
					c, err := pgx.Connect(ctx, w.dsn)
					if err != nil {
						return err
					}
					conn = c
				}
				if _, err := conn.Exec(ctx, "BEGIN; "+strings.Join(stmts, "; ")+"; COMMIT"); err != nil {
					conn.Close(context.Background())
					conn = nil
					return fmt.Errorf("%w: %v", errCommitUnknown, err)
				}
				return nil
			}, func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}
	}
	db := testenv.MySQLAt(t, w.dsn)
	db.SetMaxOpenConns(1)
	return func(ctx context.Context, stmts []string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("%w: %v", errCommitUnknown, err)
		}
		return nil
	}, func() {}
}

// runLoad runs a workload in the background and, once it finished, keeps
// committing small transactions (touch, every 200 ms) until ctx ends, so
// faults injected after the workload still meet writes. The returned
// channel gives the workload's error (nil when only ctx ended it).
func runLoad(ctx context.Context, t *testing.T, wl interface {
	run(context.Context, *testing.T) error
}, touch func(n int) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		err := wl.run(ctx, t)
		if err != nil || touch == nil {
			if ctx.Err() != nil {
				err = nil
			}
			done <- err
			return
		}
		for n := 1_000_000; ctx.Err() == nil; n++ {
			_ = touch(n) // a touch the server refused (restarting) is simply not made
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
		done <- nil
	}()
	return done
}

// pgTouch returns a touch of a workloadSchema source: an insert into moves.
func pgTouch(dsn string) func(n int) error {
	return func(n int) error {
		return pgExec(dsn, fmt.Sprintf(`INSERT INTO moves VALUES (%d, 'touch')`, 5_000_000+n))
	}
}
