package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
)

// replayRegistry lets Register fill a replayer, which runs no activities,
// and notes the name of each workflow it registers.
type replayRegistry struct {
	worker.WorkflowReplayer
	names *[]string
}

func (r replayRegistry) RegisterWorkflow(wf any) {
	*r.names = append(*r.names, name(wf))
	r.WorkflowReplayer.RegisterWorkflow(wf)
}

func (r replayRegistry) RegisterWorkflowWithOptions(wf any, opts workflow.RegisterOptions) {
	n := opts.Name
	if n == "" {
		n = name(wf)
	}
	*r.names = append(*r.names, n)
	r.WorkflowReplayer.RegisterWorkflowWithOptions(wf, opts)
}

func (replayRegistry) RegisterActivity(any)                                         {}
func (replayRegistry) RegisterActivityWithOptions(any, activity.RegisterOptions)    {}
func (replayRegistry) RegisterDynamicActivity(any, activity.DynamicRegisterOptions) {}
func (replayRegistry) RegisterNexusService(*nexus.Service)                          {}

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
	// The worker's own list, so a workflow added there is replayed too.
	var registered []string
	Register(replayRegistry{replayer, &registered}, &activities.Activities{})
	recorded := map[string]bool{}
	defer func() {
		// A registered workflow no history exercises is named, not failed.
		var missing []string
		for _, n := range registered {
			if !recorded[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			t.Logf("registered workflows with no recorded history in testdata/histories (not replayed): %s", strings.Join(missing, ", "))
		}
	}()
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
			if evs := hist.GetEvents(); len(evs) > 0 {
				if a := evs[0].GetWorkflowExecutionStartedEventAttributes(); a != nil {
					recorded[a.GetWorkflowType().GetName()] = true
				}
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
