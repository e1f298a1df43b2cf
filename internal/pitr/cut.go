package pitr

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Cut is where a restore to a point stops: a full, the incrementals after
// it in chain order (across later segments, whose fulls it skips), and how
// many records of the last of them to apply.
type Cut struct {
	// Full is the full the restore loads.
	Full chain.Link
	// Incrementals are applied after the full, in order.
	Incrementals []chain.Link
	// Records is how many records of the last incremental to apply (the
	// records before the first transaction left out); -1 applies all of it.
	Records int64
	// Last is the last transaction the restore applies; nil when it applies
	// none after the full.
	Last *Transaction
	// Next is the first transaction left out; nil when the point is at or
	// after the chain's newest transaction.
	Next *Transaction
}

// Links returns the cut's full and incrementals, in order.
func (c Cut) Links() []chain.Link {
	return append([]chain.Link{c.Full}, c.Incrementals...)
}

// errFound stops a walk once the first transaction left out is found.
var errFound = errors.New("first transaction after the point found")

// Find locates point p in the chain cat describes. It picks the newest full
// whose every transaction is at or before p, then the incrementals after it
// up to the last transaction at or before p. A point before the oldest full
// or after the newest transaction is refused with PointOutsideChain.
//
// Transactions are taken in chain (commit) order, and the cut is the first
// transaction that is not at or before p: one whose commit time lies after a
// later transaction's (a source clock stepping back) ends the restore there.
func Find(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, p Point) (Cut, error) {
	f := finder{ch: ch, cat: cat, p: p, links: cat.Links()}
	return f.find(ctx)
}

type finder struct {
	ch    *chain.Chain
	cat   *chain.Catalog
	p     Point
	links []chain.Link
}

func (f *finder) find(ctx context.Context) (Cut, error) {
	if err := f.checkTip(ctx); err != nil {
		return Cut{}, err
	}
	start, err := f.pickFull(ctx)
	if err != nil {
		return Cut{}, err
	}
	cut := Cut{Full: f.links[start], Records: -1}
	for i := start + 1; i < len(f.links); i++ {
		l := f.links[i]
		if l.Kind != chain.KindIncremental {
			continue // a later full: its segment's incrementals follow on from the one before
		}
		whole, last, err := f.wholly(ctx, l)
		if err != nil {
			return Cut{}, err
		}
		if whole {
			cut.Incrementals = append(cut.Incrementals, l)
			if last != nil {
				cut.Last = last
			}
			continue
		}
		records, last, next, err := f.walk(ctx, l)
		if err != nil {
			return Cut{}, err
		}
		if last != nil {
			cut.Last = last
		}
		cut.Next = next
		if records > 0 {
			cut.Incrementals = append(cut.Incrementals, l)
			cut.Records = records
		}
		if next != nil {
			break
		}
	}
	if cut.Last == nil && len(cut.Incrementals) > 0 {
		// Every incremental applied is empty, or was taken whole without a
		// read: name the newest transaction among them.
		for i := len(cut.Incrementals) - 1; i >= 0 && cut.Last == nil; i-- {
			_, last, err := f.edges(ctx, cut.Incrementals[i])
			if err != nil {
				return Cut{}, err
			}
			if last != nil {
				cut.Last = f.describe(last, cut.Incrementals[i])
			}
		}
	}
	return cut, nil
}

// checkTip refuses a point after the newest transaction the chain holds
// (for a time) or after its tip's end position (for a position).
func (f *finder) checkTip(ctx context.Context) error {
	tip := f.links[len(f.links)-1]
	if f.p.Position != nil {
		c, err := f.p.Position.Compare(tip.EndPosition)
		if err != nil {
			return errcode.Wrap(errcode.PointInvalid, err, "compare %s with the chain's tip", f.p)
		}
		if c > 0 {
			return errcode.New(errcode.PointOutsideChain, "%s lies after the chain's tip %s, which ends at %s; the chain covers %s to %s",
				f.p, tip.ID, tip.EndPosition, f.links[0].EndPosition, tip.EndPosition)
		}
		return nil
	}
	newest, at, err := f.newestCommit(ctx)
	if err != nil {
		return err
	}
	if f.p.Time.After(newest) {
		return errcode.New(errcode.PointOutsideChain, "%s lies after the chain's newest transaction, which committed at %s (%s); the chain covers %s to %s",
			f.p, stamp(newest), at, stamp(f.links[0].CreatedAt), stamp(newest))
	}
	return nil
}

// newestCommit returns the commit time of the chain's newest transaction
// and the link that holds it; with no transaction after the newest full,
// that full's creation time.
func (f *finder) newestCommit(ctx context.Context) (time.Time, string, error) {
	for i := len(f.links) - 1; i >= 0; i-- {
		l := f.links[i]
		if l.Kind != chain.KindIncremental {
			return l.CreatedAt, "the creation of full " + l.ID, nil
		}
		_, last, err := f.edges(ctx, l)
		if err != nil {
			return time.Time{}, "", err
		}
		if last != nil {
			return time.UnixMicro(last.CommitTime).UTC(), "in incremental " + l.ID, nil
		}
	}
	return time.Time{}, "", nil // unreachable: a chain starts with a full
}

