package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
)

// FullBackupInput starts a FullBackupWorkflow.
type FullBackupInput = activities.FullBackupParams

// FullBackupStatus is what the status query of a full backup returns.
type FullBackupStatus struct {
	Phase  string                       `json:"phase"`
	Result *activities.FullBackupResult `json:"result,omitempty"`
	Error  string                       `json:"error,omitempty"`
}

// FullBackupWorkflow takes a full backup of a source into a new chain. The
// snapshot lives only as long as one activity, so the whole copy is one
// heartbeating activity; a retry starts a fresh snapshot.
func FullBackupWorkflow(ctx workflow.Context, in FullBackupInput) (activities.FullBackupResult, error) {
	st := FullBackupStatus{Phase: "copying"}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (FullBackupStatus, error) { return st, nil }); err != nil {
		return activities.FullBackupResult{}, err
	}
	var res activities.FullBackupResult
	err := workflow.ExecuteActivity(longActivity(ctx, "snapshot and copy every table", 3), a.FullBackup, in).Get(ctx, &res)
	if err != nil {
		st.Phase, st.Error = "failed", err.Error()
		return res, err
	}
	st.Phase, st.Result = "done", &res
	return res, nil
}
