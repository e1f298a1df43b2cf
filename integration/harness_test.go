// Package integration runs sluice end to end: the real sluice and
// sluice-worker binaries, a real Temporal dev server, real PostgreSQL and a
// real S3-compatible server, all started by deploy/dev/services.sh.
package integration

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/seal"
	"github.com/sluicehq/sluice/internal/testenv"
	"go.temporal.io/sdk/client"
)

// sourcePasswordEnv is the variable the worker reads the password-auth test
// role's password from; the starter only ever sees its name.
const (
	sourcePasswordEnv = "SLUICE_IT_SOURCE_PW"
	sourcePassword    = "It-S3cret-only-in-the-worker-7d1c"
)

var h harness

// harness holds the binaries and the worker process shared by the tests.
type harness struct {
	bin       string
	taskQueue string
	temporal  string
	// namespace is the Temporal namespace of the run (TEMPORAL_NAMESPACE,
	// which make test sets to sluice-test; default otherwise). Workers and
	// the CLI read the same variable.
	namespace string
	workerLog *lockedBuffer
	worker    *workerProc
}

// workerProc is one sluice-worker process.
type workerProc struct {
	cmd   *exec.Cmd
	log   *lockedBuffer
	admin string // host:port of its admin endpoint
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("integration: skipped in -short mode")
		return 0
	}
	h.temporal = os.Getenv("TEMPORAL_ADDRESS")
	if h.temporal == "" {
		h.temporal = "127.0.0.1:7233"
	}
	if h.namespace = os.Getenv("TEMPORAL_NAMESPACE"); h.namespace == "" {
		h.namespace = "default"
	}
	if c, err := net.DialTimeout("tcp", h.temporal, 2*time.Second); err != nil {
		msg := fmt.Sprintf("integration: Temporal is not reachable at %s; start the services with `make services`", h.temporal)
		if testenv.Required() {
			fmt.Println(msg)
			return 1
		}
		fmt.Println(msg + " (skipping; SLUICE_REQUIRE_SERVICES=1 fails instead)")
		return 0
	} else {
		c.Close()
	}
	testenv.SetS3Credentials()

	// SLUICE_IT_BIN names a folder holding sluice and sluice-worker built
	// from this tree (deploy/dev/test.sh builds them once for all its
	// shards); without it, this process builds its own.
	if h.bin = os.Getenv("SLUICE_IT_BIN"); h.bin == "" {
		dir, err := os.MkdirTemp("", "sluice-it-bin-")
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer os.RemoveAll(dir)
		h.bin = dir
		for pkg, name := range map[string]string{"../starter": "sluice", "../worker": "sluice-worker"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
			if err != nil {
				fmt.Printf("integration: build %s: %v\n%s", pkg, err, out)
				return 1
			}
		}
	}
	h.taskQueue = fmt.Sprintf("sluice-it-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	if err := h.startWorker(); err != nil {
		fmt.Println("integration:", err)
		return 1
	}
	code := m.Run()
	h.stopWorker()
	if code != 0 {
		fmt.Printf("--- worker log (last 4 KiB) ---\n%s\n", tail(h.workerLog.String(), 4096))
	}
	return code
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (hh *harness) env() []string {
	return append(os.Environ(),
		"TEMPORAL_ADDRESS="+hh.temporal,
		"SLUICE_TASK_QUEUE="+hh.taskQueue,
	)
}

func (hh *harness) startWorker() error {
	w, err := startWorkerProc(hh.taskQueue, &lockedBuffer{})
	if err != nil {
		return err
	}
	hh.worker, hh.workerLog = w, w.log
	return nil
}

// startWorkerProc starts a worker polling taskQueue, logging into log, and
// waits until it is ready.
func startWorkerProc(taskQueue string, log *lockedBuffer, extraEnv ...string) (*workerProc, error) {
	return startWorkerWithEnv(taskQueue, log, append(append(append(h.env(), sourcePasswordEnv+"="+sourcePassword), passphraseEnv()...), extraEnv...))
}

// startWorkerWithEnv starts a worker on taskQueue with exactly env (later
// entries of a variable win).
func startWorkerWithEnv(taskQueue string, log *lockedBuffer, env []string) (*workerProc, error) {
	admin := freePort()
	cmd := exec.Command(filepath.Join(h.bin, "sluice-worker"), "--admin-addr", admin, "--task-queue", taskQueue)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	w := &workerProc{cmd: cmd, log: log, admin: admin}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := httpGet("http://" + admin + "/readyz"); err == nil && resp == 200 {
			return w, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.kill()
	return nil, fmt.Errorf("worker did not become ready:\n%s", log.String())
}

// kill ends the worker with SIGKILL, as a crash would.
func (w *workerProc) kill() {
	if w == nil || w.cmd.Process == nil {
		return
	}
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
}

// stop ends the worker gracefully.
func (w *workerProc) stop() {
	if w == nil || w.cmd.Process == nil {
		return
	}
	_ = w.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = w.cmd.Process.Kill()
	}
}

