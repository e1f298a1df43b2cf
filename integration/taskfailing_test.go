package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The worker's test-only hook (worker/testhook.go) and the start of the
// message its panics carry.
const (
	panicWorkflowsEnv = "SLUICE_TEST_PANIC_WORKFLOWS"
	panicMessage      = "sluice test hook: deliberate workflow panic"
)

// A broker whose workflow code panics on every workflow task — as after a
// bad deploy — is running, not "not running", and the operator is told why
// it is stuck: `status`, the worker's /status and /metrics say stalled
// (workflow_task_failing) with the panic's message, and the worker logs the
// stall once. The hook touches only the workflow it names: a full backup on
// the same worker completes. Once a worker without the hook takes the task,
// the run continues where it waited (the SDK's default panic policy) and the
// cause clears.
func TestWorkflowTaskFailingIsReported(t *testing.T) {
	stream := fmt.Sprintf("taskfail-%d", time.Now().UnixNano()%1e6)
	w := ownWorker(t, stream, panicWorkflowsEnv+"=broker/"+stream)
	src := testenv.CreateDB(t, "src")
	dst := testenv.CreateDB(t, "dst")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT i, 'v' FROM generate_series(1, 50) i`)
	chainURL := fileChain(t)
	mustSluice(t, w.args("backup", "full", "--source", testenv.DSN(src), "--target", chainURL)...)
	mustSluice(t, w.args(append([]string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--reset-target-data", "--yes", "--detach"}, brokerHealthFlags...)...)...)
	t.Cleanup(func() { _ = terminate("broker/" + stream) })

	// status, in JSON and as text.
	type verdict struct {
		Verdict         string `json:"verdict"`
		Cause           string `json:"cause"`
		StallError      string `json:"stall_error"`
		QueryUnanswered string `json:"status_query_unanswered"`
	}
	var st verdict
	var last string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		r := sluice(t, w.args("sync", "from-backup", "status", "--stream-id", stream, "--json")...)
		last = r.String()
		if r.exit == 0 {
			st = verdict{}
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
				t.Fatalf("status --json is not JSON: %v\n%s", err, r)
			}
			if st.Cause == "workflow_task_failing" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("status did not report the failing workflow task within a minute; last:\n%s", last)
		}
	}
	if st.Verdict != "stalled" || !strings.Contains(st.StallError, panicMessage) || !strings.Contains(st.StallError, "broker/"+stream) {
		t.Fatalf("want stalled with the panic's message as stall_error, got %+v", st)
	}
	if !strings.Contains(st.QueryUnanswered, "workflow task failing") || strings.Contains(st.QueryUnanswered, "no worker answered") {
		t.Fatalf("the unanswered query is explained by the failing task, got %q", st.QueryUnanswered)
	}
	text := mustSluice(t, w.args("sync", "from-backup", "status", "--stream-id", stream)...).stdout
	for _, want := range []string{"stalled", "workflow_task_failing", panicMessage} {
		if !strings.Contains(text, want) {
			t.Fatalf("status lacks %q:\n%s", want, text)
		}
	}

	// The worker's /status and /metrics: its watch of the task queue finds
	// the run, though this worker never ran one of its activities.
	type runStatus struct {
		Role      string `json:"role"`
		Name      string `json:"name"`
		Verdict   string `json:"verdict"`
		Cause     string `json:"cause"`
		LastError string `json:"last_error"`
	}
	// workerRun reads the broker's entry in the worker's /status.
	workerRun := func() (runStatus, string) {
		body, err := getBody("http://" + w.admin + "/status")
		var all struct {
			Runs []runStatus `json:"runs"`
		}
		if err == nil && json.Unmarshal([]byte(body), &all) == nil {
			for _, r := range all.Runs {
				if r.Role == "broker" && r.Name == stream {
					return r, body
				}
			}
		}
		return runStatus{}, fmt.Sprint(body, err)
	}
	var run runStatus
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if run, last = workerRun(); run.Cause == "workflow_task_failing" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's /status did not report the failing workflow task; last:\n%s", last)
		}
	}
	if run.Verdict != "stalled" || !strings.Contains(run.LastError, panicMessage) {
		t.Fatalf("/status: want stalled with the panic's message, got %+v", run)
	}
	body, err := getBody("http://" + w.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v, c, raw := parseVerdict(body, "broker", stream); v != "stalled" || c != "workflow_task_failing" {
		t.Fatalf("/metrics: want the stalled series with cause workflow_task_failing, got %s/%s:\n%s", v, c, raw)
	}

	// One WARN, however many watch rounds and attempts go by.
	time.Sleep(20 * time.Second)
	warns := 0
	for _, line := range strings.Split(w.log.String(), "\n") {
		if strings.Contains(line, "run health degraded to stalled") && strings.Contains(line, "name="+stream) {
			warns++
			if !strings.Contains(line, "cause=workflow_task_failing") || !strings.Contains(line, panicMessage) {
				t.Fatalf("the WARN names the cause and the panic: %s", line)
			}
		}
	}
	if warns != 1 {
		t.Fatalf("want exactly one WARN for the stall, got %d:\n%s", warns, tail(w.log.String(), 8000))
	}

	// A fixed worker (the hook unset): the run resumes where it waited and
	// restores the chain into the target; the cause is gone.
	w.stop()
	w.env = nil
	w.restart()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		r := sluice(t, w.args("sync", "from-backup", "status", "--stream-id", stream, "--json")...)
		last = r.String()
		st = verdict{}
		if r.exit == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && (st.Verdict == "idle" || st.Verdict == "healthy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker did not resume under a worker without the hook; last:\n%s", last)
		}
	}
	if st.QueryUnanswered != "" || st.Cause != "" {
		t.Fatalf("once the task works the query is answered and nothing stalls, got %+v", st)
	}
	// The new worker's watch may have seen the task still failing (the old
	// worker's last attempt had to time out first); once the run resumes
	// its watch clears the cause.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		if run, last = workerRun(); run.Verdict != "" && run.Cause != "workflow_task_failing" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new worker's /status still has the broker's task failing (or not the broker); last:\n%s", last)
		}
	}
	var n int
	if err := queryInt(t, dst, `SELECT count(*) FROM t`, &n); err != nil || n != 50 {
		t.Fatalf("the resumed broker restored the chain: want 50 rows, got %d (%v)", n, err)
	}
}
