package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplayRecordedHistories replays histories recorded from real runs
// (testdata/histories, written with `temporal workflow show -o json`) against
// the current workflow code. A failure means a change is not deterministic
// for runs already in flight: guard it with workflow.GetVersion. A history
// whose workflow derives IDs (child workflows) from its own ID has a sidecar
// <name>.id holding the original workflow ID and run ID.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/histories/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories found: %v", err)
	}
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflow(FullBackupWorkflow)
	replayer.RegisterWorkflow(RestoreWorkflow)
	replayer.RegisterWorkflow(ProducerWorkflow)
	replayer.RegisterWorkflow(RotateWorkflow)
	replayer.RegisterWorkflow(IncrementalWorkflow)
	replayer.RegisterWorkflow(BrokerWorkflow)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			hist, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatalf("read %s: %v", f, err)
			}
			var opts worker.ReplayWorkflowHistoryOptions
			if b, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".id"); err == nil {
				lines := strings.Fields(string(b))
				if len(lines) == 2 {
					opts.OriginalExecution = workflow.Execution{ID: lines[0], RunID: lines[1]}
				}
			}
			if err := replayer.ReplayWorkflowHistoryWithOptions(nil, hist, opts); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
