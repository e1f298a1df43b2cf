package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/ddlcheck"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/target"
)

// BrokerParams name a broker stream: its chain, its target and its ID.
type BrokerParams struct {
	Store  StoreRef           `json:"store"`
	Target credentials.DSNRef `json:"target"`
	Stream string             `json:"stream"`
	// Health holds the run's verdict thresholds (zero: the defaults).
	Health health.Thresholds `json:"health,omitzero"`
	// Subset is the part of the chain's tables the stream applies
	// (--include-table, --exclude-table; zero: every table). The stream's
	// position records it, and a run asking for another is refused.
	Subset target.Subset `json:"subset,omitzero"`
	// Objects say whether the stream runs the chain's recorded schema
	// objects (--trust-store-objects, --skip-missing-roles).
	Objects ObjectsParams `json:"objects,omitzero"`
}

// BrokerStartParams choose the start mode.
type BrokerStartParams struct {
	BrokerParams
	Reset     bool   `json:"reset,omitempty"`
	AtChainID string `json:"at_chain_id,omitempty"`
	// Point is the run's --until, checked before anything is written: a
	// position already past it is refused, and a cold start restores no
	// further than it.
	Point BrokerPoint `json:"point,omitzero"`
}

// Start modes.
const (
	ModeWarm      = "warm-resume"
	ModeAtChainID = "at-chain-id"
	ModeReset     = "reset-target-data"
)

// BrokerStart is where a broker run begins.
type BrokerStart struct {
	Mode        string `json:"mode"`
	ChainID     string `json:"chain_id"`
	LastApplied string `json:"last_applied,omitempty"`
	InProgress  string `json:"in_progress,omitempty"`
	// Tail is the link a reset restores through.
	Tail string `json:"tail,omitempty"`
}

