package activities

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/producer"
	"github.com/sluicehq/sluice/internal/source"
)

// ProducerParams name a chain and its source.
type ProducerParams struct {
	Store  StoreRef           `json:"store"`
	Source credentials.DSNRef `json:"source"`
	// Publication is read from runs recorded before source options existed
	// and never written: new runs carry it in Source.Options
	// (OptionPublication).
	Publication string `json:"publication,omitempty"`
	// Parallel is how many tables a rotation's full copies at once.
	Parallel int `json:"parallel,omitempty"`
	// Health holds the run's verdict thresholds (zero: the defaults).
	Health health.Thresholds `json:"health,omitzero"`
	// Owner names the workflow run that reads the chain slot (a streaming
	// producer, across continue-as-new, and its rotations share it). A
	// connection of the same owner still holding the slot is a dead
	// attempt's, which a new attempt may end; any other holder is refused
	// (SLUICE-E-SOURCE-READER-IN-USE).
	Owner string `json:"owner,omitempty"`
	// Filter is what the run lets cross into the chain (issue 29); a
	// window under other filters than its segment's is refused, a
	// rotation writes its new full under these.
	Filter filter.Spec `json:"filter,omitzero"`
}

// WindowParams bound one capture window.
type WindowParams struct {
	ProducerParams
	// Rollover ends the window at the first transaction boundary after it.
	Rollover dur.Duration `json:"rollover"`
	// MaxChanges and MaxBytes end it early at a transaction boundary.
	MaxChanges int64 `json:"max_changes,omitempty"`
	MaxBytes   int64 `json:"max_bytes,omitempty"`
	// Idle returns an empty window after this long without a transaction.
	Idle dur.Duration `json:"idle,omitempty"`
	// UpToNow captures up to the source's position at the window's start
	// (a one-shot incremental) instead of for Rollover.
	UpToNow bool `json:"up_to_now,omitempty"`
	// StopAfter is when the run started: a stop marker written after it
	// ends the window at its next transaction boundary.
	StopAfter time.Time `json:"stop_after,omitempty"`
}

// WindowResult is a committed (or empty) window and whether a stop was asked.
type WindowResult struct {
	producer.Result
	// Stopped is true when a stop marker ended the window.
	Stopped bool `json:"stopped,omitempty"`
}

// producerOptions opens the chain and its source; the caller closes
// Options.Source.
func (a *Activities) producerOptions(ctx context.Context, p ProducerParams) (*chain.Chain, producer.Options, error) {
	flt, err := filter.Compile(p.Filter, os.LookupEnv)
	if err != nil {
		return nil, producer.Options{}, err
	}
	src, err := openSource(ctx, p.Source, map[string]string{OptionPublication: p.Publication})
	if err != nil {
		return nil, producer.Options{}, err
	}
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		src.Close()
		return nil, producer.Options{}, err
	}
	info := activity.GetInfo(ctx)
	return ch, producer.Options{
		Source: src,
		Owner:  p.Owner,
		OnTakeOver: func(pid int64) {
			activity.GetLogger(ctx).Warn("SLOT-TAKEN-OVER: ended an earlier connection of this producer that still held the chain slot (it died where the source had not noticed yet)",
				"store", p.Store.URL, "pid", pid)
		},
		Parallel:  p.Parallel,
		AttemptID: fmt.Sprintf("%s-%s-%d", info.WorkflowExecution.RunID, info.ActivityID, info.Attempt),
		Catalogs:  &a.catalogs,
		// A session a stream parked on this worker is closed before any
		// other step on its chain opens one (producer.Sessions).
		Sessions:   &a.sessions,
		Stream:     info.WorkflowExecution.ID,
		Filter:     flt,
		MaskKeyEnv: p.Filter.MaskKeyEnv,
	}, nil
}

// stopPoller returns a cheap check for the producer's stop marker: it reads
// the store at most every two seconds.
func stopPoller(ctx context.Context, ch *chain.Chain, after time.Time) (poll func() bool, stopped func() bool) {
	var mu sync.Mutex
	var last time.Time
	seen := false
	poll = func() bool {
		mu.Lock()
		defer mu.Unlock()
		if seen {
			return true
		}
		if time.Since(last) < 2*time.Second {
			return false
		}
		last = time.Now()
		m, ok, err := ch.GetStopMarker(ctx, chain.RoleProducer, "")
		if err == nil && ok && !m.RequestedAt.Before(after) {
			seen = true
		}
		return seen
	}
	return poll, func() bool { mu.Lock(); defer mu.Unlock(); return seen }
}

