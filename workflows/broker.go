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
	"github.com/sluicehq/sluice/internal/pitr"
	"github.com/sluicehq/sluice/internal/target"
)

// BrokerInput starts a BrokerWorkflow.
type BrokerInput struct {
	activities.BrokerParams
	// Concurrency and PollInterval are the run's --apply-concurrency and
	// --poll-interval; a tune signal changes them, and a continue-as-new
	// carries the values in force.
	Concurrency  int          `json:"concurrency"`
	PollInterval dur.Duration `json:"poll_interval"`
	// MaxLanes is how many lanes the target's driver takes (0: any); a
	// tune asking for more is refused.
	MaxLanes int `json:"max_lanes,omitempty"`
	// MaxWait bounds one wait for new links (zero: DefaultBrokerMaxWait).
	// A wait that finds nothing is an idle tick: the loop starts the next.
	MaxWait   dur.Duration `json:"max_wait,omitempty"`
	Reset     bool         `json:"reset,omitempty"`
	AtChainID string       `json:"at_chain_id,omitempty"`
	// Point holds the run back: it ends at --until, and applies no
	// transaction younger than --apply-delay.
	Point activities.BrokerPoint `json:"point,omitzero"`
	// Carried over continue-as-new.
	State *BrokerStatus `json:"state,omitempty"`
}

// BrokerStatus is what the broker's status query returns.
type BrokerStatus struct {
	Phase       string    `json:"phase"`
	Mode        string    `json:"mode,omitempty"`
	Stream      string    `json:"stream"`
	ChainID     string    `json:"chain_id,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	LastApplied string    `json:"last_applied,omitempty"`
	// Applying is the incremental being applied, if any.
	Applying string `json:"applying,omitempty"`
	// LinksBehind counts incrementals the chain holds beyond the position.
	LinksBehind int `json:"links_behind"`
	// SecondsBehind is the age of the oldest incremental not yet applied
	// (0 when caught up).
	SecondsBehind float64 `json:"seconds_behind"`
	// LastAppliedCreatedAt is when the last applied link was written.
	LastAppliedCreatedAt time.Time `json:"last_applied_created_at,omitempty"`
	Incrementals         int64     `json:"incrementals_applied"`
	ChangesApplied       int64     `json:"changes_applied"`
	ChangesSkipped       int64     `json:"changes_skipped"`
	// Unidentified counts applied changes that carried no apply identity.
	Unidentified int64     `json:"unidentified_changes,omitempty"`
	LastPollAt   time.Time `json:"last_poll_at,omitempty"`
	// LastAppliedAt is when the last incremental finished applying.
	LastAppliedAt time.Time `json:"last_applied_at,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
	// LastErrorCode is the SLUICE-E code of LastError, if it has one.
	LastErrorCode string `json:"last_error_code,omitempty"`
	// LastErrorAt is when the workflow saw LastError.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Subset describes the tables the stream applies ("include orders;
	// exclude audit*"); empty when it applies every table.
	Subset string `json:"subset,omitempty"`
	// Thresholds are the run's verdict thresholds (the verdict itself is
	// judged by whoever reads the status, at the time they read it).
	Thresholds health.Thresholds `json:"thresholds"`
	// WarnedSevered are the applied-link findings this run has logged.
	WarnedSevered []string `json:"warned_severed,omitempty"`
	StopRequested bool     `json:"stop_requested,omitempty"`

	// ApplyConcurrency and PollInterval are the values in force (the
	// run's flags, or the last tune that took effect).
	ApplyConcurrency int          `json:"apply_concurrency,omitempty"`
	PollInterval     dur.Duration `json:"poll_interval,omitempty"`
	// LastTune is what became of the last tune signal.
	LastTune *TuneOutcome `json:"last_tune,omitempty"`
	// Paused is set from a pause signal until the resume: the run ends the
	// incremental it applies, then applies and polls nothing.
	Paused *PauseState `json:"paused,omitempty"`

	// Until is the run's --until or --until-position, as given; Reached
	// is set once the target holds everything at or before it and nothing
	// after, and the run ends.
	Until   string `json:"until,omitempty"`
	Reached bool   `json:"reached,omitempty"`
	// ApplyDelaySeconds is the run's --apply-delay.
	ApplyDelaySeconds float64 `json:"apply_delay_seconds,omitempty"`
	// HeldUntil is when the delay lets the next transaction through
	// (zero while nothing is held back).
	HeldUntil time.Time `json:"held_until,omitzero"`
	// Inside is the incremental the position stops inside (the point or
	// the delay cut it), empty at a link boundary.
	Inside string `json:"inside,omitempty"`
	// LastTransaction is the last transaction applied and NextTransaction
	// the first left out, as far as the run has read them (runs with
	// --until or --apply-delay).
	LastTransaction *pitr.Transaction `json:"last_transaction,omitempty"`
	NextTransaction *pitr.Transaction `json:"next_transaction,omitempty"`
	// Objects is what the cold start or the last incremental that changed
	// them did with the recorded schema objects, and ObjectsAt names
	// which ("cold start" or the incremental's ID).
	Objects   *activities.ObjectsReport `json:"objects,omitempty"`
	ObjectsAt string                    `json:"objects_at,omitempty"`
}