// chainAndTarget opens the chain and the target (its password reference is
// read here, in the worker); the caller closes the target.
func (a *Activities) chainAndTarget(ctx context.Context, store StoreRef, ref credentials.DSNRef) (*chain.Chain, target.Target, error) {
	ch, err := a.openChain(ctx, store)
	if err != nil {
		return nil, nil, err
	}
	t, err := openTarget(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	return ch, t, nil
}

// PrepareBroker decides the start mode from the target's stored position and
// the flags, refusing before anything is written when the combination is
// unsafe. A reset clears the stream's position and marks here, after its
// checks; the restore that follows is a child workflow.
func (a *Activities) PrepareBroker(ctx context.Context, p BrokerStartParams) (BrokerStart, error) {
	defer a.heartbeat(ctx, nil).stop()
	res, err := a.prepareBroker(ctx, p)
	return res, a.temporalError(err)
}

func (a *Activities) prepareBroker(ctx context.Context, p BrokerStartParams) (BrokerStart, error) {
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return BrokerStart{}, err
	}
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return BrokerStart{}, err
	}
	if err := chain.ValidateCatalog(cat); err != nil {
		return BrokerStart{}, err
	}
	tgt, err := openTarget(ctx, p.Target)
	if err != nil {
		return BrokerStart{}, err
	}
	defer tgt.Close(context.Background())
	st := tgt.State()
	// Nothing is written before the mode is decided: a refusal leaves the
	// target as it was.
	row, found, err := st.ReadState(ctx, p.Stream)
	if err != nil {
		return BrokerStart{}, err
	}
	ensure := func() error { return st.EnsureControlTables(ctx) }
	var tok apply.Token
	var decodeErr error
	if found {
		tok, decodeErr = apply.Decode(row.Token, row.Checksum)
		if errors.Is(decodeErr, apply.ErrForeign) {
			return BrokerStart{}, positionUnreadable(p.Stream, decodeErr)
		}
	}
	if p.Reset {
		// Checks first: the chain verifies through its tail. Only then is
		// the position (damaged or not) cleared.
		if err := ch.Verify(ctx, cat, ""); err != nil {
			return BrokerStart{}, err
		}
		if findings, err := ch.SeveredTransactions(ctx, cat, a.severCache()); err != nil {
			return BrokerStart{}, err
		} else if len(findings) > 0 {
			return BrokerStart{}, findings[0].Err()
		}
		schema, err := ch.SchemaAt(ctx, cat, cat.Tip().ID)
		if err != nil {
			return BrokerStart{}, err
		}
		// A schema the readers would refuse is refused here, before the
		// drop, so the target keeps what it held.
		if err := ddlcheck.Check(schema); err != nil {
			return BrokerStart{}, err
		}
		// The reset drops and restores only the tables of the subset.
		sel, err := p.Subset.Select(schema)
		if err != nil {
			return BrokerStart{}, err
		}
		taken, _ := sel.Schema(schema)
		if err := tgt.JudgeColdStart(ctx, taken); err != nil {
			return BrokerStart{}, err
		}
		tail, err := coldStartTail(ctx, ch, cat, p.Point)
		if err != nil {
			return BrokerStart{}, err
		}
		if err := ensure(); err != nil {
			return BrokerStart{}, err
		}
		if err := st.ReplaceState(ctx, p.Stream, nil); err != nil {
			return BrokerStart{}, fmt.Errorf("reset stream %s: %w", p.Stream, err)
		}
		// The restore that follows needs the tail's segment until it ends.
		a.reportPosition(ctx, ch, p.Stream, cat.ChainID, tail)
		return BrokerStart{Mode: ModeReset, ChainID: cat.ChainID, Tail: tail}, nil
	}
	if found && decodeErr != nil {
		return BrokerStart{}, positionUnreadable(p.Stream, decodeErr)
	}
	if found && decodeErr == nil {
		// Before anything else: a store that lost what this target
		// verified is refused whatever the flags ask.
		if err := apply.CheckNotRolledBack(p.Stream, tok.Verified, cat.Generation, cat.StoredHash()); err != nil {
			return BrokerStart{}, err
		}
	}
	if found && tok.ChainID != cat.ChainID {
		return BrokerStart{}, chainMismatch(p.Stream, tok.ChainID, p.Store.URL, cat.ChainID)
	}
	if found && !tok.Subset.Equal(p.Subset) {
		// A table newly taken would lack its history, one newly left out
		// would go stale: only a reset changes a stream's subset.
		return BrokerStart{}, target.SubsetChanged(p.Stream, tok.Subset, p.Subset)
	}
	if p.AtChainID != "" {
		if _, _, ok := cat.Find(p.AtChainID); !ok {
			return BrokerStart{}, errcode.New(errcode.LinkNotFound, "--at-chain-id %s: the chain at %s has no such link", p.AtChainID, p.Store.URL)
		}
		if found {
			if tok.LastApplied != p.AtChainID || tok.InProgress != nil {
				inside := ""
				if tok.InProgress != nil {
					inside = fmt.Sprintf(", and it is inside incremental %s", tok.InProgress.Incremental)
				}
				return BrokerStart{}, errcode.New(errcode.BrokerAtChainIDConflict, "--at-chain-id %s, but the stored position records %s as last fully applied%s", p.AtChainID, tok.LastApplied, inside)
			}
			if err := checkBrokerPoint(ctx, ch, cat, p.Stream, p.Point, tok); err != nil {
				return BrokerStart{}, err
			}
			a.reportPosition(ctx, ch, p.Stream, cat.ChainID, tok.LastApplied)
			return startOf(ModeWarm, tok), nil
		}
		if err := checkBrokerPoint(ctx, ch, cat, p.Stream, p.Point, apply.Token{LastApplied: p.AtChainID}); err != nil {
			return BrokerStart{}, err
		}
		if err := ensure(); err != nil {
			return BrokerStart{}, err
		}
		// Marks of an earlier run under this stream ID must not skip a change
		// this target never received: they go with the old position.
		tok = apply.Token{Engine: apply.EngineBroker, Stream: p.Stream, ChainID: cat.ChainID, LastApplied: p.AtChainID, Subset: p.Subset}
		if err := replaceState(ctx, st, tok); err != nil {
			return BrokerStart{}, err
		}
		a.reportPosition(ctx, ch, p.Stream, cat.ChainID, tok.LastApplied)
		return startOf(ModeAtChainID, tok), nil
	}
	if !found {
		return BrokerStart{}, errcode.New(errcode.BrokerNoPosition, "the target holds no position for stream %q; start it with --reset-target-data or --at-chain-id <ID>", p.Stream)
	}
	if _, ok := positionIn(cat, tok.LastApplied); !ok {
		return BrokerStart{}, positionPruned(p.Stream, tok.LastApplied, p.Store.URL)
	}
	if err := checkBrokerPoint(ctx, ch, cat, p.Stream, p.Point, tok); err != nil {
		return BrokerStart{}, err
	}
	a.reportPosition(ctx, ch, p.Stream, cat.ChainID, tok.LastApplied)
	return startOf(ModeWarm, tok), nil
}