// CaptureWindow captures one window from the chain's tip and commits it. A
// retry resumes from whatever the catalog names, so a window is never
// committed twice and nothing is skipped.
func (a *Activities) CaptureWindow(ctx context.Context, p WindowParams) (WindowResult, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	defer a.Health.Running(producerKey(p.Store))()
	ch, o, err := a.producerOptions(ctx, p.ProducerParams)
	if err != nil {
		return WindowResult{}, a.temporalError(err)
	}
	defer o.Source.Close()
	k := producerKey(p.Store)
	a.Health.Configure(k, p.Health)
	a.Health.Polled(k, false)
	stopPoll, stopped := stopPoller(ctx, ch, p.StopAfter)
	// The capture loop's turns are its polls; it asks for the stop marker
	// between transactions.
	tick := func() { a.Health.Polled(k, false) }
	slot := func(s source.LogHealth) { a.Health.Slot(k, s.RetainedBytes, s.WalStatus) }
	identity := a.identityReporter(ctx, k, p.Store.URL)
	hb.report(func() any { return a.runDetails(k, p.Health, map[string]any{"stopping": stopped()}) })
	// A keepalive with nothing held is a poll that ended well: a failure of
	// an earlier attempt (a slot left unconfirmed, a source that did not
	// answer) no longer holds, though a quiet source delivers nothing.
	drained := func() { a.Health.Succeeded(k) }
	lim := source.Limits{Duration: p.Rollover.D(), Changes: p.MaxChanges, Bytes: p.MaxBytes, Idle: p.Idle.D(), Stop: stopPoll, Tick: tick, Drained: drained, Log: slot, Tables: identity}
	if p.UpToNow {
		lim = source.Limits{Until: "now", Idle: p.Idle.D(), Tick: tick, Tables: identity}
	} else {
		// A stream's next window resumes this one's session on this
		// worker, rather than reading the log again from the slot's
		// restart point.
		o.KeepSession = true
	}
	res, err := producer.Window(ctx, ch, o, lim)
	if err != nil {
		a.failed(k, err)
		return WindowResult{}, a.temporalError(err)
	}
	if stopped() {
		// The run ends: free the log now, not when the session expires.
		a.sessions.Drop(p.Owner)
	}
	if res.Committed {
		a.Health.Delivered(k)
		a.Health.Counted(k, res.Changes)
	} else {
		a.Health.Succeeded(k)
	}
	a.Health.Slot(k, res.Slot.RetainedBytes, res.Slot.WalStatus)
	if stopped() || p.UpToNow {
		// The run ends here (a stop, or a one-shot incremental): it leaves
		// the worker's runs rather than turning not_running.
		a.Health.Ended(k)
	}
	return WindowResult{Result: res, Stopped: stopped()}, nil
}

// RotateSegment closes the tip segment at a new full's anchor and starts a
// new segment with that full, in one catalog write.
func (a *Activities) RotateSegment(ctx context.Context, p ProducerParams) (producer.Result, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	defer a.Health.Running(producerKey(p.Store))()
	ch, o, err := a.producerOptions(ctx, p)
	if err != nil {
		return producer.Result{}, a.temporalError(err)
	}
	defer o.Source.Close()
	// A rotation copies a whole new full; while it heartbeats, the producer
	// counts as polling, not as a loop that stopped turning.
	k := producerKey(p.Store)
	a.Health.Configure(k, p.Health)
	hb.report(func() any {
		a.Health.Polled(k, false)
		return a.runDetails(k, p.Health, map[string]any{"rotating": true})
	})
	res, err := producer.Rotate(ctx, ch, o)
	if err != nil {
		a.failed(k, err)
		return res, a.temporalError(err)
	}
	a.Health.Delivered(k)
	return res, nil
}

// RequestProducerStop writes the producer's stop marker into the store.
func (a *Activities) RequestProducerStop(ctx context.Context, store StoreRef) error {
	defer a.heartbeat(ctx, nil).stop()
	ch, err := a.openChain(ctx, store)
	if err != nil {
		return a.temporalError(err)
	}
	return a.temporalError(ch.PutStopMarker(ctx, chain.RoleProducer, "", chain.StopMarker{RequestedAt: time.Now(), By: "stop signal"}))
}
