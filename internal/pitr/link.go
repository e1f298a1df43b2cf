package pitr

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// LinkCut is where a point falls inside one incremental, for a broker that
// applies up to the point and keeps its position there.
type LinkCut struct {
	// Records is how many of the incremental's records come before its
	// first transaction after the point; -1 when every one is at or
	// before it.
	Records int64
	// Last is the incremental's last transaction at or before the point
	// (nil when it holds none, or when the incremental is taken whole by
	// its end position and was not read).
	Last *Transaction
	// Next is the incremental's first transaction after the point (nil
	// when there is none).
	Next *Transaction
	// Reached is true when nothing after this incremental's cut can be at
	// or before the point: a transaction after it was found, or a position
	// point lies exactly at the incremental's end.
	Reached bool
}

// InLink finds point p inside incremental l of the chain cat describes,
// reading as little of it as it can: for a position only its end position
// when the point lies at or after it, for a time only its last chunk
// holding a commit when its newest transaction is at or before the point.
func InLink(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, l chain.Link, p Point) (LinkCut, error) {
	f := finder{ch: ch, cat: cat, p: p}
	whole, last, err := f.wholly(ctx, l)
	if err != nil {
		return LinkCut{}, err
	}
	if whole {
		cut := LinkCut{Records: -1, Last: last}
		if p.Position != nil {
			c, err := p.Position.Compare(l.EndPosition)
			if err != nil {
				return LinkCut{}, errcode.Wrap(errcode.PointInvalid, err, "compare %s with incremental %s", p, l.ID)
			}
			cut.Reached = c == 0
		}
		return cut, nil
	}
	records, last, next, err := f.walk(ctx, l)
	if err != nil {
		return LinkCut{}, err
	}
	return LinkCut{Records: records, Last: last, Next: next, Reached: next != nil}, nil
}

// errPassed stops a walk at the first applied transaction after the point.
var errPassed = errors.New("an applied transaction lies after the point")

// Passed returns the first transaction a target already holds that lies
// after point p, or nil when everything it holds is at or before p. The
// target holds the chain through link last and, when inside is positive,
// the first inside records of incremental in after it. Only the newest
// applied transaction decides: a chain's transactions are in commit order.
func Passed(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, last string, in string, inside int64, p Point) (*Transaction, error) {
	f := finder{ch: ch, cat: cat, p: p, links: cat.Links()}
	if in != "" && inside > 0 {
		l, _, ok := cat.Find(in)
		if !ok {
			return nil, errcode.New(errcode.LinkNotFound, "the position is inside incremental %s, which the chain does not hold", in)
		}
		m, err := ch.LinkManifest(ctx, cat, l.ID)
		if err != nil {
			return nil, err
		}
		var newest *Transaction
		err = ch.WalkIncremental(ctx, m, chain.FirstRecords(inside, func(c *chain.Change) error {
			if c.Op == chain.OpCommit && !p.includes(c) {
				newest = f.describe(c, l)
				return errPassed
			}
			return nil
		}), nil)
		if errors.Is(err, errPassed) {
			return newest, nil
		}
		if err != nil {
			return nil, err
		}
	}
	i := -1
	for k, l := range f.links {
		if l.ID == last {
			i = k
		}
	}
	if i < 0 {
		return nil, errcode.New(errcode.LinkNotFound, "the position names link %s, which the chain does not hold", last)
	}
	for ; i >= 0; i-- {
		l := f.links[i]
		if l.Kind != chain.KindIncremental {
			return f.fullPassed(ctx, i)
		}
		_, newest, err := f.edges(ctx, l)
		if err != nil {
			return nil, err
		}
		if newest == nil {
			continue
		}
		if p.includes(newest) {
			return nil, nil
		}
		return f.describe(newest, l), nil
	}
	return nil, nil
}

// fullPassed reports whether the full at f.links[i] holds a transaction
// after the point: for a position, when the full's position lies after it;
// for a time, when the full was taken after the point and the first
// transaction recorded after it is not at or before the point either.
func (f *finder) fullPassed(ctx context.Context, i int) (*Transaction, error) {
	full := f.links[i]
	if f.p.Position != nil {
		c, err := f.p.Position.Compare(full.EndPosition)
		if err != nil {
			return nil, errcode.Wrap(errcode.PointInvalid, err, "compare %s with full %s", f.p, full.ID)
		}
		if c < 0 {
			return &Transaction{CommitTime: full.CreatedAt, Position: full.EndPosition, Identity: "full " + full.ID, Link: full.ID}, nil
		}
		return nil, nil
	}
	if !full.CreatedAt.After(f.p.Time) {
		return nil, nil
	}
	first, err := f.firstCommitAfter(ctx, i)
	if err != nil {
		return nil, err
	}
	if first != nil && f.p.includes(first) {
		return nil, nil
	}
	return &Transaction{CommitTime: full.CreatedAt, Position: full.EndPosition, Identity: "full " + full.ID, Link: full.ID}, nil
}
