package workflows

import (
	"errors"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/producer"
	"github.com/sluicehq/sluice/internal/retention"
)

// ProducerInput starts a ProducerWorkflow.
type ProducerInput struct {
	activities.ProducerParams
	// Rollover, MaxChanges and MaxBytes bound each window.
	Rollover   dur.Duration `json:"rollover"`
	MaxChanges int64        `json:"max_changes,omitempty"`
	MaxBytes   int64        `json:"max_bytes,omitempty"`
	// RotateAt rotates into a new segment once the tip segment holds this
	// many incrementals (0: never).
	RotateAt int `json:"rotate_at,omitempty"`
	// RetainSegments prunes the chain to its newest N segments after each
	// rotation, keeping those a broker still needs (0: never prune).
	RetainSegments int `json:"retain_segments,omitempty"`
	// Idle ends a window that captured no transaction after this long
	// (zero: DefaultIdleWindow), so a quiet source still turns the loop.
	Idle dur.Duration `json:"idle,omitempty"`
	// RotateOnFilterChange starts a new segment (a rotation) under the
	// run's filters when they differ from the tip segment's, instead of
	// ending the run refused with SLUICE-E-FILTER-CHANGED.
	RotateOnFilterChange bool `json:"rotate_on_filter_change,omitempty"`
	// Carried over continue-as-new.
	State ProducerStatus `json:"state,omitempty"`
}

// ProducerStatus is what the producer's status query returns.
type ProducerStatus struct {
	Phase         string    `json:"phase"`
	StartedAt     time.Time `json:"started_at"`
	LastLink      string    `json:"last_link,omitempty"`
	LastEnd       string    `json:"last_end,omitempty"`
	Links         int       `json:"links"`
	SegmentLength int       `json:"segment_length"`
	Windows       int64     `json:"windows"`
	Rotations     int64     `json:"rotations"`
	// Pruned counts the segments retention dropped; PruneHeld names the
	// brokers whose positions held the last prune back.
	Pruned       int64    `json:"pruned_segments,omitempty"`
	PruneHeld    []string `json:"prune_held,omitempty"`
	Changes      int64    `json:"changes"`
	Transactions int64    `json:"transactions"`
	// LastCommit is the source commit time of the newest captured transaction.
	LastCommit time.Time `json:"last_commit,omitempty"`
	// LastWindowAt is when the newest window ended (workflow time).
	LastWindowAt time.Time `json:"last_window_at,omitempty"`
	// CaptureLag is the time between the newest captured commit and the end
	// of the window that captured it.
	CaptureLag    dur.Duration `json:"capture_lag"`
	SlotRetained  int64        `json:"slot_retained_bytes"`
	SlotWalStatus string       `json:"slot_wal_status,omitempty"`
	LastError     string       `json:"last_error,omitempty"`
	// LastErrorCode is the SLUICE-E code of LastError, if it has one.
	LastErrorCode string `json:"last_error_code,omitempty"`
	// LastErrorAt is when the workflow saw LastError.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Thresholds are the run's verdict thresholds (the verdict itself is
	// judged by whoever reads the status, at the time they read it).
	Thresholds health.Thresholds `json:"thresholds"`
	// LastCommitWindowAt is when the newest window that held transactions ended.
	LastCommitWindowAt time.Time `json:"last_commit_window_at,omitempty"`
	StopRequested      bool      `json:"stop_requested,omitempty"`
	ContinuedAsNewAt   int64     `json:"continued_as_new,omitempty"`
	// Paused is set from a pause signal until the resume: the run ends its
	// current window, then captures nothing.
	Paused *PauseState `json:"paused,omitempty"`
}

// producerPauseCost is what a paused producer costs its source.
const producerPauseCost = "nothing reads the source's log while paused: a PostgreSQL source retains WAL for the chain's slot (slot_retained_bytes grows with its writes), a MySQL-family source may purge the binlog the chain's position needs"

// ProducerResult is how a producer run ended.
type ProducerResult struct {
	Status ProducerStatus `json:"status"`
}

func windowActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour,
		// Windows heartbeat every second; a worker that died is noticed
		// within this and its window retried on another.
		HeartbeatTimeout: HeartbeatTimeout,
		Summary:          "capture and commit one window",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    3,
		},
	})
}

// DefaultIdleWindow is how long a window waits for a transaction before it
// returns empty, when the run does not say; a quiet chain then costs one
// activity of history per idle window.
const DefaultIdleWindow = 5 * time.Minute

