package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestStatusOfAnEndedRun: a broker refused at its start (the target holds
// no position) has ended; `status` then says how and when it ended, its
// code, message and hint — as text and with --json — and still exits with
// SLUICE-E-NOT-RUNNING's status, naming how and when in the error.
func TestStatusOfAnEndedRun(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 10);`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL)
	dst := testenv.CreateDB(t, "dst")
	stream := fmt.Sprintf("ended-%d", time.Now().UnixNano()%1e6)
	r := mustSluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--poll-interval", "300ms", "--detach")
	fields := strings.Fields(r.stdout)
	if len(fields) != 2 {
		t.Fatalf("--detach should print the workflow and run IDs, got %q", r.stdout)
	}
	cl := temporalClient(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.GetWorkflow(ctx, fields[0], fields[1]).Get(ctx, nil); err == nil || !strings.Contains(err.Error(), "SLUICE-E-BROKER-NO-POSITION") {
		t.Fatalf("the broker should have been refused with SLUICE-E-BROKER-NO-POSITION, got %v", err)
	}
	spec, _ := errcode.Lookup(errcode.BrokerNoPosition)
	notRunning, _ := errcode.Lookup(errcode.NotRunning)

	r = sluice(t, "sync", "from-backup", "status", "--stream-id", stream)
	if r.exit != notRunning.Exit {
		t.Fatalf("status of an ended run: exit %d, want %d (SLUICE-E-NOT-RUNNING)\n%s", r.exit, notRunning.Exit, r)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		k, v, _ := strings.Cut(l, ":")
		lines[k] = strings.TrimSpace(v)
	}
	for k, want := range map[string]string{
		"ended":      "failed",
		"error_code": "SLUICE-E-BROKER-NO-POSITION",
		"hint":       spec.Hint,
		"workflow":   "broker/" + stream,
		"run_id":     fields[1],
	} {
		if lines[k] != want {
			t.Errorf("status %s: %q, want %q\n%s", k, lines[k], want, r)
		}
	}
	if !strings.Contains(lines["error"], "the target holds no position for stream") {
		t.Errorf("status error: %q\n%s", lines["error"], r)
	}
	endedAt, err := time.Parse(time.RFC3339, lines["ended_at"])
	if err != nil || time.Since(endedAt) > 5*time.Minute || endedAt.Location() != time.UTC {
		t.Errorf("status ended_at %q is not a recent RFC 3339 UTC time (%v)\n%s", lines["ended_at"], err, r)
	}
	if want := "SLUICE-E-NOT-RUNNING: workflow broker/" + stream + " is not running: its last run failed at " + lines["ended_at"] + " with SLUICE-E-BROKER-NO-POSITION"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q\n%s", want, r)
	}

	r = sluice(t, "sync", "from-backup", "status", "--stream-id", stream, "--json")
	if r.exit != notRunning.Exit {
		t.Fatalf("status --json of an ended run: exit %d\n%s", r.exit, r)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, r)
	}
	if v["ended"] != "failed" || v["error_code"] != "SLUICE-E-BROKER-NO-POSITION" || v["hint"] != spec.Hint || v["ended_at"] == nil {
		t.Errorf("status --json: %v", v)
	}
}