// noteObjects records what a step did with the schema objects, and logs
// what it left alone (a replay logs nothing).
func (st *BrokerStatus) noteObjects(ctx workflow.Context, stream, at string, r *activities.ObjectsReport) {
	if r == nil {
		return
	}
	st.Objects, st.ObjectsAt = r, at
	if r.NotRun != "" {
		workflow.GetLogger(ctx).Warn("BROKER-OBJECTS-NOT-RUN: the chain's schema objects (views, routines, triggers, …) were not run on the target",
			"stream", stream, "at", at, "why", r.NotRun)
	}
	if len(r.Skipped) > 0 {
		workflow.GetLogger(ctx).Warn("BROKER-OBJECTS-SKIPPED: schema objects were not applied to the target",
			"stream", stream, "at", at, "skipped", strings.Join(r.Skipped, "; "))
	}
}

// BrokerResult is how a broker run ended.
type BrokerResult struct {
	Status BrokerStatus `json:"status"`
}

func brokerApplyActivity(ctx workflow.Context, id string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    HeartbeatTimeout,
		// A cancelled run ends only once the apply has stopped, so nothing
		// of it commits after the run reported where it stopped.
		WaitForCancellation: true,
		Summary:             "apply incremental " + id,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 5,
		},
	})
}

func waitActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    HeartbeatTimeout,
		Summary:             "wait for new links",
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 5,
		},
	})
}

// DefaultBrokerMaxWait bounds one wait activity when the run does not say;
// a quiet chain costs a few history events per wait.
const DefaultBrokerMaxWait = 5 * time.Minute

// versionIdleTick names the change that made an empty wait an idle tick
// that goes straight to the next wait. Runs recorded before it checked the
// chain after an empty wait (and then panicked on the empty slice); on
// replay they still schedule that check, and then wait again.
const versionIdleTick = "broker-idle-tick"

