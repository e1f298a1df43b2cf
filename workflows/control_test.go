package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/producer"
)

// started records when each activity of a test run started (workflow time).
type started struct {
	mu  sync.Mutex
	env *testsuite.TestWorkflowEnvironment
	at  []time.Time
	by  []string
}

func (s *started) add(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, s.env.Now())
	s.by = append(s.by, name)
}

// between lists the activities started in (from, to).
func (s *started) between(from, to time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, t := range s.at {
		if t.After(from) && t.Before(to) {
			out = append(out, s.by[i])
		}
	}
	return out
}

func queryBroker(t *testing.T, env *testsuite.TestWorkflowEnvironment) BrokerStatus {
	t.Helper()
	v, err := env.QueryWorkflow(QueryStatus)
	require.NoError(t, err)
	var st BrokerStatus
	require.NoError(t, v.Get(&st))
	return st
}

func queryProducer(t *testing.T, env *testsuite.TestWorkflowEnvironment) ProducerStatus {
	t.Helper()
	v, err := env.QueryWorkflow(QueryStatus)
	require.NoError(t, err)
	var st ProducerStatus
	require.NoError(t, v.Get(&st))
	return st
}

// A pause that comes while the broker applies an incremental lets that
// incremental finish, then nothing is scheduled until the resume; the
// status says paused, since when and why, and the verdict is idle however
// long the pause lasts. After the resume the broker waits and applies again.
func TestBrokerPausesAfterItsIncrementalThenResumes(t *testing.T) {
	env, acts := newEnv(t)
	rec := &started{env: env}
	start := env.Now()
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	waits := 0
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.WaitParams) (activities.WaitResult, error) {
			rec.add("wait")
			waits++
			switch waits {
			case 1:
				return activities.WaitResult{Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}, {ID: "i2", ExpectedLast: "i1"}}}, nil
			case 2:
				return activities.WaitResult{Pending: []activities.PendingLink{{ID: "i2", ExpectedLast: "i1"}}}, nil
			}
			return activities.WaitResult{Stop: true}, nil
		}).Times(3)
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.CheckChainParams) (activities.CheckChainResult, error) {
			rec.add("check")
			return activities.CheckChainResult{}, nil
		}).Twice()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, nil).Twice()
	var applied []string
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(_ context.Context, p activities.BrokerApplyParams) (activities.BrokerApplyResult, error) {
			rec.add("apply " + p.Link.ID)
			applied = append(applied, p.Link.ID)
			return activities.BrokerApplyResult{Applied: 5}, nil
		}).Twice()

	// Paused 30 s into the apply of i1; resumed two hours later.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPause.Name, PauseRequest{Reason: "target maintenance"})
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryBroker(t, env)
		require.NotNil(t, st.Paused, "the status shows the pause as soon as it comes")
		require.True(t, st.Paused.Since.IsZero(), "still finishing i1")
		require.Equal(t, "applying", st.Phase)
	}, 40*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryBroker(t, env)
		require.Equal(t, "paused", st.Phase)
		require.Equal(t, "i1", st.LastApplied, "the incremental under way was finished")
		require.NotNil(t, st.Paused)
		require.Equal(t, "target maintenance", st.Paused.Reason)
		require.False(t, st.Paused.Since.IsZero())
		v, cause := health.Judge(st.Facts(), env.Now(), st.Thresholds)
		require.Equal(t, health.Idle, v, "a paused run is not stalled (cause %q)", cause)
	}, time.Hour+30*time.Minute)
	resumeAt := start.Add(2 * time.Hour)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalResume.Name, ResumeRequest{})
	}, 2*time.Hour)

	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"i1", "i2"}, applied)
	require.Empty(t, rec.between(start.Add(2*time.Minute), resumeAt), "nothing is scheduled while paused")
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "stopped", res.Status.Phase)
	require.Nil(t, res.Status.Paused)
	require.Equal(t, "i2", res.Status.LastApplied)
}

// A pause that comes while the broker waits for links cuts the wait short;
// a stop while paused ends the run.
func TestBrokerStopWhilePausedEndsTheRun(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).After(time.Hour).Return(activities.WaitResult{}, nil).Once()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPause.Name, nil) }, time.Minute)
	env.RegisterDelayedCallback(func() {
		st := queryBroker(t, env)
		require.Equal(t, "paused", st.Phase)
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalStop, nil) }, 3*time.Hour)
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	require.NoError(t, env.GetWorkflowError())
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "stopped", res.Status.Phase)
	require.True(t, res.Status.StopRequested)
}

