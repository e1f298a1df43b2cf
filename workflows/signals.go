package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/health"
)

// SignalStop is the name of the signal that ends a loop between units of work.
const SignalStop = "stop"

// Signal is a signal's name bound to the type of its payload, so both are
// defined once: workflows read it, the CLI sends it, and
// `temporal workflow signal --name NAME --input JSON` sends the same JSON.
type Signal[T any] struct {
	// Name is the signal's name in Temporal.
	Name string
}

// Send signals the running workflow workflowID with v.
func (s Signal[T]) Send(ctx context.Context, c client.Client, workflowID string, v T) error {
	return c.SignalWorkflow(ctx, workflowID, "", s.Name, v)
}

// channel returns the workflow's channel of the signal.
func (s Signal[T]) channel(ctx workflow.Context) workflow.ReceiveChannel {
	return workflow.GetSignalChannel(ctx, s.Name)
}

// receiveAsync takes the next payload off c, skipping payloads that do not
// decode as T (the SDK logs them); ok is false once c holds none.
func (s Signal[T]) receiveAsync(c workflow.ReceiveChannel) (v T, ok bool) {
	ok = c.ReceiveAsync(&v)
	return v, ok
}

// The signals of the producer and broker loops besides stop.
var (
	// SignalPause pauses a producer or a broker after its current unit of
	// work (a window, an incremental): it then schedules nothing until
	// SignalResume or stop.
	SignalPause = Signal[PauseRequest]{Name: "pause"}
	// SignalResume ends a pause.
	SignalResume = Signal[ResumeRequest]{Name: "resume"}
	// SignalTune changes a running broker's apply concurrency and poll
	// interval from its next incremental and its next poll.
	SignalTune = Signal[TuneRequest]{Name: "tune"}
)

// PauseRequest is the payload of SignalPause. A bare JSON string is taken
// as the reason; no payload at all is a pause without one.
type PauseRequest struct {
	Reason string `json:"reason,omitempty"`
}

// UnmarshalJSON accepts {"reason": "..."} or "...".
func (r *PauseRequest) UnmarshalJSON(b []byte) error {
	return unmarshalReason(b, &r.Reason)
}

// ResumeRequest is the payload of SignalResume, read like PauseRequest.
type ResumeRequest struct {
	Reason string `json:"reason,omitempty"`
}

// UnmarshalJSON accepts {"reason": "..."} or "...".
func (r *ResumeRequest) UnmarshalJSON(b []byte) error {
	return unmarshalReason(b, &r.Reason)
}

func unmarshalReason(b []byte, reason *string) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, reason)
	}
	var v struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*reason = v.Reason
	return nil
}

// TuneRequest is the payload of SignalTune: the settings to change (a zero
// field keeps the value in force).
type TuneRequest struct {
	ApplyConcurrency int          `json:"apply_concurrency,omitempty"`
	PollInterval     dur.Duration `json:"poll_interval,omitempty"`
}

// The limits of a broker's --apply-concurrency and --poll-interval, checked
// when a run starts and again for every tune.
const (
	MaxApplyConcurrency = 64
	MinPollInterval     = 100 * time.Millisecond
	MaxPollInterval     = time.Hour
)

// CheckApplyConcurrency says what is wrong with n lanes for a target whose
// driver takes at most maxLanes (0: any).
func CheckApplyConcurrency(n, maxLanes int, driver string) error {
	switch {
	case n < 1 || n > MaxApplyConcurrency:
		return fmt.Errorf("--apply-concurrency %d: give 1 to %d", n, MaxApplyConcurrency)
	case maxLanes > 0 && n > maxLanes:
		return fmt.Errorf("--apply-concurrency %d: --target-driver %s takes one writer at a time; give --apply-concurrency %d", n, driver, maxLanes)
	}
	return nil
}

// CheckPollInterval says what is wrong with a poll interval.
func CheckPollInterval(d time.Duration) error {
	if d < MinPollInterval || d > MaxPollInterval {
		return fmt.Errorf("--poll-interval %s: give 100ms to 1h", d)
	}
	return nil
}

// Check says what is wrong with a tune of a broker whose target takes at
// most maxLanes lanes (0: any) and whose verdict thresholds are th: the
// limits `sync from-backup run` enforces, and the poll-stall threshold
// must stay at least twice the poll interval.
func (t TuneRequest) Check(maxLanes int, driver string, th health.Thresholds) error {
	if t.ApplyConcurrency == 0 && t.PollInterval == 0 {
		return fmt.Errorf("a tune changes --apply-concurrency, --poll-interval or both; it gave neither")
	}
	if t.ApplyConcurrency != 0 {
		if err := CheckApplyConcurrency(t.ApplyConcurrency, maxLanes, driver); err != nil {
			return err
		}
	}
	if t.PollInterval != 0 {
		if err := CheckPollInterval(t.PollInterval.D()); err != nil {
			return err
		}
		if err := th.Check(t.PollInterval.D()); err != nil {
			return err
		}
	}
	return nil
}