func startOf(mode string, t apply.Token) BrokerStart {
	s := BrokerStart{Mode: mode, ChainID: t.ChainID, LastApplied: t.LastApplied}
	if t.InProgress != nil {
		s.InProgress = t.InProgress.Incremental
	}
	return s
}

// InitPositionParams set a stream's position after a cold start.
type InitPositionParams struct {
	BrokerParams
	ChainID     string `json:"chain_id"`
	LastApplied string `json:"last_applied"`
}

// InitBrokerPosition writes the stream's first position after a reset
// restored the chain through LastApplied.
func (a *Activities) InitBrokerPosition(ctx context.Context, p InitPositionParams) error {
	defer a.heartbeat(ctx, nil).stop()
	tgt, err := openTarget(ctx, p.Target)
	if err != nil {
		return a.temporalError(err)
	}
	defer tgt.Close(context.Background())
	tok := apply.Token{Engine: apply.EngineBroker, Stream: p.Stream, ChainID: p.ChainID, LastApplied: p.LastApplied, Subset: p.Subset}
	return a.temporalError(replaceState(ctx, tgt.State(), tok))
}

// replaceState makes tok the stream's only position, its marks cleared, in
// one target transaction.
func replaceState(ctx context.Context, st target.StateStore, tok apply.Token) error {
	row, err := apply.Row(tok)
	if err != nil {
		return err
	}
	if err := st.ReplaceState(ctx, tok.Stream, &row); err != nil {
		return fmt.Errorf("write the position of stream %s: %w", tok.Stream, err)
	}
	return nil
}

// WaitParams bound one wait for new links.
type WaitParams struct {
	BrokerParams
	// After is the last link applied.
	After string `json:"after"`
	// PollInterval is how often the catalog is read.
	PollInterval dur.Duration `json:"poll_interval"`
	// MaxWait returns an empty answer after this long (bounds the activity).
	MaxWait dur.Duration `json:"max_wait"`
	// StopAfter: a stop marker written after it ends the wait.
	StopAfter time.Time `json:"stop_after"`
	// HeldUntil, when set, holds pending links back until this time (a
	// broker's --apply-delay): the wait returns them only then, and they
	// count as not yet due, so the run reads idle, not stalled.
	HeldUntil time.Time `json:"held_until,omitzero"`
}

// PendingLink is an incremental to apply and the link the position must
// record before it.
type PendingLink struct {
	ID           string    `json:"id"`
	ExpectedLast string    `json:"expected_last"`
	Changes      int64     `json:"changes"`
	CreatedAt    time.Time `json:"created_at"`
}

// WaitResult is what a wait found.
type WaitResult struct {
	Pending []PendingLink `json:"pending,omitempty"`
	Stop    bool          `json:"stop,omitempty"`
	// TipCreatedAt is when the chain's newest link was written.
	TipCreatedAt time.Time `json:"tip_created_at"`
	// Held counts the links pending but held back by WaitParams.HeldUntil.
	Held int `json:"held,omitempty"`
}

