package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/readback"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/target"
)

// Outcome is a comparison with when each side's snapshot was taken.
type Outcome struct {
	Report
	// SourceAt and TargetAt are when each snapshot began: the source's
	// first, so that a target fed from it has had longer to catch up.
	SourceAt time.Time `json:"source_snapshot_at"`
	TargetAt time.Time `json:"target_snapshot_at"`
}

// Run opens a snapshot of src, then one of dst, and compares them.
func Run(ctx context.Context, src source.Source, dst target.Target, o Options) (Outcome, error) {
	sr, ok := src.(readback.SourceReader)
	if !ok {
		return Outcome{}, errcode.New(errcode.VerifyUnsupported, "the %s source engine cannot read its tables in a snapshot", src.Engine())
	}
	tr, ok := dst.(readback.Reader)
	if !ok {
		return Outcome{}, errcode.New(errcode.VerifyUnsupported, "the target engine cannot read its tables in a snapshot")
	}
	var out Outcome
	out.SourceAt = time.Now()
	ss, err := sr.OpenSourceSnapshot(ctx)
	if err != nil {
		return out, err
	}
	defer ss.Close(ctx)
	out.TargetAt = time.Now()
	ts, err := tr.OpenSnapshot(ctx)
	if err != nil {
		return out, err
	}
	defer ts.Close(ctx)
	out.Report, err = Compare(ctx, ss, ts, o)
	return out, err
}

// Mismatch is the coded error of an outcome with differences (nil when
// every table is equal): SLUICE-E-VERIFY-COLUMNS-DIFFER when a table's
// columns differ, else SLUICE-E-VERIFY-MISMATCH.
func (o Outcome) Mismatch() error {
	if o.Equal() {
		return nil
	}
	// A table whose columns differ is named first, under its own code:
	// its rows cannot be compared until its shape is the source's.
	code, first := errcode.VerifyMismatch, ""
	for _, t := range o.Tables {
		if t.Status == StatusColumns {
			code, first = errcode.VerifyColumnsDiffer, t.Name+": "+t.Detail
			break
		}
		if t.Status != StatusEqual && first == "" {
			first = t.Name + ": " + t.Detail
		}
	}
	return errcode.New(code, "%d of %d tables differ; the first, %s", o.Differences, len(o.Tables), first)
}

// BrokerAt is where a broker stood when a wait for it ended.
type BrokerAt struct {
	Stream      string `json:"stream"`
	LastApplied string `json:"last_applied"`
	// Tip is the chain's last link the broker applies (its newest
	// incremental) when the wait began.
	Tip string `json:"tip"`
}

// WaitBroker waits until stream's position in st (the broker's target)
// has applied the chain's newest incremental as of the wait's start, or
// until timeout. It polls every poll and calls tick after each look.
func WaitBroker(ctx context.Context, ch *chain.Chain, st target.StateStore, stream string, timeout, poll time.Duration, tick func(BrokerAt)) (BrokerAt, error) {
	at := BrokerAt{Stream: stream}
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return at, err
	}
	links := cat.Links()
	want := 0
	for i, l := range links {
		if l.Kind == chain.KindIncremental {
			want = i
		}
	}
	at.Tip = links[want].ID
	deadline := time.Now().Add(timeout)
	for {
		row, found, err := st.ReadState(ctx, stream)
		if err != nil {
			return at, err
		}
		if !found {
			// A broker in its cold start writes its first position once
			// the restore is done.
			if time.Now().After(deadline) {
				return at, errcode.New(errcode.VerifyBrokerBehind, "--wait-broker %s: after %s the target still holds no position for that stream", stream, timeout)
			}
			if err := sleep(ctx, poll); err != nil {
				return at, err
			}
			continue
		}
		tok, err := apply.Decode(row.Token, row.Checksum)
		if err != nil {
			return at, errcode.Wrap(errcode.VerifyBrokerBehind, err, "--wait-broker %s: the stream's position does not decode", stream)
		}
		if tok.ChainID != cat.ChainID {
			return at, errcode.New(errcode.VerifyBrokerBehind, "--wait-broker %s: the stream replays chain %s, not the chain at --backup-target (%s)", stream, tok.ChainID, cat.ChainID)
		}
		at.LastApplied = tok.LastApplied
		if tick != nil {
			tick(at)
		}
		idx := -1
		for i, l := range links {
			if l.ID == tok.LastApplied {
				idx = i
			}
		}
		if idx >= want && tok.InProgress == nil {
			return at, nil
		}
		if idx < 0 {
			// A link newer than the catalog read at the start is past the tip.
			if now, err := ch.LoadCatalog(ctx); err == nil {
				if _, _, ok := now.Find(tok.LastApplied); ok && tok.InProgress == nil {
					return at, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return at, errcode.New(errcode.VerifyBrokerBehind, "--wait-broker %s: after %s the broker's last applied link is %s, not yet the chain's tip %s", stream, timeout, tok.LastApplied, at.Tip)
		}
		if err := sleep(ctx, poll); err != nil {
			return at, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// ErrNothingSelected is returned (wrapped) when the filter leaves no table.
var ErrNothingSelected = errors.New("no table selected")

// CheckSelected refuses a report that compared no table: a filter that
// matches nothing is a mistake, not an equal replica.
func (r Report) CheckSelected() error {
	if len(r.Tables) > 0 {
		return nil
	}
	return errcode.Wrap(errcode.Usage, ErrNothingSelected, "no source table matches --include-table / --exclude-table (%d skipped)", len(r.Skipped))
}

// String summarises the outcome in one line.
func (o Outcome) String() string {
	equal := len(o.Tables) - o.Differences
	return fmt.Sprintf("%d tables compared at %s depth: %d equal, %d differ", len(o.Tables), o.Depth, equal, o.Differences)
}