// BrokerWorkflow replays a chain into a target exactly once: it decides the
// start mode, cold-starts through a child restore when asked, then waits for
// new incrementals and applies each in chain order. Signal stop and the
// store's stop marker end it between incrementals (exit 0); a cancellation
// inside an incremental ends it with BROKER-INCREMENTAL-PARTIAL.
func BrokerWorkflow(ctx workflow.Context, in BrokerInput) (BrokerResult, error) {
	st := BrokerStatus{Stream: in.Stream, Phase: "starting"}
	if in.State != nil {
		st = *in.State
	} else {
		st.StartedAt = workflow.Now(ctx)
	}
	st.Thresholds = in.Health.WithDefaults()
	st.Subset = ""
	if !in.Subset.IsZero() {
		st.Subset = in.Subset.String()
	}
	st.Until, st.ApplyDelaySeconds = in.Point.String(), in.Point.ApplyDelay.Seconds()
	st.ApplyConcurrency, st.PollInterval = in.Concurrency, in.PollInterval
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (BrokerStatus, error) {
		return st, nil
	}); err != nil {
		return BrokerResult{}, err
	}
	stopCh := workflow.GetSignalChannel(ctx, SignalStop)
	stopped := func() bool {
		for stopCh.ReceiveAsync(nil) {
			st.StopRequested = true
		}
		return st.StopRequested
	}
	// interrupt cancels the wait for new links under way, if any: a pause
	// need not wait for it, as nothing of it is work done.
	var interrupt func()
	onPause, onResume := pauseHandlers(ctx, &st.Paused, "stream", in.Stream, "")
	ctl := handleControls(ctx, func(r PauseRequest) {
		onPause(r)
		if interrupt != nil {
			interrupt()
			interrupt = nil
		}
	}, onResume, func(t TuneRequest) {
		out := TuneOutcome{At: workflow.Now(ctx), Requested: t}
		if err := t.Check(in.maxLanes(), in.Target.Driver, st.Thresholds); err != nil {
			out.Refused = err.Error()
			workflow.GetLogger(ctx).Warn("BROKER-TUNE-REFUSED: the tune signal was ignored; the run goes on with the settings in force",
				"stream", in.Stream, "reason", out.Refused, "apply_concurrency", in.Concurrency, "poll_interval", in.PollInterval.String())
		} else {
			// Read by the next incremental and the next wait.
			if t.ApplyConcurrency != 0 {
				in.Concurrency = t.ApplyConcurrency
			}
			if t.PollInterval != 0 {
				in.PollInterval = t.PollInterval
			}
			st.ApplyConcurrency, st.PollInterval = in.Concurrency, in.PollInterval
			workflow.GetLogger(ctx).Info("tuned", "stream", in.Stream, "apply_concurrency", in.Concurrency, "poll_interval", in.PollInterval.String())
		}
		st.LastTune = &out
	})
	// cancelled ends the run after a cancellation: cleanly between units of
	// work, with the given code inside one.
	cancelled := func(code errcode.Code, msg string) (BrokerResult, error) {
		st.Phase = "cancelled"
		if code == "" {
			return BrokerResult{Status: st}, nil
		}
		return BrokerResult{Status: st}, temporal.NewNonRetryableApplicationError(string(code)+": "+msg, string(code), nil)
	}

	if in.State == nil {
		var start activities.BrokerStart
		err := workflow.ExecuteActivity(shortActivity(ctx, "check the target and choose the start mode"), a.PrepareBroker,
			activities.BrokerStartParams{BrokerParams: in.BrokerParams, Reset: in.Reset, AtChainID: in.AtChainID, Point: in.Point}).Get(ctx, &start)
		if err != nil {
			if isCanceled(ctx, err) {
				return cancelled("", "")
			}
			return BrokerResult{Status: st}, err
		}
		st.Mode, st.ChainID, st.LastApplied = start.Mode, start.ChainID, start.LastApplied
		if start.Mode == activities.ModeReset {
			// The drop begins now: from here an interruption leaves a partial
			// restore and no position.
			st.Phase = "cold start: restoring the chain"
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
				WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID + "/reset-" + workflow.GetInfo(ctx).WorkflowExecution.RunID[:8],
			})
			var rr RestoreResult
			err := workflow.ExecuteChildWorkflow(cctx, RestoreWorkflow, RestoreInput{
				Store: in.Store, Target: in.Target, Parallel: 2, Replace: true, Through: start.Tail, Subset: in.Subset, Objects: in.Objects,
				ApplyConcurrency: in.Concurrency,
			}).Get(ctx, &rr)
			if err == nil {
				err = workflow.ExecuteActivity(shortActivity(ctx, "write the position"), a.InitBrokerPosition, activities.InitPositionParams{
					BrokerParams: in.BrokerParams, ChainID: start.ChainID, LastApplied: start.Tail,
				}).Get(ctx, nil)
			}
			if err != nil {
				if isCanceled(ctx, err) {
					return cancelled(errcode.BrokerColdStartPartial, "the cold start was interrupted after its drop began; the target holds a partial restore and no position")
				}
				st.failed(ctx, err)
				st.Phase = "failed"
				if errorCode(err) == string(errcode.ChainSchemaRefused) {
					// The chain itself is refused (docs/security.md): another
					// cold start would meet the same schema, so say that, not
					// "run again".
					return BrokerResult{Status: st}, temporal.NewNonRetryableApplicationError(
						string(errcode.ChainSchemaRefused)+": the cold start refused the chain's recorded schema (the target may hold a partial restore and no position): "+err.Error(),
						string(errcode.ChainSchemaRefused), err)
				}
				return BrokerResult{Status: st}, temporal.NewNonRetryableApplicationError(
					string(errcode.BrokerColdStartPartial)+": the cold start failed after its drop began: "+err.Error(), string(errcode.BrokerColdStartPartial), err)
			}
			st.LastApplied = start.Tail
			st.noteObjects(ctx, in.Stream, "cold start", rr.Objects)
		}
	}

	maxWait := in.MaxWait
	if maxWait <= 0 {
		maxWait = dur.Duration(DefaultBrokerMaxWait)
	}
	for {
		if stopped() {
			st.Phase = "stopped"
			return BrokerResult{Status: st}, nil
		}
		if waited, err := waitWhilePaused(ctx, &st.Paused, &st.Phase, stopCh); err != nil {
			return cancelled("", "")
		} else if waited {
			continue // resumed, or a stop is pending: look again
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			ctl.drain()
			next := in
			s := st
			next.State, next.Reset, next.AtChainID = &s, false, ""
			return BrokerResult{}, workflow.NewContinueAsNewError(ctx, BrokerWorkflow, next)
		}
		st.Phase, st.Applying = "waiting", ""
		wctx, cancelWait := workflow.WithCancel(ctx)
		var wait activities.WaitResult
		fut := workflow.ExecuteActivity(waitActivity(wctx), a.WaitForLinks, activities.WaitParams{
			BrokerParams: in.BrokerParams, After: st.LastApplied, PollInterval: in.PollInterval,
			MaxWait: maxWait, StopAfter: st.StartedAt, HeldUntil: st.HeldUntil,
		})
		sel := workflow.NewSelector(ctx)
		var err error
		done := false
		sel.AddFuture(fut, func(f workflow.Future) { err = f.Get(ctx, &wait); done = true })
		sel.AddReceive(stopCh, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			st.StopRequested = true
			cancelWait()
		})
		interrupted := false
		interrupt = func() { interrupted = true; cancelWait() }
		for !done {
			sel.Select(ctx)
		}
		interrupt = nil
		cancelWait()
		now := workflow.Now(ctx)
		st.LastPollAt = now
		if st.StopRequested || interrupted {
			// A pause cut the wait short (it may have been resumed since):
			// nothing of it is used; the next turn waits again.
			continue
		}
		if err != nil {
			if isCanceled(ctx, err) {
				return cancelled("", "")
			}
			if st.failed(ctx, err) {
				return BrokerResult{Status: st}, err
			}
			if serr := workflow.Sleep(ctx, 10*time.Second); serr != nil {
				return cancelled("", "")
			}
			continue
		}
		if wait.Stop {
			st.StopRequested = true
			continue
		}
		if len(wait.Pending) == 0 {
			// An idle tick: the chain holds nothing past the position,
			// or nothing the delay lets through yet.
			st.LinksBehind, st.SecondsBehind = wait.Held, 0
			if workflow.GetVersion(ctx, versionIdleTick, workflow.DefaultVersion, 1) == 1 {
				continue
			}
		}
		// The whole chain is checked for severed transactions before
		// anything of this tick is applied.
		st.Phase = "checking the chain"
		var checked activities.CheckChainResult
		if err := workflow.ExecuteActivity(shortActivity(ctx, "severed-transaction check"), a.CheckChainForBroker, activities.CheckChainParams{
			BrokerParams: in.BrokerParams, After: st.LastApplied, Warned: st.WarnedSevered,
		}).Get(ctx, &checked); err != nil {
			if isCanceled(ctx, err) {
				return cancelled("", "")
			}
			if st.failed(ctx, err) {
				return BrokerResult{Status: st}, err
			}
			continue
		}
		for _, f := range checked.Applied {
			// Logged by the workflow, so a retried check or a replay
			// never logs a finding twice in a run.
			workflow.GetLogger(ctx).Warn("CHAIN-APPLIED-SEVERED-TRANSACTION: a link already applied carries a severed transaction; compare the tables those links touched with the source, or rebuild the target from a new full",
				"stream", in.Stream, "links", strings.Join(f.Links, ","), "shape", f.Shape, "finding", f.Key)
			st.WarnedSevered = append(st.WarnedSevered, f.Key)
		}
		st.LinksBehind = len(wait.Pending)
		st.SecondsBehind = 0
		if len(wait.Pending) > 0 {
			st.SecondsBehind = now.Sub(wait.Pending[0].CreatedAt).Seconds()
		}
		if len(wait.Pending) == 0 || stopped() || st.Paused != nil {
			continue
		}
		// One incremental per tick: the next tick reads the catalog and the
		// store's stop marker again, so a stop is observed between
		// incrementals even while the broker is far behind.
		link := wait.Pending[0]
		cut := activities.BrokerCut{Records: -1}
		if in.Point.Active() {
			// How much of the incremental the point and the delay let
			// through now.
			st.Phase, st.Applying = "finding the point", link.ID
			err := workflow.ExecuteActivity(shortActivity(ctx, "find the point in incremental "+link.ID), a.PlanBrokerCut,
				activities.BrokerCutParams{BrokerParams: in.BrokerParams, Link: link, Point: in.Point}).Get(ctx, &cut)
			if err != nil {
				if isCanceled(ctx, err) {
					return cancelled("", "")
				}
				if st.failed(ctx, err) {
					return BrokerResult{Status: st}, err
				}
				continue
			}
		}
		st.Phase, st.Applying = "judging", link.ID
		params := activities.BrokerApplyParams{BrokerParams: in.BrokerParams, Link: link, Concurrency: in.Concurrency,
			StopAt: max(cut.Records, 0), StopDigest: cut.Digest}
		var judged activities.JudgeResult
		var r activities.BrokerApplyResult
		applying := false
		if cut.Records != 0 {
			err = workflow.ExecuteActivity(shortActivity(ctx, "judge incremental "+link.ID), a.JudgeBrokerIncremental, params).Get(ctx, &judged)
		}
		if err == nil && cut.Records != 0 {
			st.Phase, applying = "applying", true
			// The inserts arbitrate on exactly the keys the judgment found.
			params.Arbiters = judged.Arbiters
			err = workflow.ExecuteActivity(brokerApplyActivity(ctx, link.ID), a.ApplyBrokerIncremental, params).Get(ctx, &r)
		}
		if err != nil {
			if isCanceled(ctx, err) && !applying {
				return cancelled("", "")
			}
			if isCanceled(ctx, err) {
				return cancelled(errcode.BrokerIncrementalPartial, "cancelled while applying incremental "+link.ID+"; run again to resume exactly once")
			}
			if st.failed(ctx, err) {
				return BrokerResult{Status: st}, err
			}
			continue // wait again, then retry from the position
		}
		if r.Replan {
			continue // the incremental changed since its cut: plan it again
		}
		st.LastError, st.LastErrorCode = "", ""
		if cut.Records != 0 {
			st.LastAppliedAt = workflow.Now(ctx)
		}
		st.ChangesApplied += r.Applied
		st.ChangesSkipped += r.Skipped
		st.Applying = ""
		if cut.Records < 0 {
			st.LastApplied, st.Inside = link.ID, ""
			st.LastAppliedCreatedAt = link.CreatedAt
			st.Incrementals++
		}
		st.noteObjects(ctx, in.Stream, link.ID, r.Objects)
		st.Unidentified += judged.Unidentified
		if judged.Unidentified > 0 {
			// Logged here, once the incremental is applied, rather than
			// by the judgment: a judgment repeated after a failed apply
			// or a retried activity does not log it again, and a replay
			// never logs.
			workflow.GetLogger(ctx).Warn("BROKER-UNIDENTIFIED-CHANGES: changes without apply identity re-applied without marks and converge by key",
				"stream", in.Stream, "incremental", link.ID, "count", judged.Unidentified)
		}
		st.LinksBehind = len(wait.Pending) - 1
		st.SecondsBehind = 0
		if len(wait.Pending) > 1 {
			st.SecondsBehind = workflow.Now(ctx).Sub(wait.Pending[1].CreatedAt).Seconds()
		}
		if in.Point.Active() {
			st.held(cut)
			if cut.Reached {
				st.Phase, st.Reached = "reached the point", true
				if cut.Records >= 0 {
					st.Inside = link.ID
				}
				return BrokerResult{Status: st}, nil
			}
			if cut.Records >= 0 {
				// The position stays inside the incremental; the next
				// wait holds the links until the delay lets them through.
				st.Phase, st.Inside = "delaying", link.ID
				st.LinksBehind = len(wait.Pending)
			}
		}
	}
}