// WaitForLinks polls the catalog every PollInterval until incrementals
// follow After (fulls of later segments are skipped: the closing
// incremental of a segment ends where the next segment's first begins), a
// stop marker for the stream appears, or MaxWait passes. It heartbeats, so a
// quiet chain costs no history while it waits.
func (a *Activities) WaitForLinks(ctx context.Context, p WaitParams) (WaitResult, error) {
	defer a.Health.Running(brokerKey(p.Stream))()
	res, err := a.waitForLinks(ctx, p)
	a.failed(brokerKey(p.Stream), err)
	return res, a.temporalError(err)
}

func (a *Activities) waitForLinks(ctx context.Context, p WaitParams) (WaitResult, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return WaitResult{}, err
	}
	if p.PollInterval <= 0 {
		p.PollInterval = dur.Duration(10 * time.Second)
	}
	deadline := time.Now().Add(p.MaxWait.D())
	k := brokerKey(p.Stream)
	a.Health.Configure(k, p.Health)
	// Heartbeats go on while a catalog read blocks on a store that does not
	// answer (the store client's own timeouts bound it), so the run reads
	// stalled, not gone, and no second attempt starts beside a blocked one.
	hb.report(func() any { return a.runDetails(k, p.Health, map[string]any{"waiting_after": p.After}) })
	reported := false
	var seen *chain.Catalog
	// pending is what seen holds past p.After. The same catalog as the
	// last poll's (nothing committed since) holds the same links: they are
	// not listed again, but links the delay held back at that poll are
	// still pending at this one, when they may have come due.
	var pending []PendingLink
	for {
		// One read of the next commit when nothing is new.
		cat, err := a.catalogs.Latest(ctx, ch)
		if err != nil {
			return WaitResult{}, err
		}
		res := WaitResult{TipCreatedAt: cat.Tip().CreatedAt}
		if cat != seen {
			seen = cat
			start, ok := positionIn(cat, p.After)
			if !ok {
				if err := a.checkStreamNotRolledBack(ctx, p.BrokerParams, cat); err != nil {
					return WaitResult{}, err
				}
				return WaitResult{}, positionPruned(p.Stream, p.After, p.Store.URL)
			}
			if !reported {
				// Once per wait, so once per tick: what retention reads.
				a.reportPosition(ctx, ch, p.Stream, cat.ChainID, p.After)
				reported = true
			}
			pending = pendingAfter(cat.Links()[start+1:], p.After)
		}
		res.Pending = pending
		// A stop marker is observed on every tick, whether or not links
		// are pending, so a broker that is behind stops between incrementals too.
		for _, stream := range []string{p.Stream, ""} {
			m, ok, err := ch.GetStopMarker(ctx, chain.RoleBroker, stream)
			if err == nil && ok && !m.RequestedAt.Before(p.StopAfter) {
				res.Stop = true
				a.Health.Ended(k)
				return res, nil
			}
		}
		if len(res.Pending) > 0 && time.Now().Before(p.HeldUntil) {
			res.Held, res.Pending = len(res.Pending), nil
		}
		behind := 0.0
		if len(res.Pending) > 0 {
			// Pending work keeps an apply's failure standing: only applying
			// it shows the target takes it again.
			a.Health.Polled(k, true)
			behind = time.Since(res.Pending[0].CreatedAt).Seconds()
		} else {
			a.Health.Succeeded(k)
		}
		a.Health.Behind(k, len(res.Pending), behind)
		if len(res.Pending) > 0 {
			return res, nil
		}
		if p.MaxWait > 0 && time.Now().After(deadline) {
			return res, nil
		}
		sleep := p.PollInterval.D()
		if res.Held > 0 {
			// Held links come due at a known time: wake then, not a poll later.
			if due := time.Until(p.HeldUntil); due < sleep {
				sleep = max(due, time.Millisecond)
			}
		}
		select {
		case <-ctx.Done():
			return WaitResult{}, ctx.Err()
		case <-time.After(sleep):
		}
	}
}

