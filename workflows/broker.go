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
	b, err := startBroker(ctx, in)
	if err != nil {
		return BrokerResult{}, err
	}
	if in.State == nil && b.prepare(ctx) == stepEnd {
		return b.res, b.err
	}
	for {
		if b.turn(ctx) == stepEnd {
			return b.res, b.err
		}
	}
}

// brokerStep says where a broker run goes after a step of its loop.
type brokerStep int

const (
	// stepOn goes on with the current turn.
	stepOn brokerStep = iota
	// stepNextTurn ends the turn: the loop starts the next one, which
	// looks at stop and pause again before it waits.
	stepNextTurn
	// stepEnd ends the run with brokerRun.res and brokerRun.err.
	stepEnd
)

// brokerRun is one run of BrokerWorkflow (up to its continue-as-new): its
// input, as tune signals change it, the status the query returns, and the
// signal channels and handlers it listens to.
type brokerRun struct {
	in     BrokerInput
	st     BrokerStatus
	stopCh workflow.ReceiveChannel
	ctl    *controls
	// interrupt cancels the wait for new links under way, if any: a pause
	// need not wait for it, as nothing of it is work done.
	interrupt func()
	// res and err are what the run returns once a step says stepEnd.
	res BrokerResult
	err error
}

// startBroker sets up a run: its status (carried over a continue-as-new,
// or new), the status query, and the handlers of the stop, pause, resume
// and tune signals. It schedules nothing.
func startBroker(ctx workflow.Context, in BrokerInput) (*brokerRun, error) {
	b := &brokerRun{in: in, st: BrokerStatus{Stream: in.Stream, Phase: "starting"}}
	if in.State != nil {
		b.st = *in.State
	} else {
		b.st.StartedAt = workflow.Now(ctx)
	}
	b.st.Thresholds = in.Health.WithDefaults()
	b.st.Subset = ""
	if !in.Subset.IsZero() {
		b.st.Subset = in.Subset.String()
	}
	b.st.Until, b.st.ApplyDelaySeconds = in.Point.String(), in.Point.ApplyDelay.Seconds()
	b.st.ApplyConcurrency, b.st.PollInterval = in.Concurrency, in.PollInterval
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (BrokerStatus, error) {
		return b.st, nil
	}); err != nil {
		return nil, err
	}
	b.stopCh = workflow.GetSignalChannel(ctx, SignalStop)
	onPause, onResume := pauseHandlers(ctx, &b.st.Paused, "stream", in.Stream, "")
	b.ctl = handleControls(ctx, func(r PauseRequest) {
		onPause(r)
		if b.interrupt != nil {
			b.interrupt()
			b.interrupt = nil
		}
	}, onResume, func(t TuneRequest) { b.tune(ctx, t) })
	return b, nil
}

// tune handles a tune signal: a tune the checks refuse is logged and
// recorded, one they accept changes the settings the next incremental and
// the next wait read.
func (b *brokerRun) tune(ctx workflow.Context, t TuneRequest) {
	out := TuneOutcome{At: workflow.Now(ctx), Requested: t}
	if err := t.Check(b.in.maxLanes(), b.in.Target.Driver, b.st.Thresholds); err != nil {
		out.Refused = err.Error()
		workflow.GetLogger(ctx).Warn("BROKER-TUNE-REFUSED: the tune signal was ignored; the run goes on with the settings in force",
			"stream", b.in.Stream, "reason", out.Refused, "apply_concurrency", b.in.Concurrency, "poll_interval", b.in.PollInterval.String())
	} else {
		if t.ApplyConcurrency != 0 {
			b.in.Concurrency = t.ApplyConcurrency
		}
		if t.PollInterval != 0 {
			b.in.PollInterval = t.PollInterval
		}
		b.st.ApplyConcurrency, b.st.PollInterval = b.in.Concurrency, b.in.PollInterval
		workflow.GetLogger(ctx).Info("tuned", "stream", b.in.Stream, "apply_concurrency", b.in.Concurrency, "poll_interval", b.in.PollInterval.String())
	}
	b.st.LastTune = &out
}

// stopped takes the stop signals that came and reports whether a stop was
// asked (by a signal or by the store's stop marker).
func (b *brokerRun) stopped() bool {
	for b.stopCh.ReceiveAsync(nil) {
		b.st.StopRequested = true
	}
	return b.st.StopRequested
}

// endWith ends the run with its status and err.
func (b *brokerRun) endWith(err error) brokerStep {
	b.res, b.err = BrokerResult{Status: b.st}, err
	return stepEnd
}

// cancelled ends the run after a cancellation: cleanly between units of
// work (no code), with the given code inside one.
func (b *brokerRun) cancelled(code errcode.Code, msg string) brokerStep {
	b.st.Phase = "cancelled"
	if code == "" {
		return b.endWith(nil)
	}
	return b.endWith(temporal.NewNonRetryableApplicationError(string(code)+": "+msg, string(code), nil))
}