// A tune takes effect from the next incremental and the next wait; one the
// run cannot take (more lanes than its SQLite target has, a poll interval
// out of bounds) is ignored with a warning and reported in the status.
func TestBrokerTune(t *testing.T) {
	env, acts, logs := newLoggedEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	var polls []time.Duration
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.WaitParams) (activities.WaitResult, error) {
			polls = append(polls, p.PollInterval.D())
			switch len(polls) {
			case 1:
				return activities.WaitResult{Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}, {ID: "i2", ExpectedLast: "i1"}}}, nil
			case 2:
				return activities.WaitResult{Pending: []activities.PendingLink{{ID: "i2", ExpectedLast: "i1"}}}, nil
			}
			return activities.WaitResult{Stop: true}, nil
		}).Times(3)
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Twice()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, nil).Twice()
	var lanes []int
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(_ context.Context, p activities.BrokerApplyParams) (activities.BrokerApplyResult, error) {
			lanes = append(lanes, p.Concurrency)
			return activities.BrokerApplyResult{Applied: 1}, nil
		}).Twice()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalTune.Name, TuneRequest{ApplyConcurrency: 4, PollInterval: dur.Duration(2 * time.Second)})
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryBroker(t, env)
		require.Equal(t, 4, st.ApplyConcurrency)
		require.Equal(t, 2*time.Second, st.PollInterval.D())
		require.NotNil(t, st.LastTune)
		require.Empty(t, st.LastTune.Refused)
		// Out of bounds: ignored, the values in force stay.
		env.SignalWorkflow(SignalTune.Name, TuneRequest{PollInterval: dur.Duration(time.Millisecond)})
	}, 35*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryBroker(t, env)
		require.Equal(t, 4, st.ApplyConcurrency)
		require.Equal(t, 2*time.Second, st.PollInterval.D())
		require.Contains(t, st.LastTune.Refused, "--poll-interval 1ms: give 100ms to 1h")
	}, 40*time.Second)
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []int{1, 4}, lanes, "the incremental under way keeps its lanes, the next takes the new ones")
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 2 * time.Second}, polls)
	warns := linesWith(logs, "BROKER-TUNE-REFUSED")
	require.Len(t, warns, 1, logs.String())
	require.Contains(t, warns[0], "level=WARN")
}

// A SQLite target takes one lane: a tune to more is refused by the run,
// which goes on; the next incremental applies on one lane.
func TestBrokerTuneRefusesMoreLanesThanTheTargetTakes(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	waits := 0
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(context.Context, activities.WaitParams) (activities.WaitResult, error) {
			waits++
			if waits == 1 {
				return activities.WaitResult{Pending: []activities.PendingLink{{ID: "i1", ExpectedLast: "f"}}}, nil
			}
			return activities.WaitResult{Stop: true}, nil
		}).Twice()
	env.OnActivity(acts.CheckChainForBroker, mock.Anything, mock.Anything).Return(activities.CheckChainResult{}, nil).Once()
	env.OnActivity(acts.JudgeBrokerIncremental, mock.Anything, mock.Anything).Return(activities.JudgeResult{}, nil).Once()
	var lanes []int
	env.OnActivity(acts.ApplyBrokerIncremental, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.BrokerApplyParams) (activities.BrokerApplyResult, error) {
			lanes = append(lanes, p.Concurrency)
			return activities.BrokerApplyResult{}, nil
		}).Once()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalTune.Name, TuneRequest{ApplyConcurrency: 4})
	}, 30*time.Second)
	in := brokerInput()
	in.Target.Driver, in.MaxLanes = "sqlite", 1
	env.ExecuteWorkflow(BrokerWorkflow, in)
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []int{1}, lanes)
	var res BrokerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, 1, res.Status.ApplyConcurrency)
	require.NotNil(t, res.Status.LastTune)
	require.Contains(t, res.Status.LastTune.Refused, "--target-driver sqlite takes one writer at a time")
}

// A continue-as-new carries the tuned values and a pause.
func TestBrokerContinueAsNewCarriesTuneAndPause(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.PrepareBroker, mock.Anything, mock.Anything).Return(activities.BrokerStart{Mode: activities.ModeWarm, ChainID: "c", LastApplied: "f"}, nil).Once()
	n := 0
	env.OnActivity(acts.WaitForLinks, mock.Anything, mock.Anything).After(time.Second).Return(
		func(context.Context, activities.WaitParams) (activities.WaitResult, error) {
			n++
			if n == 3 {
				env.SetContinueAsNewSuggested(true)
			}
			return activities.WaitResult{}, nil
		}).Times(3)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalTune.Name, TuneRequest{ApplyConcurrency: 3, PollInterval: dur.Duration(5 * time.Second)})
	}, 1500*time.Millisecond)
	env.ExecuteWorkflow(BrokerWorkflow, brokerInput())
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can), "want continue-as-new, got %v", env.GetWorkflowError())
	var next BrokerInput
	require.NoError(t, decodeInput(can, &next))
	require.Equal(t, 3, next.Concurrency)
	require.Equal(t, 5*time.Second, next.PollInterval.D())
	require.NotNil(t, next.State)
	require.Equal(t, 3, next.State.ApplyConcurrency)

	// A paused run's continue-as-new wakes paused.
	env2, acts2 := newEnv(t)
	st := *next.State
	st.Paused = &PauseState{RequestedAt: env2.Now(), Reason: "carried"}
	next.State = &st
	env2.OnActivity(acts2.WaitForLinks, mock.Anything, mock.Anything).Return(activities.WaitResult{Stop: true}, nil).Maybe()
	env2.RegisterDelayedCallback(func() {
		got := queryBroker(t, env2)
		require.Equal(t, "paused", got.Phase)
		require.Equal(t, "carried", got.Paused.Reason)
		env2.SignalWorkflow(SignalStop, nil)
	}, time.Hour)
	env2.ExecuteWorkflow(BrokerWorkflow, next)
	require.NoError(t, env2.GetWorkflowError())
	env2.AssertActivityNotCalled(t, "WaitForLinks", mock.Anything, mock.Anything)
}

