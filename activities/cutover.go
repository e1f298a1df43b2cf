package activities

import (
	"context"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// CutoverParams ask to move a stream's target's sequences for a cutover
// (`sluice sync from-backup cutover`), once its broker has stopped.
type CutoverParams struct {
	Store  StoreRef           `json:"store"`
	Target credentials.DSNRef `json:"target"`
	Stream string             `json:"stream"`
	// Tip is the chain's last link as the cutover began: the stream's
	// position must hold it (or a later link).
	Tip string `json:"tip"`
	// Margin moves every counter this much past the source's (0 or more).
	Margin int64 `json:"margin"`
}

// CutoverResult is what the cutover found and moved.
type CutoverResult struct {
	ChainID string `json:"chain_id"`
	// LastApplied is the link the stream's position holds.
	LastApplied string `json:"last_applied"`
	// Inside is the incremental the position is inside, if any; its
	// counters count too (they are at or past its transactions).
	Inside string `json:"inside,omitempty"`
	// Counters is how many recorded counters the target was asked to move.
	Counters int `json:"counters"`
	// Sequences is what the target did with them.
	Sequences target.SequenceResult `json:"sequences"`
}

// RaiseCutoverSequences moves every sequence counter of a stream's target
// margin past the source's value as of the stream's position, never
// lowering one. It refuses, moving nothing, when the position does not
// hold p.Tip. A retry moves nothing twice: a counter already there is kept.
func (a *Activities) RaiseCutoverSequences(ctx context.Context, p CutoverParams) (CutoverResult, error) {
	defer a.heartbeat(ctx, nil).stop()
	res, err := a.raiseCutoverSequences(ctx, p)
	return res, a.temporalError(err)
}

func (a *Activities) raiseCutoverSequences(ctx context.Context, p CutoverParams) (CutoverResult, error) {
	if p.Margin < 0 {
		return CutoverResult{}, errcode.New(errcode.Usage, "a sequence margin of %d: give 0 or more", p.Margin)
	}
	ch, tgt, err := a.chainAndTarget(ctx, p.Store, p.Target)
	if err != nil {
		return CutoverResult{}, err
	}
	defer tgt.Close(context.Background())
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return CutoverResult{}, err
	}
	if err := chain.ValidateCatalog(cat); err != nil {
		return CutoverResult{}, err
	}
	row, found, err := tgt.State().ReadState(ctx, p.Stream)
	if err != nil {
		return CutoverResult{}, err
	}
	if !found {
		return CutoverResult{}, errcode.New(errcode.CutoverBehind, "the target holds no position for stream %q: no broker of it applied the chain at %s here", p.Stream, p.Store.URL)
	}
	tok, err := apply.Decode(row.Token, row.Checksum)
	if err != nil {
		return CutoverResult{}, positionUnreadable(p.Stream, err)
	}
	if tok.ChainID != cat.ChainID {
		return CutoverResult{}, chainMismatch(p.Stream, tok.ChainID, p.Store.URL, cat.ChainID)
	}
	res := CutoverResult{ChainID: cat.ChainID, LastApplied: tok.LastApplied}
	at := tok.LastApplied
	if tok.InProgress != nil {
		res.Inside, at = tok.InProgress.Incremental, tok.InProgress.Incremental
	}
	pos, ok := positionIn(cat, tok.LastApplied)
	if !ok {
		return res, positionPruned(p.Stream, tok.LastApplied, p.Store.URL)
	}
	tip, ok := positionIn(cat, p.Tip)
	if !ok {
		return res, errcode.New(errcode.ChainInvalid, "link %s, the chain's tip as the cutover began, is no longer in catalog generation %d of %s", p.Tip, cat.Generation, p.Store.URL)
	}
	if pos < tip {
		return res, errcode.New(errcode.CutoverBehind, "stream %q holds the chain through link %s, short of %s, the chain's tip as the cutover began", p.Stream, tok.LastApplied, p.Tip)
	}
	path, err := cat.Path(at)
	if err != nil {
		return res, err
	}
	ms := make([]*chain.Manifest, 0, len(path))
	for _, l := range path {
		m, err := a.manifest(ctx, ch, l.ID)
		if err != nil {
			return res, err
		}
		ms = append(ms, m)
	}
	values := CutoverCounters(ms)
	schema, err := ch.SchemaAt(ctx, cat, at)
	if err != nil {
		return res, err
	}
	sel, err := tok.Subset.Select(schema)
	if err != nil {
		return res, err
	}
	res.Counters = len(values)
	res.Sequences, err = tgt.RaiseSequences(ctx, schema, values, p.Margin, sel)
	return res, err
}

// CutoverCounters returns the source's counters as of the last of ms, the
// links of one segment from its full on: the values its incrementals
// record (chain.SequencesThrough), and for a sequence none of them
// records, the value the full's schema records (it has not moved since,
// or moved only before the producer's first record of it).
func CutoverCounters(ms []*chain.Manifest) map[string]int64 {
	values := chain.SequencesThrough(ms)
	if values == nil {
		values = map[string]int64{}
	}
	if len(ms) > 0 && ms[0] != nil && ms[0].Kind == chain.KindFull && ms[0].Schema != nil {
		for _, q := range ms[0].Schema.Sequences {
			if _, ok := values[q.Schema+"."+q.Name]; !ok {
				values[q.Schema+"."+q.Name] = q.LastValue
			}
		}
	}
	return values
}