// pickFull returns the index in f.links of the newest full whose every
// transaction is at or before the point. For a time that is a full followed
// by a transaction at or before the point (it holds only what committed
// before that one), or one created at or before the point with no
// transaction after it; the oldest full also when it was created at or
// before the point.
func (f *finder) pickFull(ctx context.Context) (int, error) {
	oldest := -1
	for i := len(f.links) - 1; i >= 0; i-- {
		l := f.links[i]
		if l.Kind == chain.KindIncremental {
			continue
		}
		oldest = i
		if f.p.Position != nil {
			c, err := f.p.Position.Compare(l.EndPosition)
			if err != nil {
				return 0, errcode.Wrap(errcode.PointInvalid, err, "compare %s with full %s", f.p, l.ID)
			}
			if c >= 0 {
				return i, nil
			}
			continue
		}
		first, err := f.firstCommitAfter(ctx, i)
		if err != nil {
			return 0, err
		}
		if first != nil && first.CommitTime <= f.p.Time.UnixMicro() {
			return i, nil
		}
		if first == nil && !f.p.Time.Before(l.CreatedAt) {
			return i, nil
		}
	}
	full := f.links[oldest]
	if f.p.Position == nil && !f.p.Time.Before(full.CreatedAt) {
		return oldest, nil
	}
	from := stamp(full.CreatedAt)
	if f.p.Position != nil {
		from = full.EndPosition
	}
	return 0, errcode.New(errcode.PointOutsideChain, "%s lies before the chain's oldest full %s (%s): the chain covers %s onwards",
		f.p, full.ID, from, from)
}

// firstCommitAfter returns the commit record of the first transaction
// after the full at f.links[i], looking across later segments; nil when
// there is none.
func (f *finder) firstCommitAfter(ctx context.Context, i int) (*chain.Change, error) {
	for _, l := range f.links[i+1:] {
		if l.Kind != chain.KindIncremental {
			continue
		}
		first, _, err := f.edges(ctx, l)
		if err != nil || first != nil {
			return first, err
		}
	}
	return nil, nil
}

// wholly reports whether every transaction of incremental l is at or
// before the point, reading as little as it can: for a position its end
// position, for a time its newest transaction (returned as last).
func (f *finder) wholly(ctx context.Context, l chain.Link) (bool, *Transaction, error) {
	if l.Transactions == 0 {
		return true, nil, nil
	}
	if f.p.Position != nil {
		c, err := f.p.Position.Compare(l.EndPosition)
		if err != nil {
			return false, nil, errcode.Wrap(errcode.PointInvalid, err, "compare %s with incremental %s", f.p, l.ID)
		}
		return c >= 0, nil, nil
	}
	_, last, err := f.edges(ctx, l)
	if err != nil || last == nil {
		return last == nil && err == nil, nil, err
	}
	if !f.p.includes(last) {
		return false, nil, nil
	}
	return true, f.describe(last, l), nil
}

// walk reads incremental l up to its first transaction after the point and
// returns how many records come before that transaction's begin, the last
// transaction at or before the point and the first one after it (nil when
// every transaction of l is at or before it).
func (f *finder) walk(ctx context.Context, l chain.Link) (records int64, last, next *Transaction, err error) {
	m, err := f.ch.LinkManifest(ctx, f.cat, l.ID)
	if err != nil {
		return 0, nil, nil, err
	}
	var index, begin int64
	err = f.ch.WalkIncremental(ctx, m, func(c *chain.Change) error {
		switch c.Op {
		case chain.OpBegin:
			begin = index
		case chain.OpCommit:
			if !f.p.includes(c) {
				next = f.describe(c, l)
				return errFound
			}
			last = f.describe(c, l)
		}
		index++
		return nil
	}, nil)
	if errors.Is(err, errFound) {
		return begin, last, next, nil
	}
	if err != nil {
		return 0, nil, nil, err
	}
	return -1, last, nil, nil
}

// edges returns the commit records of incremental l's first and last
// transactions (nil when it holds none), reading only the first and the
// last of its chunks that hold them.
func (f *finder) edges(ctx context.Context, l chain.Link) (first, last *chain.Change, err error) {
	if l.Transactions == 0 {
		return nil, nil, nil
	}
	m, err := f.ch.LinkManifest(ctx, f.cat, l.ID)
	if err != nil {
		return nil, nil, err
	}
	k := len(m.Chunks)
	for i, ref := range m.Chunks {
		if first, last, err = chunkCommits(ctx, f.ch, ref); err != nil {
			return nil, nil, err
		}
		if first != nil {
			k = i
			break
		}
	}
	for j := len(m.Chunks) - 1; j > k; j-- {
		_, l, err := chunkCommits(ctx, f.ch, m.Chunks[j])
		if err != nil {
			return nil, nil, err
		}
		if l != nil {
			return first, l, nil
		}
	}
	return first, last, nil
}

// chunkCommits returns copies of the first and last commit records of one
// change chunk.
func chunkCommits(ctx context.Context, ch *chain.Chain, ref chain.ChunkRef) (first, last *chain.Change, err error) {
	it, err := ch.ReadChangeChunk(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	for it.Next() {
		c := it.Change()
		if c.Op != chain.OpCommit {
			continue
		}
		last = c.Clone()
		if first == nil {
			first = last
		}
	}
	return first, last, it.Err()
}

func (f *finder) describe(c *chain.Change, l chain.Link) *Transaction {
	tx := describe(c)
	tx.Link = l.ID
	return &tx
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
