package activities

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/pitr"
)

// BrokerPoint is where a broker holds back: --until / --until-position (the
// run ends there) and --apply-delay (transactions wait until they are that
// old). The zero value holds nothing back.
type BrokerPoint struct {
	Until         string       `json:"until,omitempty"`
	UntilPosition string       `json:"until_position,omitempty"`
	ApplyDelay    dur.Duration `json:"apply_delay,omitempty"`
}

// Active reports whether the point holds anything back.
func (p BrokerPoint) Active() bool {
	return p.Until != "" || p.UntilPosition != "" || p.ApplyDelay > 0
}

// HasUntil reports whether the run ends at a point.
func (p BrokerPoint) HasUntil() bool { return p.Until != "" || p.UntilPosition != "" }

// String names the until point as given.
func (p BrokerPoint) String() string {
	if p.Until != "" {
		return p.Until
	}
	return p.UntilPosition
}

// parsePoint reads an --until time or an --until-position of the chain's
// source engine; ok is false when neither is set.
func parsePoint(engine, until, position string) (point pitr.Point, ok bool, err error) {
	switch {
	case until != "":
		point, err = pitr.ParseTime(until)
	case position != "":
		point, err = pitr.ParsePosition(engine, position)
	default:
		return pitr.Point{}, false, nil
	}
	return point, err == nil, err
}

// BrokerCutParams ask where a broker's point falls in one incremental.
type BrokerCutParams struct {
	BrokerParams
	Link  PendingLink `json:"link"`
	Point BrokerPoint `json:"point"`
}

// BrokerCut is how much of an incremental a broker applies now.
type BrokerCut struct {
	// Records is how many of the incremental's records to apply (a
	// transaction boundary); -1 applies it whole, 0 applies nothing.
	Records int64 `json:"records"`
	// Digest is the incremental's chunk digest Records was counted in.
	Digest string `json:"digest,omitempty"`
	// Reached is true when the until point lies at the end of the records
	// applied: the run ends once they are.
	Reached bool `json:"reached,omitempty"`
	// Last is the last transaction the cut applies, when it was read;
	// Next the first it leaves out.
	Last *pitr.Transaction `json:"last,omitempty"`
	Next *pitr.Transaction `json:"next,omitempty"`
	// HeldUntil, when set, is when the delay lets the first transaction
	// left out be applied.
	HeldUntil time.Time `json:"held_until,omitzero"`
}

// PlanBrokerCut finds how far into an incremental a broker may apply now:
// up to its until point, and up to the transactions at least ApplyDelay
// old by this worker's clock, whichever comes first.
func (a *Activities) PlanBrokerCut(ctx context.Context, p BrokerCutParams) (BrokerCut, error) {
	defer a.heartbeat(ctx, nil).stop()
	defer a.Health.Running(brokerKey(p.Stream))()
	r, err := a.planBrokerCut(ctx, p, time.Now())
	a.failed(brokerKey(p.Stream), err)
	return r, a.temporalError(err)
}