// pendingAfter lists the incrementals among links, the chain's links after
// the position last, each with the link the position records before it.
// Fulls of later segments are skipped: the closing incremental of a segment
// ends where the next segment's first begins.
func pendingAfter(links []chain.Link, last string) []PendingLink {
	var pending []PendingLink
	for _, l := range links {
		if l.Kind != chain.KindIncremental {
			continue
		}
		pending = append(pending, PendingLink{ID: l.ID, ExpectedLast: last, Changes: l.Changes, CreatedAt: l.CreatedAt})
		last = l.ID
	}
	return pending
}

// checkStreamNotRolledBack reads the stream's position in the target and
// refuses cat when it is older than the generation the stream verified.
func (a *Activities) checkStreamNotRolledBack(ctx context.Context, p BrokerParams, cat *chain.Catalog) error {
	tgt, err := openTarget(ctx, p.Target)
	if err != nil {
		return err
	}
	defer tgt.Close(context.Background())
	row, found, err := tgt.State().ReadState(ctx, p.Stream)
	if err != nil || !found {
		return err
	}
	tok, err := apply.Decode(row.Token, row.Checksum)
	if err != nil {
		return nil // the start checks report a damaged position
	}
	return apply.CheckNotRolledBack(p.Stream, tok.Verified, cat.Generation, cat.StoredHash())
}

// positionIn returns the index in cat.Links() of the link a broker's
// position names; -1 (with ok) for the pruned tip the first remaining full
// names as its parent, after which every remaining incremental follows.
func positionIn(cat *chain.Catalog, last string) (int, bool) {
	for i, l := range cat.Links() {
		if l.ID == last {
			return i, true
		}
	}
	if len(cat.Segments) > 0 && last != "" && cat.Segments[0].Full.Parent == last {
		return -1, true
	}
	return 0, false
}

// positionUnreadable is the refusal of a stream's position row that does
// not decode: another writer's (BROKER-POSITION-FOREIGN) or damaged
// (BROKER-POSITION-CORRUPT).
func positionUnreadable(stream string, err error) error {
	if errors.Is(err, apply.ErrForeign) {
		return errcode.Wrap(errcode.BrokerPositionForeign, err, "stream %q in sluice_cdc_state", stream)
	}
	return errcode.Wrap(errcode.BrokerPositionCorrupt, err, "stream %q in sluice_cdc_state", stream)
}

// chainMismatch is the refusal of a stream whose position names another
// chain than the store holds.
func chainMismatch(stream, have, store, chainID string) error {
	return errcode.New(errcode.BrokerChainMismatch, "stream %q holds a position in chain %s; %s holds chain %s", stream, have, store, chainID)
}

// positionPruned is the refusal of a broker whose position retention pruned.
func positionPruned(stream, last, store string) error {
	return errcode.New(errcode.BrokerPositionPruned,
		"stream %q last applied link %s, which the chain at %s no longer lists: retention pruned the segment, and the incrementals after it with it; rebuild the target with --reset-target-data",
		stream, last, store)
}

// reportPosition writes the broker's position into the store for
// retention to read. A store the broker may only read is no failure of
// the broker: the report is skipped and logged, and retention then does
// not know of this broker (docs/runbook.md, "Retention").
func (a *Activities) reportPosition(ctx context.Context, ch *chain.Chain, stream, chainID, last string) {
	err := ch.PutBrokerPosition(ctx, chain.BrokerPosition{Stream: stream, ChainID: chainID, LastApplied: last, UpdatedAt: time.Now()})
	if err != nil && ctx.Err() == nil {
		activity.GetLogger(ctx).Warn("BROKER-POSITION-UNREPORTED: could not write the broker's position into the store; retention cannot see this broker",
			"stream", stream, "error", err.Error())
	}
}

