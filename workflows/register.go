package workflows

import (
	"go.temporal.io/sdk/worker"

	"github.com/sluicehq/sluice/activities"
)

// Register adds every sluice workflow and the activities to a worker.
func Register(r worker.Registry, acts *activities.Activities) {
	r.RegisterWorkflow(FullBackupWorkflow)
	r.RegisterWorkflow(RestoreWorkflow)
	r.RegisterWorkflow(ProducerWorkflow)
	r.RegisterWorkflow(RotateWorkflow)
	r.RegisterWorkflow(IncrementalWorkflow)
	r.RegisterWorkflow(BrokerWorkflow)
	r.RegisterWorkflow(VerifyWorkflow)
	r.RegisterWorkflow(CompactWorkflow)
	r.RegisterActivity(acts)
}