func (a *Activities) planBrokerCut(ctx context.Context, p BrokerCutParams, now time.Time) (BrokerCut, error) {
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return BrokerCut{}, err
	}
	cat, err := a.catalogs.Latest(ctx, ch)
	if err != nil {
		return BrokerCut{}, err
	}
	link, _, found := cat.Find(p.Link.ID)
	if !found {
		return BrokerCut{}, errcode.New(errcode.LinkNotFound, "incremental %s is no longer in the chain at %s", p.Link.ID, p.Store.URL)
	}
	cut := BrokerCut{Records: -1}
	if point, ok, err := parsePoint(cat.Source.Engine, p.Point.Until, p.Point.UntilPosition); err != nil {
		return BrokerCut{}, err
	} else if ok {
		c, err := pitr.InLink(ctx, ch, cat, link, point)
		if err != nil {
			return BrokerCut{}, err
		}
		cut = BrokerCut{Records: c.Records, Reached: c.Reached, Last: c.Last, Next: c.Next}
	}
	if p.Point.ApplyDelay > 0 {
		c, err := pitr.InLink(ctx, ch, cat, link, pitr.Point{Time: now.Add(-p.Point.ApplyDelay.D())})
		if err != nil {
			return BrokerCut{}, err
		}
		if c.Next != nil && (cut.Records < 0 || c.Records < cut.Records) {
			// The delay holds back more than the until point does.
			cut = BrokerCut{Records: c.Records, Last: c.Last, Next: c.Next,
				HeldUntil: c.Next.CommitTime.Add(p.Point.ApplyDelay.D())}
		} else if cut.Last == nil {
			cut.Last = c.Last
		}
	}
	if p.Point.ApplyDelay > 0 {
		var commit time.Time
		if cut.Last != nil {
			commit = cut.Last.CommitTime
		}
		a.Health.Delayed(brokerKey(p.Stream), p.Point.ApplyDelay.D(), commit)
	}
	if cut.Records >= 0 {
		m, err := a.manifest(ctx, ch, link.ID)
		if err == nil {
			m, err = a.withLayout(ctx, ch, cat, m)
		}
		if err != nil {
			return BrokerCut{}, err
		}
		// The digest the apply computes from the same manifest.
		cut.Digest = apply.ChunksDigest(m)
	}
	return cut, nil
}

// checkBrokerPoint refuses an until point the target has already passed
// (it holds a transaction after the point) or that is not a point of the
// chain's engine, before anything is written.
func checkBrokerPoint(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, stream string, p BrokerPoint, tok apply.Token) error {
	point, ok, err := parsePoint(cat.Source.Engine, p.Until, p.UntilPosition)
	if err != nil || !ok {
		return err
	}
	in, inside := "", int64(0)
	if tok.InProgress != nil {
		in, inside = tok.InProgress.Incremental, tok.InProgress.AppliedThrough
	}
	passed, err := pitr.Passed(ctx, ch, cat, tok.LastApplied, in, inside, point)
	if err != nil {
		return err
	}
	if passed != nil {
		return errcode.New(errcode.PointPassed, "stream %q already applied %s (committed %s at %s, in %s), which lies after %s; nothing was written",
			stream, passed.Identity, passed.CommitTime.Format(time.RFC3339Nano), passed.Position, passed.Link, point)
	}
	return nil
}

// coldStartTail returns the link a cold start with an until point restores
// through: the last link wholly at or before the point on its full's
// segment path (the broker then applies the rest up to the point), or the
// chain's tip when the point lies after everything the chain holds. A point
// before the chain's oldest full is refused.
func coldStartTail(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, p BrokerPoint) (string, error) {
	point, ok, err := parsePoint(cat.Source.Engine, p.Until, p.UntilPosition)
	if err != nil || !ok {
		return cat.Tip().ID, err
	}
	cut, err := pitr.Find(ctx, ch, cat, point)
	if e, isCode := errcode.As(err); isCode && e.Code == errcode.PointOutsideChain {
		// Before the oldest full, or after the newest transaction: only
		// the first is refused here; the broker waits for the second.
		oldest := cat.Links()[0]
		if passed, perr := pitr.Passed(ctx, ch, cat, oldest.ID, "", 0, point); perr != nil || passed != nil {
			if perr != nil {
				return "", perr
			}
			return "", err
		}
		return cat.Tip().ID, nil
	}
	if err != nil {
		return "", err
	}
	whole := cut.Incrementals
	if cut.Records >= 0 && len(whole) > 0 {
		whole = whole[:len(whole)-1]
	}
	tail := cut.Full.ID
	for _, l := range whole {
		path, err := cat.Path(l.ID)
		if err != nil {
			return "", errcode.Wrap(errcode.ChainInvalid, err, "path to %s", l.ID)
		}
		if path[0].ID == cut.Full.ID {
			tail = l.ID
		}
	}
	return tail, nil
}
