package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/health"
)

// A run whose workflow task keeps failing shows in the sluice_run_* series
// as stalled with its cause, though nothing else ever reported on it.
func TestRunSeriesOfAFailingWorkflowTask(t *testing.T) {
	tel, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(t.Context()) })
	now := time.Now()
	tr := health.NewTracker(nil, func() time.Time { return now })
	if err := tel.TrackRuns(tr); err != nil {
		t.Fatal(err)
	}
	tr.TaskFailing(health.Key{Role: "broker", Name: "s"}, "panic")
	now = now.Add(2 * health.DefaultNotRunning)
	out := scrape(t, tel)
	for _, want := range []string{
		`sluice_run_health{name="s",role="broker",verdict="stalled"} 1`,
		`sluice_run_health{name="s",role="broker",verdict="not_running"} 0`,
		`sluice_run_stall_cause{cause="workflow_task_failing",name="s",role="broker"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}