// BrokerApplyParams name one incremental to apply for a stream.
type BrokerApplyParams struct {
	BrokerParams
	Link        PendingLink `json:"link"`
	Concurrency int         `json:"concurrency"`
	// Arbiters are the keys the judgment found on the live target, by
	// table (JudgeResult.Arbiters): the inserts' ON CONFLICT arbiters.
	Arbiters map[string][]string `json:"arbiters,omitempty"`
	// StopAt, when positive, applies only the incremental's first StopAt
	// records, counted in the records whose chunk digest is StopDigest
	// (a BrokerCut), and leaves the position there.
	StopAt     int64  `json:"stop_at,omitempty"`
	StopDigest string `json:"stop_digest,omitempty"`
}

// BrokerApplyResult reports an applied incremental.
type BrokerApplyResult struct {
	Applied int64 `json:"applied"`
	Skipped int64 `json:"skipped"`
	// Excluded counts the changes of tables the stream's subset leaves out.
	Excluded int64 `json:"excluded,omitempty"`
	Resumed  bool  `json:"resumed,omitempty"`
	// Stopped: the apply stopped at StopAt, inside the incremental.
	Stopped bool `json:"stopped,omitempty"`
	// Replan: nothing was applied, the incremental changed since the cut
	// was planned (a compaction); plan it again.
	Replan bool `json:"replan,omitempty"`
	// Objects is what the target did with the schema objects the
	// incremental changed; nil when it changed none.
	Objects *ObjectsReport `json:"objects,omitempty"`
}

// ApplyBrokerIncremental takes the stream's lease (fencing any older run)
// and applies one incremental exactly once, resuming from the target's
// position when a previous attempt stopped inside it.
func (a *Activities) ApplyBrokerIncremental(ctx context.Context, p BrokerApplyParams) (BrokerApplyResult, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	defer a.Health.Running(brokerKey(p.Stream))()
	ch, tgt, err := a.chainAndTarget(ctx, p.Store, p.Target)
	if err != nil {
		return BrokerApplyResult{}, a.temporalError(err)
	}
	defer tgt.Close(context.Background())
	// The generation the link is read from: checked against the one the
	// stream verified last, and recorded with the position.
	cat, err := a.catalogs.Latest(ctx, ch)
	if err != nil {
		return BrokerApplyResult{}, a.temporalError(err)
	}
	m, schema, err := a.incrementalAt(ctx, ch, p.Link.ID)
	if err != nil {
		return BrokerApplyResult{}, a.temporalError(err)
	}
	seamFrom, err := seamFrom(ctx, ch, cat, m, p.Link.ExpectedLast)
	if err != nil {
		return BrokerApplyResult{}, a.temporalError(err)
	}
	info := activity.GetInfo(ctx)
	owner := fmt.Sprintf("%s/%s/%d", info.WorkflowExecution.RunID, info.ActivityID, info.Attempt)
	if err := apply.Claim(ctx, tgt.State(), p.Stream, owner); err != nil {
		return BrokerApplyResult{}, a.temporalError(err)
	}
	var applied atomic.Int64
	k := brokerKey(p.Stream)
	a.Health.Configure(k, p.Health)
	hb.report(func() any {
		// An apply in progress is a run whose loop turns with work pending:
		// if nothing commits for the delivery threshold, the chain is not
		// advancing (a lock on the target, say), which is not a dead loop.
		a.Health.Polled(k, true)
		return a.runDetails(k, p.Health, map[string]any{"incremental": m.ID, "applied": applied.Load()})
	})
	r, err := apply.ApplyIncremental(ctx, ch, m, schema, tgt, apply.Options{
		Stream: p.Stream, Owner: owner, Lanes: p.Concurrency, ExpectedLast: p.Link.ExpectedLast, Arbiters: p.Arbiters,
		Verified: &apply.Verified{Generation: cat.Generation, Commit: cat.StoredHash()},
		StopAt:   p.StopAt, StopDigest: p.StopDigest, Subset: p.Subset,
		Objects:  objectGate(p.BrokerParams, m.Source.Engine),
		SeamFrom: seamFrom,
		Progress: func(n int64) {
			applied.Store(n)
			a.Health.Delivered(k)
		},
		Committed: func(open time.Duration) {
			if a.Observe != nil {
				a.Observe.ApplyBatch(p.Stream, open)
			}
		},
	})
	if err != nil {
		a.failed(k, err)
		return BrokerApplyResult{}, a.temporalError(err)
	}
	a.Health.Delivered(k)
	a.Health.Counted(k, r.Applied)
	if !r.Stopped && !r.Replan {
		a.Health.AppliedLink(k)
	}
	res := BrokerApplyResult{Applied: r.Applied, Skipped: r.Skipped, Excluded: r.Excluded, Resumed: r.Resumed, Stopped: r.Stopped, Replan: r.Replan}
	if r.Objects != nil {
		res.Objects = reportOf(len(m.Schema.Objects), r.Objects)
	}
	return res, nil
}

