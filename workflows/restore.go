package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/pitr"
	"github.com/sluicehq/sluice/internal/target"
)

// RestoreInput starts a RestoreWorkflow.
type RestoreInput struct {
	Store    activities.StoreRef `json:"store"`
	Target   credentials.DSNRef  `json:"target"`
	Parallel int                 `json:"parallel,omitempty"`
	// Replace drops target tables that already hold rows instead of refusing.
	Replace bool `json:"replace,omitempty"`
	// Through names the last link to restore; the chain's tip when empty.
	Through string `json:"through,omitempty"`
	// Until and UntilPosition restore to a point: every transaction that
	// committed at or before an RFC 3339 time, or at or before a source
	// position, and nothing after. At most one is set, never with Through.
	Until         string `json:"until,omitempty"`
	UntilPosition string `json:"until_position,omitempty"`
	// Subset is the part of the chain's tables to restore (--include-table,
	// --exclude-table; zero: all of them).
	Subset target.Subset `json:"subset,omitzero"`
	// ApplyConcurrency is how many lanes apply each incremental (restore
	// --apply-concurrency; 0 or 1: one transaction per incremental).
	ApplyConcurrency int `json:"apply_concurrency,omitempty"`
	// Objects say whether the recorded schema objects (views, routines,
	// triggers, …) are run once the rows are in.
	Objects activities.ObjectsParams `json:"objects,omitzero"`
}

// RestoreResult reports a finished restore.
type RestoreResult struct {
	ChainID      string `json:"chain_id"`
	FullID       string `json:"full_id"`
	Tables       int    `json:"tables"`
	Rows         int64  `json:"rows"`
	Incrementals int    `json:"incrementals,omitempty"`
	Changes      int64  `json:"changes,omitempty"`
	Through      string `json:"through"`
	// NotCarried names what the chain does not carry and the restore did
	// not create (views, functions, triggers, …).
	NotCarried string `json:"not_carried,omitempty"`
	// Excluded names the tables of the full the subset left out.
	Excluded []string `json:"excluded,omitempty"`
	// Point is where a restore to a point stopped, as given; Last the last
	// transaction it applied (nil: none after the full) and Next the first
	// it left out (nil: none, the point is at the chain's newest).
	Point string            `json:"point,omitempty"`
	Last  *pitr.Transaction `json:"last,omitempty"`
	Next  *pitr.Transaction `json:"next,omitempty"`
	// Objects is what became of the chain's recorded schema objects (nil
	// in runs recorded before they were created).
	Objects *activities.ObjectsReport `json:"objects,omitempty"`
}

// versionRestoreObjects names the change that made a restore create the
// chain's recorded schema objects after its rows; runs recorded before it
// end after the incrementals.
const versionRestoreObjects = "restore-objects"

// versionRestoreThroughApply names the change that made a restore apply
// its incrementals under a position of its own, through the broker's
// apply, and end that position at the end (EndRestore).
const versionRestoreThroughApply = "restore-through-apply"

// RestoreStatus is what the status query of a restore returns.
type RestoreStatus struct {
	Phase       string `json:"phase"`
	FullID      string `json:"full_id,omitempty"`
	TablesTotal int    `json:"tables_total"`
	TablesDone  int    `json:"tables_done"`
	RowsTotal   int64  `json:"rows_total"`
	RowsDone    int64  `json:"rows_done"`
	// IncrementalsTotal and IncrementalsDone count the incrementals applied after the full.
	IncrementalsTotal int   `json:"incrementals_total"`
	IncrementalsDone  int   `json:"incrementals_done"`
	ChangesDone       int64 `json:"changes_done"`
}

