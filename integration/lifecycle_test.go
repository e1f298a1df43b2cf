package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sluicehq/sluice/internal/testenv"
)

func TestDetachReturnsOnceStarted(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a SELECT generate_series(1, 1000);`)
	chainURL := fileChain(t)
	r := mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--detach")
	fields := strings.Fields(r.stdout)
	if len(fields) != 2 || fields[0] != "backup-full/"+chainURL {
		t.Fatalf("--detach should print the workflow and run IDs, got %q", r.stdout)
	}
	cl := temporalClient(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.GetWorkflow(ctx, fields[0], fields[1]).Get(ctx, nil); err != nil {
		t.Fatalf("detached backup failed: %v", err)
	}
}

func TestInterruptCancelsTheRun(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	// UNLOGGED: the 400 MB that make the copy take seconds write no WAL,
	// which every streaming slot of the shared cluster would decode.
	testenv.Exec(t, src, `CREATE UNLOGGED TABLE wide (id bigint PRIMARY KEY, payload text);
		INSERT INTO wide SELECT i, repeat(md5(i::text), 8) FROM generate_series(1, 1500000) i;`)
	dir := filepath.Join(t.TempDir(), "chain")

	cmd := exec.Command(filepath.Join(h.bin, "sluice"), "backup", "full", "--source", testenv.DSN(src), "--target", "file://"+dir)
	cmd.Env = h.env()
	var stdout bytes.Buffer
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var errText strings.Builder
	sc := bufio.NewScanner(stderr)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		errText.WriteString(line + "\n")
		// Interrupt half a second into the copy (it takes several seconds).
		if !signalled && strings.Contains(line, "started workflow") {
			time.AfterFunc(500*time.Millisecond, func() { _ = cmd.Process.Signal(syscall.SIGINT) })
			signalled = true
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !signalled || !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("want exit 1 after Ctrl+C (signalled=%t), got %v\n%s", signalled, err, errText.String())
	}
	if !strings.Contains(errText.String(), "SLUICE-E-CANCELED") {
		t.Fatalf("stderr lacks SLUICE-E-CANCELED:\n%s", errText.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "catalog")); err == nil {
		if entries, _ := os.ReadDir(filepath.Join(dir, "catalog")); len(entries) > 0 {
			t.Fatalf("a cancelled backup committed a catalog")
		}
	}
	// The same command runs again to completion.
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", "file://"+dir)
}

// waitWorkflowEnd waits for the latest run of a workflow to close.
func waitWorkflowEnd(t *testing.T, id string, within time.Duration) {
	t.Helper()
	waitWorkflowEndIn(t, h.namespace, id, within)
}

// runIDOf returns the run ID of workflow id's latest run ("" if none).
func runIDOf(t *testing.T, id string) string {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	d, err := cl.DescribeWorkflow(context.Background(), id, "")
	if err != nil || d.RawResponse == nil {
		return ""
	}
	return d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// waitNewRun waits until workflow id runs again, in a run other than prev.
func waitNewRun(t *testing.T, id, prev string, within time.Duration) {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		d, err := cl.DescribeWorkflow(context.Background(), id, "")
		if err != nil || d.RawResponse == nil {
			continue
		}
		info := d.RawResponse.GetWorkflowExecutionInfo()
		if info.GetExecution().GetRunId() != prev && info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return
		}
	}
	t.Fatalf("workflow %s did not start a new run within %s", id, within)
}