// seamFrom returns, for the first incremental m of a segment that a stream
// enters from an earlier segment (its position records last, a link of
// that segment), the schema in force after last: what the earlier segment
// brought the target to (apply.Options.SeamFrom). It is nil for any other
// incremental, and when last is no longer in the catalog (pruned), with a
// warning: the target is then brought to the segment's schema only by the
// change records that follow.
func seamFrom(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, m *chain.Manifest, last string) (*chain.Schema, error) {
	if last == "" || last == m.Parent {
		return nil, nil
	}
	if _, si, ok := cat.Find(m.ID); !ok || cat.Segments[si].Full.ID != m.Parent {
		return nil, nil
	}
	if _, _, ok := cat.Find(last); !ok {
		slog.Warn("the link the stream's position records is no longer in the chain: tables created or altered at the end of its segment are not brought over at the seam",
			"position", last, "incremental", m.ID)
		return nil, nil
	}
	return ch.SchemaAt(ctx, cat, last)
}

// JudgeResult is what the judgment of an incremental found.
type JudgeResult struct {
	Unidentified int64    `json:"unidentified,omitempty"`
	Tables       []string `json:"tables,omitempty"`
	// Arbiters are the keys judged on the live target, by table; the apply
	// arbitrates its inserts on exactly these.
	Arbiters map[string][]string `json:"arbiters,omitempty"`
}

// JudgeBrokerIncremental judges an incremental before any of it is applied:
// every table it touches must have a key the replayed rows carry, or the
// replay must be exactly-once through identities and marks; otherwise it
// refuses with SLUICE-E-BROKER-KEYLESS-TABLE. It counts the changes without
// identity on keyed tables; the workflow logs them once the incremental is
// applied (the WARN BROKER-UNIDENTIFIED-CHANGES).
func (a *Activities) judgeBrokerIncremental(ctx context.Context, p BrokerApplyParams) (JudgeResult, error) {
	ch, tgt, err := a.chainAndTarget(ctx, p.Store, p.Target)
	if err != nil {
		return JudgeResult{}, a.temporalError(err)
	}
	defer tgt.Close(context.Background())
	m, schema, err := a.incrementalAt(ctx, ch, p.Link.ID)
	if err != nil {
		return JudgeResult{}, a.temporalError(err)
	}
	sel, err := p.Subset.Select(schema)
	if err != nil {
		return JudgeResult{}, a.temporalError(err)
	}
	j, err := tgt.JudgeIncremental(ctx, ch, m, schema, sel)
	if err != nil {
		return JudgeResult{}, a.temporalError(err)
	}
	return JudgeResult{Unidentified: j.Unidentified, Tables: j.Tables, Arbiters: j.Arbiters}, nil
}