// PauseState says a run is paused, or pausing: finishing its current unit
// of work before it waits.
type PauseState struct {
	// RequestedAt is when the pause signal came (workflow time).
	RequestedAt time.Time `json:"requested_at"`
	// Since is when the run stopped scheduling work; zero while it still
	// finishes the unit it had begun.
	Since  time.Time `json:"since,omitzero"`
	Reason string    `json:"reason,omitempty"`
	// Cost says what the pause costs while it lasts (a paused producer's
	// source keeps the log from the chain's position).
	Cost string `json:"cost,omitempty"`
}

// TuneOutcome is what became of the last tune signal.
type TuneOutcome struct {
	At        time.Time   `json:"at"`
	Requested TuneRequest `json:"requested"`
	// Refused says why the tune was ignored; empty when it took effect.
	Refused string `json:"refused,omitempty"`
}

// controls receives the pause, resume and tune signals of a loop in a
// workflow goroutine of its own, so the status shows them as soon as they
// come, even while an activity runs. The loop reads the state they set
// between units of work; receiving them schedules nothing.
type controls struct {
	pause, resume, tune workflow.ReceiveChannel
	onPause             func(PauseRequest)
	onResume            func(ResumeRequest)
	onTune              func(TuneRequest)
}

// handleControls starts the goroutine that hands each signal to its
// handler, in the order the goroutine receives them.
func handleControls(ctx workflow.Context, onPause func(PauseRequest), onResume func(ResumeRequest), onTune func(TuneRequest)) *controls {
	c := &controls{
		pause: SignalPause.channel(ctx), resume: SignalResume.channel(ctx), tune: SignalTune.channel(ctx),
		onPause: onPause, onResume: onResume, onTune: onTune,
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(c.pause, func(ch workflow.ReceiveChannel, _ bool) { c.takePause(ch) })
		sel.AddReceive(c.resume, func(ch workflow.ReceiveChannel, _ bool) { c.takeResume(ch) })
		sel.AddReceive(c.tune, func(ch workflow.ReceiveChannel, _ bool) { c.takeTune(ch) })
		for {
			sel.Select(ctx)
		}
	})
	return c
}

func (c *controls) takePause(ch workflow.ReceiveChannel) {
	if r, ok := SignalPause.receiveAsync(ch); ok {
		c.onPause(r)
	}
}

func (c *controls) takeResume(ch workflow.ReceiveChannel) {
	if r, ok := SignalResume.receiveAsync(ch); ok {
		c.onResume(r)
	}
}

func (c *controls) takeTune(ch workflow.ReceiveChannel) {
	if r, ok := SignalTune.receiveAsync(ch); ok {
		c.onTune(r)
	}
}

// drain hands over the signals that came but were not received yet, so a
// continue-as-new carries their effect.
func (c *controls) drain() {
	for c.pause.Len() > 0 || c.resume.Len() > 0 || c.tune.Len() > 0 {
		if c.pause.Len() > 0 {
			c.takePause(c.pause)
		}
		if c.resume.Len() > 0 {
			c.takeResume(c.resume)
		}
		if c.tune.Len() > 0 {
			c.takeTune(c.tune)
		}
	}
}

// pauseHandlers returns the pause and resume handlers of a loop whose
// pause state is *p: a pause records when and why (a second one updates
// the reason), a resume clears it.
func pauseHandlers(ctx workflow.Context, p **PauseState, role, name, cost string) (func(PauseRequest), func(ResumeRequest)) {
	onPause := func(r PauseRequest) {
		if *p == nil {
			*p = &PauseState{RequestedAt: workflow.Now(ctx), Cost: cost}
		}
		(*p).Reason = r.Reason
		workflow.GetLogger(ctx).Info("pause requested: the run pauses after its current unit of work", role, name, "reason", r.Reason)
	}
	onResume := func(r ResumeRequest) {
		if *p == nil {
			return
		}
		*p = nil
		workflow.GetLogger(ctx).Info("resumed", role, name, "reason", r.Reason)
	}
	return onPause, onResume
}

// waitWhilePaused waits, scheduling nothing, until the pause *p is
// resumed or a stop signal is pending on stopCh; phase is set to "paused"
// meanwhile. It reports whether it waited at all.
func waitWhilePaused(ctx workflow.Context, p **PauseState, phase *string, stopCh workflow.ReceiveChannel) (bool, error) {
	if *p == nil {
		return false, nil
	}
	if (*p).Since.IsZero() {
		(*p).Since = workflow.Now(ctx)
	}
	*phase = "paused"
	err := workflow.Await(ctx, func() bool { return *p == nil || stopCh.Len() > 0 })
	return true, err
}
