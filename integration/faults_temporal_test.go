package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The Temporal server is killed with SIGKILL and started again on the same
// database file (deploy/dev/services.sh starts it) while a producer streams
// a live PostgreSQL workload and a broker applies it on two lanes: both
// workflows resume by themselves once the server answers, nothing is
// captured or applied twice, and the target ends equal to the source row
// by row.
//
// sluice:exclusive — it restarts the Temporal server every test shares.
func TestFaultsTemporalRestarts(t *testing.T) {
	dst := testenv.CreateDB(t, "fttemporal")
	targetFaultRun(t, "temporal", "postgres", testenv.DSN(dst), 2, 2*soakScale(), "temporal_restart", func() bool {
		restartTemporal(t)
		return true
	})
}

// restartTemporal kills the dev server services.sh started (its pid file
// in $SLUICE_STATE) with SIGKILL, waits for it to be gone, and starts it
// again through services.sh, which returns once it is healthy.
func restartTemporal(t *testing.T) {
	t.Helper()
	state := os.Getenv("SLUICE_STATE")
	if state == "" {
		state = filepath.Join(os.Getenv("HOME"), ".local", "state", "sluice")
	}
	b, err := os.ReadFile(filepath.Join(state, "temporal.pid"))
	if err != nil {
		t.Fatalf("the Temporal server's pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("the Temporal server's pid file holds %q", b)
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("kill the Temporal server (pid %d): %v", pid, err)
	}
	for i := 0; i < 100 && exec.Command("kill", "-0", strconv.Itoa(pid)).Run() == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	cmd := exec.Command("bash", filepath.Join("..", "deploy", "dev", "services.sh"))
	cmd.Env = append(os.Environ(), "SLUICE_STATE="+state)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("start the Temporal server again: %v\n%s", err, out)
	}
}