// ProducerWorkflow keeps a chain fed: one activity per window, rotation into
// a new segment as a child workflow, stop by signal or store marker,
// continue-as-new when the history grows. Refusals end it; other failures are
// recorded in the status and retried with backoff.
func ProducerWorkflow(ctx workflow.Context, in ProducerInput) (ProducerResult, error) {
	st := in.State
	if st.StartedAt.IsZero() {
		st.StartedAt = workflow.Now(ctx)
	}
	st.Phase = "capturing"
	st.Thresholds = in.Health.WithDefaults()
	if in.Owner == "" {
		// Kept across continue-as-new and lent to the rotations.
		in.Owner = slotOwner(ctx)
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (ProducerStatus, error) {
		return st, nil
	}); err != nil {
		return ProducerResult{}, err
	}
	stopCh := workflow.GetSignalChannel(ctx, SignalStop)
	drainStop := func() {
		for stopCh.ReceiveAsync(nil) {
			st.StopRequested = true
		}
	}
	onPause, onResume := pauseHandlers(ctx, &st.Paused, "store", in.Store.URL, producerPauseCost)
	ctl := handleControls(ctx, onPause, onResume, func(TuneRequest) {
		workflow.GetLogger(ctx).Warn("TUNE-IGNORED: the tune signal changes a broker's settings; a producer has none to tune", "store", in.Store.URL)
	})
	idle := in.Idle
	if idle <= 0 {
		idle = dur.Duration(DefaultIdleWindow)
	}
	failures := 0
	for {
		drainStop()
		if st.StopRequested {
			st.Phase = "stopped"
			return ProducerResult{Status: st}, nil
		}
		if waited, err := waitWhilePaused(ctx, &st.Paused, &st.Phase, stopCh); err != nil {
			return ProducerResult{Status: st}, err
		} else if waited {
			// Resumed, or a stop is pending: look again.
			st.Phase = "capturing"
			continue
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			ctl.drain()
			in.State = st
			in.State.ContinuedAsNewAt++
			return ProducerResult{}, workflow.NewContinueAsNewError(ctx, ProducerWorkflow, in)
		}

		wctx, cancel := workflow.WithCancel(ctx)
		var res activities.WindowResult
		fut := workflow.ExecuteActivity(windowActivity(wctx), a.CaptureWindow, activities.WindowParams{
			ProducerParams: in.ProducerParams, Rollover: in.Rollover, MaxChanges: in.MaxChanges, MaxBytes: in.MaxBytes,
			Idle: idle, StopAfter: st.StartedAt,
		})
		// A stop signal asks the running window to end at its next
		// transaction boundary through the store marker; the activity
		// sees it within seconds and commits what it holds.
		sel := workflow.NewSelector(ctx)
		var err error
		done := false
		sel.AddFuture(fut, func(f workflow.Future) { err = f.Get(ctx, &res); done = true })
		sel.AddReceive(stopCh, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			st.StopRequested = true
		})
		for !done {
			sel.Select(ctx)
			if st.StopRequested && !done {
				st.Phase = "stopping"
				if serr := workflow.ExecuteActivity(shortActivity(ctx, "write the stop marker"), a.RequestProducerStop, in.Store).Get(ctx, nil); serr != nil {
					cancel()
				}
				// Wait for the window to return; more stop signals change nothing.
				for !done {
					sel.Select(ctx)
				}
			}
		}
		cancel()
		if err != nil {
			var canceled *temporal.CanceledError
			if errors.As(err, &canceled) {
				return ProducerResult{Status: st}, err
			}
			if in.RotateOnFilterChange && errorCode(err) == string(errcode.FilterChanged) {
				// The run's filters start a new segment; a refusal after
				// it is a real one.
				rotated, refused := st.rotate(ctx, in)
				if refused != nil {
					return ProducerResult{Status: st}, refused
				}
				if rotated {
					in.RotateOnFilterChange = false
				}
				continue
			}
			if st.failed(ctx, err) {
				return ProducerResult{Status: st}, err
			}
			failures++
			backoff := time.Duration(1<<min(failures, 6)) * time.Second
			if serr := workflow.Sleep(ctx, backoff); serr != nil {
				return ProducerResult{Status: st}, serr
			}
			continue
		}
		failures = 0
		st.Phase, st.LastError, st.LastErrorCode = "capturing", "", ""
		st.record(res.Result, workflow.Now(ctx))
		if res.Stopped {
			st.StopRequested = true
			continue
		}
		if in.RotateAt > 0 && res.SegmentLength >= in.RotateAt {
			if _, refused := st.rotate(ctx, in); refused != nil {
				return ProducerResult{Status: st}, refused
			}
		}
	}
}

// rotate runs one rotation as a child workflow, then the retention policy.
// It returns whether the rotation committed, and the error of a refused
// one, which ends the run; any other failure is recorded and left for the
// loop to retry.
func (st *ProducerStatus) rotate(ctx workflow.Context, in ProducerInput) (rotated bool, refused error) {
	st.Phase = "rotating"
	var rot producer.Result
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID + "/rotate-" + itoa(st.Rotations+1) + "-" + workflow.GetInfo(ctx).WorkflowExecution.RunID[:8],
	})
	if err := workflow.ExecuteChildWorkflow(cctx, RotateWorkflow, in.ProducerParams).Get(ctx, &rot); err != nil {
		if st.failed(ctx, err) {
			return false, err
		}
		return false, nil
	}
	st.Rotations++
	st.record(rot, workflow.Now(ctx))
	if in.RetainSegments > 0 {
		st.Phase = "pruning"
		st.prune(ctx, in)
	}
	st.Phase = "capturing"
	return true, nil
}