// RestoreWorkflow restores a chain's newest full into a target: plan and
// verify, prepare the target, load tables in parallel (one activity each, so
// a retry redoes one table), then add foreign keys and sequence values.
func RestoreWorkflow(ctx workflow.Context, in RestoreInput) (RestoreResult, error) {
	st := RestoreStatus{Phase: "verifying chain"}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (RestoreStatus, error) { return st, nil }); err != nil {
		return RestoreResult{}, err
	}
	var plan activities.RestorePlan
	if err := workflow.ExecuteActivity(shortActivity(ctx, "load and verify the chain"), a.PlanRestore,
		activities.PlanRestoreParams{Store: in.Store, Through: in.Through, Until: in.Until, UntilPosition: in.UntilPosition, Subset: in.Subset}).Get(ctx, &plan); err != nil {
		return RestoreResult{}, err
	}
	st.FullID, st.TablesTotal, st.RowsTotal, st.IncrementalsTotal = plan.FullID, len(plan.Tables), plan.Rows, len(plan.Incrementals)

	target := activities.TargetParams{Store: in.Store, Target: in.Target, ChainID: plan.ChainID, FullID: plan.FullID, Replace: in.Replace, Subset: in.Subset,
		ApplyConcurrency: in.ApplyConcurrency, Incrementals: len(plan.Incrementals)}
	st.Phase = "preparing target"
	if err := workflow.ExecuteActivity(shortActivity(ctx, "check target, create types"), a.PrepareTarget, target).Get(ctx, nil); err != nil {
		return RestoreResult{}, err
	}

	st.Phase = "loading tables"
	if err := loadTables(ctx, in.Parallel, target, plan.Tables, &st); err != nil {
		return RestoreResult{}, err
	}

	st.Phase = "finishing"
	if err := workflow.ExecuteActivity(shortActivity(ctx, "foreign keys and sequences"), a.FinishTarget, target).Get(ctx, nil); err != nil {
		return RestoreResult{}, err
	}
	// Incrementals apply in chain order, as a broker applies them, under
	// the restore's own position. A restore to a point applies only the
	// first records of the last one.
	throughApply := workflow.GetVersion(ctx, versionRestoreThroughApply, workflow.DefaultVersion, 1) == 1
	after := plan.FullID
	for i, id := range plan.Incrementals {
		st.Phase = "applying incrementals"
		var changes int64
		params := activities.ApplyIncrementalParams{TargetParams: target, Incremental: id}
		if throughApply {
			params.After, after = after, id
		}
		if i == len(plan.Incrementals)-1 && plan.LastRecords > 0 {
			params.Records, params.RecordsDigest = plan.LastRecords, plan.LastDigest
		}
		if err := workflow.ExecuteActivity(longActivity(ctx, "apply incremental "+id, 5), a.ApplyIncremental,
			params).Get(ctx, &changes); err != nil {
			return RestoreResult{}, err
		}
		if params.Records > 0 && changes > 0 {
			changes = plan.LastChanges // ApplyIncremental counts the whole incremental's
		}
		st.IncrementalsDone++
		st.ChangesDone += changes
	}
	if throughApply && len(plan.Incrementals) > 0 {
		if err := workflow.ExecuteActivity(shortActivity(ctx, "end the restore's position"), a.EndRestore, target).Get(ctx, nil); err != nil {
			return RestoreResult{}, err
		}
	}
	// The views, routines, triggers, … last: after every row, so no
	// trigger fires on the restore's own writes and materialized views
	// are refreshed over the whole data.
	var objects *activities.ObjectsReport
	if workflow.GetVersion(ctx, versionRestoreObjects, workflow.DefaultVersion, 1) == 1 {
		st.Phase = "creating schema objects"
		var rep activities.ObjectsReport
		if err := workflow.ExecuteActivity(shortActivity(ctx, "views, routines, triggers, policies, comments and grants"), a.CreateObjects,
			activities.CreateObjectsParams{TargetParams: target, Through: plan.Through, Objects: in.Objects}).Get(ctx, &rep); err != nil {
			return RestoreResult{}, err
		}
		objects = &rep
	}
	st.Phase = "done"
	return RestoreResult{ChainID: plan.ChainID, FullID: plan.FullID, Tables: len(plan.Tables), Rows: st.RowsDone,
		Incrementals: len(plan.Incrementals), Changes: st.ChangesDone, Through: plan.Through, NotCarried: plan.NotCarried, Excluded: plan.Excluded,
		Point: plan.Point, Last: plan.LastTransaction, Next: plan.NextTransaction, Objects: objects}, nil
}

// loadTables runs one LoadTable activity per table, at most parallel at once.
// The first failure cancels the loads still running and is returned.
func loadTables(ctx workflow.Context, parallel int, target activities.TargetParams, tables []activities.RestoreTable, st *RestoreStatus) error {
	if parallel <= 0 {
		parallel = 2
	}
	lctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	sel := workflow.NewSelector(ctx)
	var firstErr error
	pending := 0
	for _, t := range tables {
		if firstErr != nil {
			break
		}
		if pending == parallel {
			sel.Select(ctx)
			pending--
		}
		if firstErr != nil {
			break
		}
		name := t.Name
		f := workflow.ExecuteActivity(longActivity(lctx, "load "+name, 5), a.LoadTable,
			activities.LoadTableParams{TargetParams: target, Table: name})
		pending++
		sel.AddFuture(f, func(f workflow.Future) {
			var rows int64
			if err := f.Get(ctx, &rows); err != nil {
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			st.TablesDone++
			st.RowsDone += rows
		})
	}
	for ; pending > 0; pending-- {
		sel.Select(ctx)
	}
	return firstErr
}
