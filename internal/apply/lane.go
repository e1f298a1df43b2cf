package apply

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
)

// lane drives one target lane: it collects the marks of the open
// transaction and, with several lanes, applies its share in a goroutine of
// its own.
type lane struct {
	target target.Lane
	link   string
	marks  target.MarkBatch
	open   bool
	began  time.Time
	// committed is Options.Committed.
	committed func(time.Duration)

	work         chan laneMsg
	done         chan struct{} // closed when loop returns
	pendingReply chan error
	err          error
}

type laneMsg struct {
	change *chain.Change
	track  *chain.Change
	commit chan error
}

// apply applies a change in the lane's open transaction (synchronously).
func (l *lane) apply(ctx context.Context, c *chain.Change) error {
	if !l.open {
		l.open, l.began = true, time.Now()
	}
	if err := l.target.Apply(ctx, c); err != nil {
		return err
	}
	if c.Identified {
		l.marks.Add(l.link, c.Identity(), c.Ordinal)
	}
	return nil
}

// commit writes the marks (and, when given, the position) and commits.
func (l *lane) commit(ctx context.Context, extra *target.Commit) error {
	if !l.open && extra == nil {
		return nil
	}
	if !l.open {
		l.began = time.Now()
	}
	c := target.Commit{Marks: &l.marks}
	if extra != nil {
		c.Position, c.PruneMarksExcept = extra.Position, extra.PruneMarksExcept
	}
	err := l.target.Commit(ctx, c)
	if err == nil && l.committed != nil {
		l.committed(time.Since(l.began))
	}
	l.open = false
	l.marks.Reset()
	return err
}

// send queues a copy of a change for the lane's goroutine.
func (l *lane) send(ctx context.Context, c *chain.Change) error {
	select {
	case l.work <- laneMsg{change: c.Clone()}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *lane) requestCommit(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case l.work <- laneMsg{commit: reply}:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.pendingReply = reply
	return nil
}

func (l *lane) awaitCommit(ctx context.Context) error {
	select {
	case err := <-l.pendingReply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *lane) loop(ctx context.Context) {
	defer close(l.done)
	for msg := range l.work {
		if msg.commit != nil {
			err := l.err
			if err == nil {
				err = l.commit(ctx, nil)
			}
			msg.commit <- err
			continue
		}
		if msg.track != nil {
			l.target.Track(msg.track)
			continue
		}
		if l.err == nil {
			l.err = l.apply(ctx, msg.change)
		}
	}
}

func (l *lane) close(ctx context.Context) {
	if l.work != nil {
		// The goroutine finishes what it holds (skipping it after an error)
		// before the lane's connection goes.
		close(l.work)
		<-l.done
	}
	_ = l.target.Close(ctx)
}