// failure handles a step's failure: a cancellation or a refusal ends the
// run, anything else is recorded and the next turn tries again from the
// position.
func (b *brokerRun) failure(ctx workflow.Context, err error) brokerStep {
	if isCanceled(ctx, err) {
		return b.cancelled("", "")
	}
	if b.st.failed(ctx, err) {
		return b.endWith(err)
	}
	return stepNextTurn
}

// prepare is the start of a new run (not of a continue-as-new): it checks
// the target, chooses the start mode and, in reset mode, cold-starts.
func (b *brokerRun) prepare(ctx workflow.Context) brokerStep {
	var start activities.BrokerStart
	err := workflow.ExecuteActivity(shortActivity(ctx, "check the target and choose the start mode"), a.PrepareBroker,
		activities.BrokerStartParams{BrokerParams: b.in.BrokerParams, Reset: b.in.Reset, AtChainID: b.in.AtChainID, Point: b.in.Point}).Get(ctx, &start)
	if err != nil {
		if isCanceled(ctx, err) {
			return b.cancelled("", "")
		}
		return b.endWith(err)
	}
	b.st.Mode, b.st.ChainID, b.st.LastApplied = start.Mode, start.ChainID, start.LastApplied
	if start.Mode != activities.ModeReset {
		return stepOn
	}
	return b.coldStart(ctx, start)
}

// coldStart restores the chain through start.Tail in a child
// RestoreWorkflow, then writes the broker's position there. Once it has
// begun, an interruption or a failure leaves a partial restore and no
// position, and ends the run with BROKER-COLD-START-PARTIAL (or
// CHAIN-SCHEMA-REFUSED when the chain's schema is refused).
func (b *brokerRun) coldStart(ctx workflow.Context, start activities.BrokerStart) brokerStep {
	b.st.Phase = "cold start: restoring the chain"
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID + "/reset-" + workflow.GetInfo(ctx).WorkflowExecution.RunID[:8],
	})
	var rr RestoreResult
	err := workflow.ExecuteChildWorkflow(cctx, RestoreWorkflow, RestoreInput{
		Store: b.in.Store, Target: b.in.Target, Parallel: 2, Replace: true, Through: start.Tail, Subset: b.in.Subset, Objects: b.in.Objects,
		ApplyConcurrency: b.in.Concurrency,
	}).Get(ctx, &rr)
	if err == nil {
		err = workflow.ExecuteActivity(shortActivity(ctx, "write the position"), a.InitBrokerPosition, activities.InitPositionParams{
			BrokerParams: b.in.BrokerParams, ChainID: start.ChainID, LastApplied: start.Tail,
		}).Get(ctx, nil)
	}
	if err != nil {
		if isCanceled(ctx, err) {
			return b.cancelled(errcode.BrokerColdStartPartial, "the cold start was interrupted after its drop began; the target holds a partial restore and no position")
		}
		b.st.failed(ctx, err)
		b.st.Phase = "failed"
		if errorCode(err) == string(errcode.ChainSchemaRefused) {
			// The chain itself is refused (docs/security.md): another
			// cold start would meet the same schema, so say that, not
			// "run again".
			return b.endWith(temporal.NewNonRetryableApplicationError(
				string(errcode.ChainSchemaRefused)+": the cold start refused the chain's recorded schema (the target may hold a partial restore and no position): "+err.Error(),
				string(errcode.ChainSchemaRefused), err))
		}
		return b.endWith(temporal.NewNonRetryableApplicationError(
			string(errcode.BrokerColdStartPartial)+": the cold start failed after its drop began: "+err.Error(), string(errcode.BrokerColdStartPartial), err))
	}
	b.st.LastApplied = start.Tail
	b.st.noteObjects(ctx, b.in.Stream, "cold start", rr.Objects)
	return stepOn
}

