package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/workflows"
)

// waitPhase waits until a run's status query answers with phase want.
func waitPhase(t *testing.T, id, want string, within time.Duration) {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	deadline := time.Now().Add(within)
	var last struct {
		Phase string `json:"phase"`
	}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := cl.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		cancel()
		if err == nil && res.Get(&last) == nil && last.Phase == want {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s did not reach phase %q within %s (last %q)", id, want, within, last.Phase)
}

// chainLinks counts the chain's links.
func chainLinks(t *testing.T, chainURL string) int {
	t.Helper()
	_, cat := openChainAt(t, chainURL)
	return len(cat.Links())
}

// TestPauseResumeTuneThroughCLI pauses and resumes a broker and a producer
// through the CLI while the source changes, and tunes the broker: a paused
// broker stays at its position while the chain grows and reads idle;
// resumed, it catches up exactly once (the target equals the source). A
// tune to 4 lanes and a 200ms poll shows in its status; a tune out of
// bounds is refused by the CLI, and one the run cannot take (a poll
// interval the health thresholds do not allow) is ignored by the run and
// reported with exit 2. A paused producer commits no link while rows are
// written, says what it costs the source, and resumed captures them.
//
// With SLUICE_RECORD_HISTORIES=DIR it writes both workflows' histories
// there, for workflows/testdata/histories.
func TestPauseResumeTuneThroughCLI(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, workloadSchema)
	dst := testenv.CreateDB(t, "dst")
	chainURL := fileChain(t)
	w := ownWorker(t, "control")
	q := w.args
	stream := fmt.Sprintf("control-%d", time.Now().UnixNano()%1e6)
	brokerWF, producerWF := "broker/"+stream, "producer/"+chainURL

	mustSluice(t, q("backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")...)
	mustSluice(t, q("backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL,
		"--rollover-window", "1s", "--idle-window", "2s", "--detach")...)
	mustSluice(t, q("sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--apply-concurrency", "1", "--poll-interval", "500ms", "--reset-target-data", "--yes", "--detach")...)
	waitBrokerAtTip(t, stream, chainURL, nil, 2*time.Minute)

	// The broker is paused while a workload runs.
	wl := &workload{db: src, steps: 200, bigTx: 20_000, pause: 15 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- wl.run(context.Background(), t) }()
	time.Sleep(time.Second)
	r := mustSluice(t, q("sync", "from-backup", "pause", "--stream-id", stream, "--reason", "target maintenance")...)
	if !strings.Contains(r.stdout, "pause sent") {
		t.Errorf("pause says what it did:\n%s", r)
	}
	waitPhase(t, brokerWF, "paused", time.Minute)
	cl := temporalClient(t)
	defer cl.Close()
	at, err := brokerStatus(t, cl, stream)
	if err != nil {
		t.Fatal(err)
	}
	if at.Paused == nil || at.Paused.Reason != "target maintenance" || at.Paused.Since.IsZero() {
		t.Fatalf("the status shows the pause, since when and why: %+v", at.Paused)
	}
	waits := activityCount(t, brokerWF, "WaitForLinks")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, src, 3*time.Minute)
	if tip := lastIncremental(t, chainURL, nil); tip == at.LastApplied {
		t.Fatalf("the chain did not grow past the paused broker's position %s", at.LastApplied)
	}
	still, err := brokerStatus(t, cl, stream)
	if err != nil {
		t.Fatal(err)
	}
	if still.LastApplied != at.LastApplied || still.Phase != "paused" || still.ChangesApplied != at.ChangesApplied {
		t.Fatalf("a paused broker advanced: from %s (%d changes) to %s (%d changes), phase %s",
			at.LastApplied, at.ChangesApplied, still.LastApplied, still.ChangesApplied, still.Phase)
	}
	if n := activityCount(t, brokerWF, "WaitForLinks"); n != waits {
		t.Fatalf("a paused broker scheduled %d more waits", n-waits)
	}
	st := mustSluice(t, q("sync", "from-backup", "status", "--stream-id", stream)...)
	for _, want := range []string{"phase:", "paused", "paused.reason:", "target maintenance", "verdict:", " idle"} {
		if !strings.Contains(st.stdout, want) {
			t.Fatalf("the status of a paused broker shows %q:\n%s", want, st)
		}
	}

	// Tunes: out of bounds (refused by the CLI, as run refuses them),
	// against the run's thresholds (ignored by the run), then a good one.
	for _, bad := range [][]string{{"--apply-concurrency", "65"}, {"--poll-interval", "50ms"}, {"--apply-concurrency", "0"}} {
		r := sluice(t, q(append([]string{"sync", "from-backup", "tune", "--stream-id", stream}, bad...)...)...)
		if r.exit != 2 || !strings.Contains(r.stderr, "SLUICE-E-USAGE") {
			t.Fatalf("tune %v: want exit 2 with SLUICE-E-USAGE:\n%s", bad, r)
		}
	}
	r = sluice(t, q("sync", "from-backup", "tune", "--stream-id", stream, "--poll-interval", "1h")...)
	if r.exit != 2 || !strings.Contains(r.stderr, "ignored the tune") || !strings.Contains(r.stderr, "poll-stall") {
		t.Fatalf("a tune the run's thresholds do not allow is ignored and reported:\n%s", r)
	}
	r = mustSluice(t, q("sync", "from-backup", "tune", "--stream-id", stream, "--apply-concurrency", "4", "--poll-interval", "200ms")...)
	if !strings.Contains(r.stdout, "apply concurrency 4") || !strings.Contains(r.stdout, "poll interval 200ms") {
		t.Fatalf("tune reports the values in force:\n%s", r)
	}
	st = mustSluice(t, q("sync", "from-backup", "status", "--stream-id", stream)...)
	for _, want := range []string{`(?m)^apply_concurrency:\s+4$`, `(?m)^poll_interval:\s+200ms$`} {
		if !regexp.MustCompile(want).MatchString(st.stdout) {
			t.Fatalf("the status shows the tuned values (%s):\n%s", want, st)
		}
	}

	// Resumed, the broker catches up exactly once.
	mustSluice(t, q("sync", "from-backup", "resume", "--stream-id", stream)...)
	waitBrokerAtTip(t, stream, chainURL, nil, 3*time.Minute)
	requireSameRows(t, src, dst)
	if after, err := brokerStatus(t, cl, stream); err != nil || after.Paused != nil || after.ApplyConcurrency != 4 {
		t.Fatalf("resumed with the tuned lanes: %+v (%v)", after, err)
	}

	// The producer: paused, it commits nothing while rows are written.
	r = mustSluice(t, q("backup", "stream", "pause", "--target", chainURL, "--reason", "source upgrade")...)
	if !strings.Contains(r.stdout, "retains WAL") {
		t.Errorf("pausing a producer says what it costs the source:\n%s", r)
	}
	waitPhase(t, producerWF, "paused", time.Minute)
	links, windows := chainLinks(t, chainURL), activityCount(t, producerWF, "CaptureWindow")
	testenv.Exec(t, src, `INSERT INTO moves SELECT i, 'paused ' || i FROM generate_series(900000, 900199) i`)
	time.Sleep(4 * time.Second) // four rollover windows, two idle ones
	if n := chainLinks(t, chainURL); n != links {
		t.Fatalf("a paused producer committed %d links", n-links)
	}
	if n := activityCount(t, producerWF, "CaptureWindow"); n != windows {
		t.Fatalf("a paused producer opened %d windows", n-windows)
	}
	pst := mustSluice(t, q("backup", "stream", "status", "--target", chainURL)...)
	for _, want := range []string{"paused", "source upgrade", "retains WAL", " idle"} {
		if !strings.Contains(pst.stdout, want) {
			t.Fatalf("the status of a paused producer shows %q:\n%s", want, pst)
		}
	}
	mustSluice(t, q("backup", "stream", "resume", "--target", chainURL)...)
	waitCaughtUp(t, src, 2*time.Minute)
	if n := chainLinks(t, chainURL); n <= links {
		t.Fatalf("the resumed producer committed nothing")
	}
	waitBrokerAtTip(t, stream, chainURL, nil, 2*time.Minute)
	requireSameRows(t, src, dst)

	// A stop while paused ends the run.
	mustSluice(t, q("sync", "from-backup", "pause", "--stream-id", stream)...)
	waitPhase(t, brokerWF, "paused", time.Minute)
	stopBroker(t, chainURL, stream)
	mustSluice(t, q("backup", "stream", "stop", "--target", chainURL)...)
	waitWorkflowEnd(t, producerWF, time.Minute)

	if dir := os.Getenv("SLUICE_RECORD_HISTORIES"); dir != "" {
		recordHistory(t, brokerWF, filepath.Join(dir, "broker-pause-tune-resume"))
		recordHistory(t, producerWF, filepath.Join(dir, "producer-pause-resume"))
	}
}

// recordHistory writes workflow id's latest run's history to base.json in
// the form `temporal workflow show -o json` writes, and its ID and run ID
// to base.id.
func recordHistory(t *testing.T, id, base string) {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	runID := runIDOf(t, id)
	it := cl.GetWorkflowHistory(context.Background(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".json", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".id", []byte(id+"\n"+runID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