// prune applies the run's retention policy after a rotation. A prune that
// fails is logged and left for the next rotation, which finishes it: the
// chain only holds more than the policy asks meanwhile.
func (st *ProducerStatus) prune(ctx workflow.Context, in ProducerInput) {
	var res retention.Result
	err := workflow.ExecuteActivity(shortActivity(ctx, "prune to the newest "+itoa(int64(in.RetainSegments))+" segments"), a.PruneChain,
		activities.PruneParams{Store: in.Store, Policy: retention.Policy{KeepSegments: in.RetainSegments}}).Get(ctx, &res)
	if err != nil {
		workflow.GetLogger(ctx).Warn("PRUNE-FAILED: the retention policy was not applied after the rotation; the next rotation tries again",
			"store", in.Store.URL, "error", err.Error())
		return
	}
	st.Pruned += int64(len(res.Drop))
	st.PruneHeld = st.PruneHeld[:0]
	for _, b := range res.Held {
		st.PruneHeld = append(st.PruneHeld, b.Stream)
	}
	if len(res.Held) > 0 {
		workflow.GetLogger(ctx).Warn("PRUNE-HELD-BY-BROKER: segments the policy would drop are kept for brokers that have not replayed them",
			"store", in.Store.URL, "brokers", strings.Join(st.PruneHeld, ","), "kept", res.Keep)
	}
}

// failed records a failure and sets the phase: "retrying", or "refused"
// for a refusal, which ends the run (then it reports true).
func (st *ProducerStatus) failed(ctx workflow.Context, err error) (refused bool) {
	st.LastError, st.LastErrorCode, st.LastErrorAt = err.Error(), errorCode(err), workflow.Now(ctx)
	if isRefusal(err) {
		st.Phase = "refused"
		return true
	}
	st.Phase = "retrying"
	return false
}

// Facts are the health facts the workflow itself knows: when its last
// window ended (a window polls the source throughout), when the last one
// with transactions committed, and its last failure. The running window's
// heartbeats carry fresher ones.
func (st ProducerStatus) Facts() health.Facts {
	f := health.Facts{PolledAt: st.LastWindowAt, DeliveredAt: st.LastCommitWindowAt, Paused: st.Phase == "paused"}
	f.ReportedAt = latestOf(st.LastWindowAt, st.LastErrorAt)
	if st.LastError != "" && !st.LastErrorAt.Before(f.ReportedAt) {
		f.FailCause, f.FailError = health.CauseOf(st.LastErrorCode), st.LastError
	}
	return f
}

func (st *ProducerStatus) record(r producer.Result, now time.Time) {
	st.Windows++
	st.Changes += r.Changes
	st.Transactions += r.Transactions
	if r.Committed {
		st.LastLink, st.LastEnd = r.LinkID, r.End
		st.LastCommitWindowAt = now
	}
	if r.Links > 0 {
		st.Links, st.SegmentLength = r.Links, r.SegmentLength
	}
	if !r.LastCommit.IsZero() {
		st.LastCommit = r.LastCommit
		st.CaptureLag = dur.Duration(now.Sub(r.LastCommit))
	}
	st.LastWindowAt = now
	st.SlotRetained, st.SlotWalStatus = r.Slot.RetainedBytes, r.Slot.WalStatus
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// RotateWorkflow closes the chain's tip segment and starts a new one with a
// fresh full, as the producer's child.
func RotateWorkflow(ctx workflow.Context, p activities.ProducerParams) (producer.Result, error) {
	var res producer.Result
	err := workflow.ExecuteActivity(longActivity(ctx, "new full and closing incremental", 3), a.RotateSegment, p).Get(ctx, &res)
	return res, err
}

// slotOwner names the workflow run reading the chain slot: its ID and first
// run ID. The run ID keeps a producer of the same chain started elsewhere
// (another namespace or cluster) a stranger, which is refused, never taken
// over from.
func slotOwner(ctx workflow.Context) string {
	info := workflow.GetInfo(ctx)
	return info.WorkflowExecution.ID + "@" + info.FirstRunID
}

// IncrementalInput starts an IncrementalWorkflow.
type IncrementalInput struct {
	activities.ProducerParams
}

// IncrementalWorkflow commits one incremental from the chain's tip up to the
// source's position at its start (`sluice backup incremental`).
func IncrementalWorkflow(ctx workflow.Context, in IncrementalInput) (activities.WindowResult, error) {
	var res activities.WindowResult
	in.Owner = slotOwner(ctx)
	err := workflow.ExecuteActivity(longActivity(ctx, "capture up to the source's current position", 3), a.CaptureWindow,
		activities.WindowParams{ProducerParams: in.ProducerParams, UpToNow: true, Idle: dur.Duration(time.Minute)}).Get(ctx, &res)
	return res, err
}