// A producer paused mid-window commits that window, then opens none until
// resumed; its status names what the pause costs the source.
func TestProducerPausesAfterItsWindowThenResumes(t *testing.T) {
	env, acts := newEnv(t)
	rec := &started{env: env}
	start := env.Now()
	windows := 0
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).After(10 * time.Second).Return(
		func(context.Context, activities.WindowParams) (activities.WindowResult, error) {
			rec.add("window")
			windows++
			if windows == 2 {
				return activities.WindowResult{Stopped: true}, nil
			}
			return activities.WindowResult{Result: producer.Result{Committed: true, LinkID: "i1", Transactions: 1, Changes: 2, Links: 2, SegmentLength: 1}}, nil
		}).Twice()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPause.Name, PauseRequest{Reason: "source upgrade"})
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		st := queryProducer(t, env)
		require.Equal(t, "paused", st.Phase)
		require.Equal(t, "i1", st.LastLink, "the window under way was committed")
		require.Equal(t, "source upgrade", st.Paused.Reason)
		require.Contains(t, st.Paused.Cost, "retains WAL")
		v, _ := health.Judge(st.Facts(), env.Now(), st.Thresholds)
		require.Equal(t, health.Idle, v)
	}, time.Hour)
	// A second pause while paused only updates the reason.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPause.Name, "still upgrading")
	}, 90*time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, "still upgrading", queryProducer(t, env).Paused.Reason)
	}, 91*time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalResume.Name, ResumeRequest{Reason: "done"}) }, 2*time.Hour)
	env.ExecuteWorkflow(ProducerWorkflow, ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}}, Rollover: dur.Duration(time.Second)})
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 2, windows)
	require.Empty(t, rec.between(start.Add(11*time.Second), start.Add(2*time.Hour)), "no window while paused")
}

// A stop signal ends a paused producer.
func TestProducerStopWhilePausedEndsTheRun(t *testing.T) {
	env, acts := newEnv(t)
	env.OnActivity(acts.CaptureWindow, mock.Anything, mock.Anything).After(10*time.Second).Return(activities.WindowResult{}, nil).Once()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPause.Name, nil) }, time.Second)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalStop, nil) }, time.Hour)
	env.ExecuteWorkflow(ProducerWorkflow, ProducerInput{ProducerParams: activities.ProducerParams{Store: activities.StoreRef{URL: "file:///c"}}, Rollover: dur.Duration(time.Second)})
	require.NoError(t, env.GetWorkflowError())
	var res ProducerResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "stopped", res.Status.Phase)
	require.Equal(t, int64(1), res.Status.Windows)
}

// Workflow inputs carry durations as text, and inputs recorded with
// numbers of nanoseconds still decode.
func TestInputDurationsAreText(t *testing.T) {
	in := ProducerInput{Rollover: dur.Duration(2 * time.Second), Idle: dur.Duration(5 * time.Minute)}
	in.Health = health.Thresholds{PollStall: 2 * time.Minute}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	require.Contains(t, string(b), `"rollover":"2s"`)
	require.Contains(t, string(b), `"idle":"5m0s"`)
	require.Contains(t, string(b), `"poll_stall":"2m0s"`)
	var back ProducerInput
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, in.Rollover, back.Rollover)
	require.Equal(t, in.Health, back.Health)

	var old BrokerInput
	require.NoError(t, json.Unmarshal([]byte(`{"stream":"s","concurrency":2,"poll_interval":10000000000,"max_wait":300000000000,
		"health":{"poll_stall":120000000000,"delivery_stall":600000000000},"point":{"apply_delay":3600000000000}}`), &old))
	require.Equal(t, 10*time.Second, old.PollInterval.D())
	require.Equal(t, 5*time.Minute, old.MaxWait.D())
	require.Equal(t, time.Hour, old.Point.ApplyDelay.D())
	require.Equal(t, 2*time.Minute, old.Health.PollStall)
	require.Equal(t, 10*time.Minute, old.Health.DeliveryStall)

	b, err = json.Marshal(BrokerInput{PollInterval: dur.Duration(2 * time.Second), MaxWait: dur.Duration(5 * time.Minute)})
	require.NoError(t, err)
	require.Contains(t, string(b), `"poll_interval":"2s"`)
	require.Contains(t, string(b), `"max_wait":"5m0s"`)
}

// The pause signal's payload may be an object, a bare reason, or nothing.
func TestPauseRequestForms(t *testing.T) {
	for raw, want := range map[string]string{`{"reason":"x"}`: "x", `"y"`: "y", `{}`: "", `null`: ""} {
		var r PauseRequest
		require.NoError(t, json.Unmarshal([]byte(raw), &r), raw)
		require.Equal(t, want, r.Reason, raw)
	}
}
