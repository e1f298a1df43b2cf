package workflows

import (
	"context"
	"flag"
	"fmt"
	"os"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/producer"
	"github.com/sluicehq/sluice/internal/verify"
)

// deadWorkerBound is the longest an attempt on a worker that was killed may
// hold its run before Temporal schedules the next attempt: the runbook
// promises a new worker picks the run up within 30 s.
const deadWorkerBound = 30 * time.Second

// firstRetryAtMost is the longest first retry interval any activity's retry
// policy may have (a dead worker's attempt is retried after its timeout plus
// this backoff).
const firstRetryAtMost = 2 * time.Second

// scheduled records, for every activity type a workflow test started, the
// timeouts the workflow gave it.
var scheduled = struct {
	sync.Mutex
	byType map[string]activity.Info
}{byType: map[string]activity.Info{}}

// topLevelWorkflowID is the ID the test environment gives the workflow a
// test executes. Only its activities are recorded: the environment drops a
// child workflow's activity heartbeat timeout (it caps it by a
// schedule-to-close that it leaves unset for children), which a server does
// not, so a child's activities are checked where a test runs that workflow
// itself.
const topLevelWorkflowID = "default-test-workflow-id"

// recordSchedules makes env record every activity it starts in scheduled.
func recordSchedules(env *testsuite.TestWorkflowEnvironment) {
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.WorkflowExecution.ID != topLevelWorkflowID {
			return
		}
		scheduled.Lock()
		defer scheduled.Unlock()
		scheduled.byType[info.ActivityType.Name] = *info
	})
}

// deadWorkerHold is how long Temporal keeps waiting on an attempt whose
// worker died: the heartbeat timeout when the activity has one, else its
// start-to-close timeout.
func deadWorkerHold(info activity.Info) time.Duration {
	if info.HeartbeatTimeout > 0 && info.HeartbeatTimeout < info.StartToCloseTimeout {
		return info.HeartbeatTimeout
	}
	return info.StartToCloseTimeout
}

// TestMain runs the package's tests, then checks what they scheduled: every
// activity the worker registers was started by some workflow test, and none
// of them can hold a run for more than deadWorkerBound after its worker is
// SIGKILLed (a heartbeat timeout of seconds, or a start-to-close of seconds).
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 {
		if problems := deadWorkerProblems(flag.Lookup("test.run").Value.String() == ""); len(problems) > 0 {
			for _, p := range problems {
				fmt.Println("FAIL dead-worker bound:", p)
			}
			code = 1
		}
	}
	os.Exit(code)
}

// deadWorkerProblems lists the activity types whose options let a dead
// worker hold a run too long and, when every test ran (all), the registered
// activities no test scheduled.
func deadWorkerProblems(all bool) []string {
	scheduled.Lock()
	defer scheduled.Unlock()
	var problems []string
	for name, info := range scheduled.byType {
		if hold := deadWorkerHold(info) + firstRetryAtMost; hold > deadWorkerBound {
			problems = append(problems, fmt.Sprintf("%s: a killed worker's attempt holds the run for %s (heartbeat timeout %s, start-to-close %s)",
				name, hold, info.HeartbeatTimeout, info.StartToCloseTimeout))
		}
	}
	if all {
		acts := reflect.TypeOf(&activities.Activities{})
		for i := 0; i < acts.NumMethod(); i++ {
			name := acts.Method(i).Name
			if _, ok := scheduled.byType[name]; !ok {
				problems = append(problems, fmt.Sprintf("%s: registered, but no workflow test scheduled it, so its timeouts are unchecked", name))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// The check itself must be able to fail: options like the ones that held a
// run for ten minutes are reported.
func TestDeadWorkerBoundCatchesLongTimeouts(t *testing.T) {
	tenMinutes := activity.Info{StartToCloseTimeout: 10 * time.Minute}
	if deadWorkerHold(tenMinutes)+firstRetryAtMost <= deadWorkerBound {
		t.Fatalf("a 10-minute start-to-close without heartbeat passes the bound")
	}
	minuteHeartbeat := activity.Info{StartToCloseTimeout: 48 * time.Hour, HeartbeatTimeout: time.Minute}
	if deadWorkerHold(minuteHeartbeat)+firstRetryAtMost <= deadWorkerBound {
		t.Fatalf("a one-minute heartbeat timeout passes the bound")
	}
	ok := activity.Info{StartToCloseTimeout: 48 * time.Hour, HeartbeatTimeout: HeartbeatTimeout}
	if deadWorkerHold(ok)+firstRetryAtMost > deadWorkerBound {
		t.Fatalf("the workflows' own heartbeat timeout fails the bound")
	}
}

// A restore through incrementals plans, prepares, loads each table,
// finishes, then applies the incrementals in chain order.
func TestRestoreAppliesIncrementalsAfterTheFull(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PlanRestore, mock.Anything, mock.Anything).Return(activities.RestorePlan{
		ChainID: "c", FullID: "f", Through: "i2", Incrementals: []string{"i1", "i2"},
		Tables: []activities.RestoreTable{{Name: "public.a", Rows: 3}},
	}, nil).Once()
	env.OnActivity(acts.PrepareTarget, mock.Anything, mock.Anything).Return(nil).Once()
	env.OnActivity(acts.LoadTable, mock.Anything, mock.Anything).Return(int64(3), nil).Once()
	env.OnActivity(acts.EndRestore, mock.Anything, mock.Anything).Return(nil).Once()
	env.OnActivity(acts.CreateObjects, mock.Anything, mock.Anything).Return(activities.ObjectsReport{}, nil).Once()
	env.OnActivity(acts.FinishTarget, mock.Anything, mock.Anything).Return(nil).Once()
	var applied []string
	env.OnActivity(acts.ApplyIncremental, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.ApplyIncrementalParams) (int64, error) {
			applied = append(applied, p.Incremental)
			return 5, nil
		}).Twice()
	env.ExecuteWorkflow(RestoreWorkflow, RestoreInput{Store: activities.StoreRef{URL: "file:///c"}})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"i1", "i2"}, applied)
	var res RestoreResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, int64(10), res.Changes)
}

