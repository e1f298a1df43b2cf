package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
)

// TestReplayRecordedHistories replays histories recorded from real runs
// (testdata/histories, written with `temporal workflow show -o json`) against
// the current workflow code. A failure means a change is not deterministic
// for runs already in flight: guard it with workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/histories/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories found: %v", err)
	}
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflow(FullBackupWorkflow)
	replayer.RegisterWorkflow(RestoreWorkflow)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