// turn is one turn of the loop: it ends the run on a stop, waits out a
// pause, continues as new when the history asks for it, and otherwise
// waits for new links, checks the chain and applies the oldest pending
// incremental.
func (b *brokerRun) turn(ctx workflow.Context) brokerStep {
	if b.stopped() {
		b.st.Phase = "stopped"
		return b.endWith(nil)
	}
	if waited, err := waitWhilePaused(ctx, &b.st.Paused, &b.st.Phase, b.stopCh); err != nil {
		return b.cancelled("", "")
	} else if waited {
		return stepNextTurn // resumed, or a stop is pending: look again
	}
	if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
		return b.continueAsNew(ctx)
	}
	wait, now, cutShort, err := b.waitForLinks(ctx)
	if cutShort {
		// A stop or a pause cut the wait short (the pause may have been
		// resumed since): nothing of it is used; the next turn waits again.
		return stepNextTurn
	}
	if err != nil {
		if s := b.failure(ctx, err); s != stepNextTurn {
			return s
		}
		if serr := workflow.Sleep(ctx, 10*time.Second); serr != nil {
			return b.cancelled("", "")
		}
		return stepNextTurn
	}
	if wait.Stop {
		b.st.StopRequested = true
		return stepNextTurn
	}
	if len(wait.Pending) == 0 {
		// An idle tick: the chain holds nothing past the position,
		// or nothing the delay lets through yet.
		b.st.LinksBehind, b.st.SecondsBehind = wait.Held, 0
		if workflow.GetVersion(ctx, versionIdleTick, workflow.DefaultVersion, 1) == 1 {
			return stepNextTurn
		}
	}
	if s := b.checkChain(ctx); s != stepOn {
		return s
	}
	b.st.behind(wait.Pending, now)
	if len(wait.Pending) == 0 || b.stopped() || b.st.Paused != nil {
		return stepNextTurn
	}
	return b.applyNext(ctx, wait.Pending)
}

// continueAsNew ends the run with a continue-as-new that carries the
// status, the settings in force and the effect of the signals not yet
// received.
func (b *brokerRun) continueAsNew(ctx workflow.Context) brokerStep {
	b.ctl.drain()
	next := b.in
	s := b.st
	next.State, next.Reset, next.AtChainID = &s, false, ""
	b.res, b.err = BrokerResult{}, workflow.NewContinueAsNewError(ctx, BrokerWorkflow, next)
	return stepEnd
}

// waitForLinks runs one wait for links past the position, which a stop
// signal or a pause cuts short (cutShort), and returns what it found and
// when it ended.
func (b *brokerRun) waitForLinks(ctx workflow.Context) (wait activities.WaitResult, now time.Time, cutShort bool, err error) {
	maxWait := b.in.MaxWait
	if maxWait <= 0 {
		maxWait = dur.Duration(DefaultBrokerMaxWait)
	}
	b.st.Phase, b.st.Applying = "waiting", ""
	wctx, cancelWait := workflow.WithCancel(ctx)
	fut := workflow.ExecuteActivity(waitActivity(wctx), a.WaitForLinks, activities.WaitParams{
		BrokerParams: b.in.BrokerParams, After: b.st.LastApplied, PollInterval: b.in.PollInterval,
		MaxWait: maxWait, StopAfter: b.st.StartedAt, HeldUntil: b.st.HeldUntil,
	})
	sel := workflow.NewSelector(ctx)
	done := false
	sel.AddFuture(fut, func(f workflow.Future) { err = f.Get(ctx, &wait); done = true })
	sel.AddReceive(b.stopCh, func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		b.st.StopRequested = true
		cancelWait()
	})
	interrupted := false
	b.interrupt = func() { interrupted = true; cancelWait() }
	for !done {
		sel.Select(ctx)
	}
	b.interrupt = nil
	cancelWait()
	now = workflow.Now(ctx)
	b.st.LastPollAt = now
	return wait, now, b.st.StopRequested || interrupted, err
}

// checkChain checks the whole chain for severed transactions before
// anything of this turn is applied, and logs the findings in links
// already applied.
func (b *brokerRun) checkChain(ctx workflow.Context) brokerStep {
	b.st.Phase = "checking the chain"
	var checked activities.CheckChainResult
	if err := workflow.ExecuteActivity(shortActivity(ctx, "severed-transaction check"), a.CheckChainForBroker, activities.CheckChainParams{
		BrokerParams: b.in.BrokerParams, After: b.st.LastApplied, Warned: b.st.WarnedSevered,
	}).Get(ctx, &checked); err != nil {
		return b.failure(ctx, err)
	}
	for _, f := range checked.Applied {
		// Logged by the workflow, so a retried check or a replay
		// never logs a finding twice in a run.
		workflow.GetLogger(ctx).Warn("CHAIN-APPLIED-SEVERED-TRANSACTION: a link already applied carries a severed transaction; compare the tables those links touched with the source, or rebuild the target from a new full",
			"stream", b.in.Stream, "links", strings.Join(f.Links, ","), "shape", f.Shape, "finding", f.Key)
		b.st.WarnedSevered = append(b.st.WarnedSevered, f.Key)
	}
	return stepOn
}

// behind records the lag of the links pending at now: how many, and the
// age of the oldest.
func (st *BrokerStatus) behind(pending []activities.PendingLink, now time.Time) {
	st.LinksBehind = len(pending)
	st.SecondsBehind = 0
	if len(pending) > 0 {
		st.SecondsBehind = now.Sub(pending[0].CreatedAt).Seconds()
	}
}