// held records what a cut let through: the transactions on either side of
// it and, when the delay binds, when the next one comes due.
func (st *BrokerStatus) held(cut activities.BrokerCut) {
	if cut.Last != nil {
		st.LastTransaction = cut.Last
	}
	st.NextTransaction, st.HeldUntil = cut.Next, cut.HeldUntil
}

// isCanceled reports whether err comes from the workflow's own cancellation.
func isCanceled(ctx workflow.Context, err error) bool {
	var canceled *temporal.CanceledError
	return errors.As(err, &canceled) || ctx.Err() != nil
}

// failed records a failure; a refusal (which ends the run) also sets the
// phase and reports true.
func (st *BrokerStatus) failed(ctx workflow.Context, err error) (refused bool) {
	st.LastError, st.LastErrorCode, st.LastErrorAt = err.Error(), errorCode(err), workflow.Now(ctx)
	if isRefusal(err) {
		st.Phase = "refused"
		return true
	}
	return false
}

// Facts are the health facts the workflow itself knows: when it last polled,
// applied and failed. Its current activity's heartbeats carry fresher ones.
func (st BrokerStatus) Facts() health.Facts {
	// Links the delay holds back are not due: a delayed replica waiting
	// for them reads idle, not stalled.
	f := health.Facts{PolledAt: st.LastPollAt, DeliveredAt: st.LastAppliedAt,
		Pending: (st.LinksBehind > 0 && st.HeldUntil.IsZero()) || st.Applying != "", Paused: st.Phase == "paused"}
	f.ReportedAt = latestOf(st.LastPollAt, st.LastAppliedAt, st.LastErrorAt)
	if st.LastError != "" && !st.LastErrorAt.Before(f.ReportedAt) {
		f.FailCause, f.FailError = health.CauseOf(st.LastErrorCode), st.LastError
	}
	return f
}

// maxLanes is how many lanes the run's target takes (0: any): as the run
// was started with, or for runs started before it was recorded, as the
// target's driver says.
func (in BrokerInput) maxLanes() int {
	if in.MaxLanes > 0 {
		return in.MaxLanes
	}
	traits, err := target.TraitsOf(in.Target.Driver)
	if err != nil {
		return 0
	}
	return traits.MaxLanes
}