func (hh *harness) stopWorker() { hh.worker.stop() }

// result is how one sluice command ended.
type result struct {
	stdout, stderr string
	exit           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
}

// sluice runs the CLI and returns its output and exit status.
func sluice(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(h.bin, "sluice"), args...)
	// The chain passphrase, for the commands that run in the CLI (rekey).
	cmd.Env = append(h.env(), passphraseEnv()...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.exit = ee.ExitCode()
	default:
		t.Fatalf("run sluice %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// mustSluice runs the CLI and fails the test unless it exits 0.
func mustSluice(t *testing.T, args ...string) result {
	t.Helper()
	r := sluice(t, args...)
	if r.exit != 0 {
		t.Fatalf("sluice %s: %s", strings.Join(args, " "), r)
	}
	return r
}

func httpGet(url string) (int, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// openChainAt opens the chain at a file:// URL and loads its catalog.
// temporalClient dials the test's Temporal server; the caller closes it.
func temporalClient(t *testing.T) client.Client {
	t.Helper()
	return temporalClientIn(t, h.namespace)
}

// temporalClientIn is a client of namespace ns.
func temporalClientIn(t *testing.T, ns string) client.Client {
	t.Helper()
	cl, err := client.Dial(client.Options{HostPort: h.temporal, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// openChainAt opens the chain at url and loads its catalog; storeFlags are
// the CLI's store flags (--backup-endpoint, --backup-path-style,
// --backup-option KEY=VALUE) the chain's store needs.
func openChainAt(t *testing.T, url string, storeFlags ...string) (*chain.Chain, *chain.Catalog) {
	t.Helper()
	ch := chain.Open(openStoreAt(t, url, storeFlags...))
	// An encrypted chain of the harness opens with its passphrase.
	if ids, err := ch.ListEnvelopes(context.Background()); err == nil && len(ids) > 0 {
		w, err := seal.NewPassphrase([]byte(chainPassphrase), "test")
		if err != nil {
			t.Fatal(err)
		}
		ch = ch.WithKeyring(chain.NewKeyring(chain.Trust{Wrapper: w}))
	}
	cat, err := ch.LoadCatalog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ch, cat
}

// openStoreAt opens the backup store at url with the store flags a sluice
// command would take.
func openStoreAt(t *testing.T, url string, storeFlags ...string) blobstore.Store {
	t.Helper()
	opts := blobstore.Options{}
	for i, f := range storeFlags {
		switch f {
		case "--backup-endpoint":
			opts[blobstore.OptEndpoint] = storeFlags[i+1]
		case "--backup-path-style":
			opts[blobstore.OptPathStyle] = "true"
		case "--backup-option":
			k, v, _ := strings.Cut(storeFlags[i+1], "=")
			opts[k] = v
		}
	}
	bs, err := blobstore.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// ownedWorker is a worker on a task queue of one test's own, so the test can
// kill it, restart it and read its log and metrics without touching others.
type ownedWorker struct {
	*workerProc
	t     *testing.T
	queue string
	env   []string
	// fullEnv, when set, is the worker's whole environment (a site
	// worker's, which lacks the other site's secrets); env is then unused.
	fullEnv []string
}

// ownWorker starts a worker on a queue named after name; it stops when the
// test ends, and its log is shown if the test failed.
func ownWorker(t *testing.T, name string, extraEnv ...string) *ownedWorker {
	t.Helper()
	w := &ownedWorker{t: t, queue: fmt.Sprintf("%s-%s", h.taskQueue, name), env: extraEnv}
	p, err := startWorkerProc(w.queue, &lockedBuffer{}, extraEnv...)
	return w.owned(p, err)
}

// owned takes the started process p (or fails the test with err), and stops
// it when the test ends, showing its log if the test failed.
func (w *ownedWorker) owned(p *workerProc, err error) *ownedWorker {
	t := w.t
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	w.workerProc = p
	t.Cleanup(func() {
		w.stop()
		if t.Failed() {
			t.Logf("worker log (%s):\n%s", w.queue, tail(w.log.String(), 12000))
		}
	})
	return w
}

// restart starts a new worker process on the same queue and log (after a kill).
func (w *ownedWorker) restart() {
	w.t.Helper()
	start := func() (*workerProc, error) { return startWorkerProc(w.queue, w.log, w.env...) }
	if w.fullEnv != nil {
		start = func() (*workerProc, error) { return startWorkerWithEnv(w.queue, w.log, w.fullEnv) }
	}
	p, err := start()
	if err != nil {
		w.t.Fatal(err)
	}
	w.workerProc = p
}

// args puts --task-queue in front of a sluice command's arguments.
func (w *ownedWorker) args(args ...string) []string {
	return append([]string{"--task-queue", w.queue}, args...)
}