// CheckChainParams ask for the severed-transaction check of a whole chain.
type CheckChainParams struct {
	BrokerParams
	// After is the last link the stream applied: findings up to it are
	// warnings, findings past it are refusals.
	After string `json:"after"`
	// Warned are the findings this run already logged.
	Warned []string `json:"warned,omitempty"`
}

// CheckChainResult reports the findings on applied links the run has not
// warned of yet; the workflow logs each once.
type CheckChainResult struct {
	Applied []AppliedFinding `json:"applied,omitempty"`
}

// AppliedFinding is a severed-transaction finding on a link already applied.
type AppliedFinding struct {
	// Key identifies the finding (CheckChainParams.Warned lists them).
	Key   string   `json:"key"`
	Links []string `json:"links"`
	Shape string   `json:"shape"`
}

// CheckChainForBroker runs the severed-transaction check over the whole
// chain before a tick applies anything. A finding on a link not yet applied
// refuses (SLUICE-E-BACKUP-CHAIN-SEVERED-TRANSACTION for shapes A and B,
// SLUICE-E-BACKUP-INCOMPLETE for C; no override). A finding on an applied
// link cannot be undone by refusing: it is returned, and the workflow logs
// it once per run as the WARN CHAIN-APPLIED-SEVERED-TRANSACTION.
func (a *Activities) checkChainForBroker(ctx context.Context, p CheckChainParams) (CheckChainResult, error) {
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return CheckChainResult{}, a.temporalError(err)
	}
	cat, err := a.catalogs.Latest(ctx, ch)
	if err != nil {
		return CheckChainResult{}, a.temporalError(err)
	}
	findings, err := ch.SeveredTransactions(ctx, cat, a.severCache())
	if err != nil {
		return CheckChainResult{}, a.temporalError(err)
	}
	applied := map[string]bool{}
	for _, l := range cat.Links() {
		applied[l.ID] = true
		if l.ID == p.After {
			break
		}
	}
	warned := map[string]bool{}
	for _, w := range p.Warned {
		warned[w] = true
	}
	var res CheckChainResult
	for _, f := range findings {
		if id := damagedLink(f); !applied[id] {
			return res, a.temporalError(errcode.New(f.Code(), "link %s is not applied yet: %s", id, f))
		}
	}
	for _, f := range findings {
		key := f.String()
		if warned[key] {
			continue
		}
		res.Applied = append(res.Applied, AppliedFinding{Key: key, Links: f.Links, Shape: f.Shape})
	}
	return res, nil
}

// damagedLink is the link a finding is held against: for a transaction split
// across two incrementals (shape A) the one that ended inside it, for a
// transaction delivered again (shape B) the one that repeats it, for an
// incremental ending past its last change (shape C) that incremental.
func damagedLink(f chain.Finding) string {
	if f.Shape == chain.ShapeSplit {
		return f.Links[0]
	}
	return f.Links[len(f.Links)-1]
}

// JudgeBrokerIncremental is the activity; judgeBrokerIncremental does the work. A failure is the run's
// health too: it names the stall's cause until a delivery clears it.
func (a *Activities) JudgeBrokerIncremental(ctx context.Context, p BrokerApplyParams) (JudgeResult, error) {
	defer a.heartbeat(ctx, nil).stop()
	defer a.Health.Running(brokerKey(p.Stream))()
	r, err := a.judgeBrokerIncremental(ctx, p)
	a.failed(brokerKey(p.Stream), err)
	return r, err
}

// CheckChainForBroker is the activity; checkChainForBroker does the work. A failure is the run's
// health too: it names the stall's cause until a delivery clears it.
func (a *Activities) CheckChainForBroker(ctx context.Context, p CheckChainParams) (CheckChainResult, error) {
	defer a.heartbeat(ctx, nil).stop()
	defer a.Health.Running(brokerKey(p.Stream))()
	r, err := a.checkChainForBroker(ctx, p)
	a.failed(brokerKey(p.Stream), err)
	return r, err
}