// A reset restores the chain in a child run, then writes the position at
// the tail it restored through, and tails from there.
func TestBrokerResetWritesThePositionAfterTheRestore(t *testing.T) {
	env, acts := newEnv(t)
	env.RegisterWorkflow(RestoreWorkflow)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeReset, ChainID: "c", Tail: "i1"}, nil).Once()
	env.OnActivity(acts.PlanRestore, mock.Anything, mock.Anything).Return(activities.RestorePlan{ChainID: "c", FullID: "f", Through: "i1"}, nil).Once()
	env.OnActivity(acts.PrepareTarget, mock.Anything, mock.Anything).Return(nil).Once()
	env.OnActivity(acts.CreateObjects, mock.Anything, mock.Anything).Return(activities.ObjectsReport{}, nil).Once()
	env.OnActivity(acts.FinishTarget, mock.Anything, mock.Anything).Return(nil).Once()
	var wrote activities.InitPositionParams
	env.OnActivity(acts.InitBrokerPosition, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.InitPositionParams) error { wrote = p; return nil }).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{Stop: true}, nil).Once()
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, "i1", wrote.LastApplied)
	require.Equal(t, "c", wrote.ChainID)
}

// RotateWorkflow, run on its own, rotates once.
func TestRotateWorkflowRotatesOnce(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.RotateSegment, mock.Anything, mock.Anything).Return(producer.Result{Committed: true, LinkID: "f2"}, nil).Once()
	env.ExecuteWorkflow(RotateWorkflow, activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}})
	require.NoError(t, env.GetWorkflowError())
	var res producer.Result
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "f2", res.LinkID)
}

// A verify asked to wait for a broker waits first, then compares.
func TestVerifyWaitsForTheBrokerThenCompares(t *testing.T) {
	env, acts := newEnv(t)
	var order []string
	env.OnActivity(acts.WaitBrokerAtTip, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.WaitBrokerParams) (verify.BrokerAt, error) {
			order = append(order, "wait")
			return verify.BrokerAt{}, nil
		}).Once()
	env.OnActivity(acts.VerifyTables, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.VerifyParams) (verify.Outcome, error) {
			order = append(order, "compare")
			return verify.Outcome{}, nil
		}).Once()
	env.ExecuteWorkflow(VerifyWorkflow, VerifyInput{WaitBroker: "s", Store: &activities.StoreRef{URL: "file:///c"}, WaitTimeout: dur.Duration(time.Minute)})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"wait", "compare"}, order)
}

// A stop signal during a window writes the stop marker; the window then
// ends at its boundary and the producer stops.
func TestProducerStopSignalWritesTheStopMarker(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).After(time.Minute).Return(activities.WindowResult{Stopped: true}, nil).Once()
	env.OnActivity(acts.RequestProducerStop, mock.Anything, mock.Anything).Return(nil).Once()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalStop, nil) }, HeartbeatTimeout)
	env.ExecuteWorkflow(ProducerWorkflow, ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}}, Rollover: dur.Duration(time.Second)})
	require.NoError(t, env.GetWorkflowError())
	var res ProducerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.True(t, res.Status.StopRequested)
}
