package workflows

import (
	"reflect"
	"runtime"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Role is one part of sluice a worker can host: a worker registers only the
// workflows and activities of its roles, so the source's site runs the
// producer beside the source and the target's site the broker beside the
// target, each with only its own credentials.
type Role string

// The roles, in the order Roles lists them.
const (
	// RoleProducer takes fulls and keeps the chain fed: backup full,
	// backup stream, backup incremental, rotations and the retention they
	// run. It needs the source and the store.
	RoleProducer Role = "producer"
	// RoleBroker tails the chain into a target (sync from-backup),
	// including its cold start, a restore, and cuts a target over (its
	// sequences). It needs the store and the target.
	RoleBroker Role = "broker"
	// RoleRestore restores a chain into a target. It needs the store and
	// the target.
	RoleRestore Role = "restore"
	// RoleMaintenance verifies a target against its source and compacts
	// the chain. Verify needs the source, the target and the store;
	// compaction the store.
	RoleMaintenance Role = "maintenance"
)

// Roles lists every role; a worker given no roles hosts them all.
var Roles = []Role{RoleProducer, RoleBroker, RoleRestore, RoleMaintenance}

// roleUnit is what a role registers: workflows, and the activities those
// workflows schedule (by the method names of activities.Activities).
type roleUnit struct {
	workflows  []any
	activities []string
}

// units returns each role's workflows and activities. A workflow or
// activity may belong to several roles (a broker's cold start is a
// restore); it is registered once.
func units() map[Role]roleUnit {
	var a *activities.Activities
	restore := roleUnit{workflows: []any{RestoreWorkflow}, activities: []string{
		name(a.PlanRestore), name(a.PrepareTarget), name(a.LoadTable), name(a.ApplyIncremental), name(a.EndRestore), name(a.FinishTarget), name(a.CreateObjects)}}
	return map[Role]roleUnit{
		RoleProducer: {workflows: []any{FullBackupWorkflow, ProducerWorkflow, RotateWorkflow, IncrementalWorkflow}, activities: []string{
			name(a.FullBackup), name(a.CaptureWindow), name(a.RotateSegment), name(a.RequestProducerStop), name(a.PruneChain)}},
		RoleBroker: {workflows: append([]any{BrokerWorkflow, CutoverWorkflow}, restore.workflows...), activities: append([]string{
			name(a.PrepareBroker), name(a.InitBrokerPosition), name(a.WaitForLinks), name(a.CheckChainForBroker),
			name(a.PlanBrokerCut), name(a.JudgeBrokerIncremental), name(a.ApplyBrokerIncremental), name(a.RaiseCutoverSequences)}, restore.activities...)},
		RoleRestore: restore,
		RoleMaintenance: {workflows: []any{VerifyWorkflow, CompactWorkflow}, activities: []string{
			name(a.VerifyTables), name(a.WaitBrokerAtTip), name(a.CompactChain)}},
	}
}

// name is the name Temporal gives function fn: a workflow's function name,
// or an activity method's method name (as RegisterActivity of the struct
// and ExecuteActivity of a method value both name it).
func name(fn any) string {
	n := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
	n = strings.TrimSuffix(n, "-fm")
	return n[strings.LastIndex(n, ".")+1:]
}

// ParseRoles reads a comma-separated role list (--roles); empty is every
// role. Unknown or repeated roles are refused.
func ParseRoles(s string) ([]Role, error) {
	if strings.TrimSpace(s) == "" {
		return Roles, nil
	}
	seen := map[Role]bool{}
	var out []Role
	for _, part := range strings.Split(s, ",") {
		r := Role(strings.TrimSpace(part))
		known := false
		for _, k := range Roles {
			known = known || k == r
		}
		if !known {
			return nil, errcode.New(errcode.Usage, "--roles %q: unknown role %q; the roles are %s", s, r, RoleList(Roles))
		}
		if seen[r] {
			return nil, errcode.New(errcode.Usage, "--roles %q: role %q is given twice", s, r)
		}
		seen[r] = true
		out = append(out, r)
	}
	return out, nil
}

// RoleList joins roles with commas, as --roles takes them.
func RoleList(roles []Role) string {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return strings.Join(names, ",")
}

// Register adds every sluice workflow and activity to a worker.
func Register(r worker.Registry, acts *activities.Activities) {
	RegisterRoles(r, acts, Roles)
}

// RegisterRoles adds the workflows and activities of roles to a worker,
// each once.
func RegisterRoles(r worker.Registry, acts *activities.Activities, roles []Role) {
	all := units()
	workflowDone, activityDone := map[string]bool{}, map[string]bool{}
	for _, role := range roles {
		u := all[role]
		for _, wf := range u.workflows {
			n := name(wf)
			if workflowDone[n] {
				continue
			}
			workflowDone[n] = true
			r.RegisterWorkflow(wf)
		}
		for _, n := range u.activities {
			if activityDone[n] {
				continue
			}
			activityDone[n] = true
			r.RegisterActivityWithOptions(reflect.ValueOf(acts).MethodByName(n).Interface(), activity.RegisterOptions{Name: n})
		}
	}
}