// applyNext applies the oldest of the pending links, or as much of it as
// the point and the delay let through. One incremental per turn: the next
// turn reads the catalog and the store's stop marker again, so a stop is
// observed between incrementals even while the broker is far behind.
func (b *brokerRun) applyNext(ctx workflow.Context, pending []activities.PendingLink) brokerStep {
	link := pending[0]
	cut, s := b.planCut(ctx, link)
	if s != stepOn {
		return s
	}
	judged, r, s := b.judgeAndApply(ctx, link, cut)
	if s != stepOn {
		return s
	}
	return b.applied(ctx, pending, link, cut, judged, r)
}

// planCut finds how much of link the run's point and delay let through
// now; without either, the whole of it (Records -1).
func (b *brokerRun) planCut(ctx workflow.Context, link activities.PendingLink) (activities.BrokerCut, brokerStep) {
	cut := activities.BrokerCut{Records: -1}
	if !b.in.Point.Active() {
		return cut, stepOn
	}
	b.st.Phase, b.st.Applying = "finding the point", link.ID
	if err := workflow.ExecuteActivity(shortActivity(ctx, "find the point in incremental "+link.ID), a.PlanBrokerCut,
		activities.BrokerCutParams{BrokerParams: b.in.BrokerParams, Link: link, Point: b.in.Point}).Get(ctx, &cut); err != nil {
		return cut, b.failure(ctx, err)
	}
	return cut, stepOn
}

// judgeAndApply judges the keys of link's changes, then applies them (up
// to the cut), unless the cut lets nothing through. A cancellation while
// applying ends the run with BROKER-INCREMENTAL-PARTIAL; an incremental
// that changed since its cut is planned again on the next turn.
func (b *brokerRun) judgeAndApply(ctx workflow.Context, link activities.PendingLink, cut activities.BrokerCut) (activities.JudgeResult, activities.BrokerApplyResult, brokerStep) {
	b.st.Phase, b.st.Applying = "judging", link.ID
	params := activities.BrokerApplyParams{BrokerParams: b.in.BrokerParams, Link: link, Concurrency: b.in.Concurrency,
		StopAt: max(cut.Records, 0), StopDigest: cut.Digest}
	var judged activities.JudgeResult
	var r activities.BrokerApplyResult
	var err error
	applying := false
	if cut.Records != 0 {
		err = workflow.ExecuteActivity(shortActivity(ctx, "judge incremental "+link.ID), a.JudgeBrokerIncremental, params).Get(ctx, &judged)
	}
	if err == nil && cut.Records != 0 {
		b.st.Phase, applying = "applying", true
		// The inserts arbitrate on exactly the keys the judgment found.
		params.Arbiters = judged.Arbiters
		err = workflow.ExecuteActivity(brokerApplyActivity(ctx, link.ID), a.ApplyBrokerIncremental, params).Get(ctx, &r)
	}
	if err != nil {
		if applying && isCanceled(ctx, err) {
			return judged, r, b.cancelled(errcode.BrokerIncrementalPartial, "cancelled while applying incremental "+link.ID+"; run again to resume exactly once")
		}
		return judged, r, b.failure(ctx, err) // a failure waits again, then retries from the position
	}
	if r.Replan {
		return judged, r, stepNextTurn // the incremental changed since its cut: plan it again
	}
	return judged, r, stepOn
}

// applied records an applied link (or the part of it the cut let through)
// in the status, and ends the run once the point is reached.
func (b *brokerRun) applied(ctx workflow.Context, pending []activities.PendingLink, link activities.PendingLink, cut activities.BrokerCut,
	judged activities.JudgeResult, r activities.BrokerApplyResult) brokerStep {
	st := &b.st
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
	st.noteObjects(ctx, b.in.Stream, link.ID, r.Objects)
	st.Unidentified += judged.Unidentified
	if judged.Unidentified > 0 {
		// Logged here, once the incremental is applied, rather than
		// by the judgment: a judgment repeated after a failed apply
		// or a retried activity does not log it again, and a replay
		// never logs.
		workflow.GetLogger(ctx).Warn("BROKER-UNIDENTIFIED-CHANGES: changes without apply identity re-applied without marks and converge by key",
			"stream", b.in.Stream, "incremental", link.ID, "count", judged.Unidentified)
	}
	st.behind(pending[1:], workflow.Now(ctx))
	if !b.in.Point.Active() {
		return stepNextTurn
	}
	st.held(cut)
	if cut.Reached {
		st.Phase, st.Reached = "reached the point", true
		if cut.Records >= 0 {
			st.Inside = link.ID
		}
		return b.endWith(nil)
	}
	if cut.Records >= 0 {
		// The position stays inside the incremental; the next
		// wait holds the links until the delay lets them through.
		st.Phase, st.Inside = "delaying", link.ID
		st.LinksBehind = len(pending)
	}
	return stepNextTurn
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
