// Package producer keeps a chain fed: it captures windows of whole source
// transactions from the chain's log (through the source.Capture of the
// chain's engine) and commits each as an incremental, confirms the capture
// only after the catalog names the window, and rotates the chain into a new
// segment. It is the domain behind the producer workflow and `sluice backup
// incremental`, usable without Temporal, and knows no engine.
package producer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/source"
)

// DefaultChunkBytes is the uncompressed size at which an incremental's
// change records are cut into a new chunk.
const DefaultChunkBytes = 8 << 20

// Options configure a producer step.
type Options struct {
	// Source is the chain's source database. Required.
	Source source.Source
	// Owner names the run reading the chain's log (source.CaptureOptions.Owner).
	Owner string
	// OnTakeOver is told when the capture ended an earlier session of the
	// same owner to take the log over (source.CaptureOptions.OnTakeOver).
	OnTakeOver func(session int64)
	// ChunkBytes is the raw size of a change chunk (default DefaultChunkBytes).
	ChunkBytes int
	// AttemptID names this attempt's data folder, data/<AttemptID>/.
	AttemptID string
	// Now stamps manifests (default time.Now).
	Now func() time.Time
	// Parallel is the number of tables a rotation's full copies at once.
	Parallel int
	// Catalogs keeps the catalog between steps, so a step reads only the
	// commits made since the last one (nil: every step loads it whole).
	Catalogs *chain.CatalogCache
	// Sessions holds the capture sessions parked on this worker: every
	// step on a chain closes one parked there that it does not take back,
	// so the log is free for it (nil: nothing is parked).
	Sessions *Sessions
	// KeepSession parks a window's session in Sessions for the owner's
	// next window (a stream's) instead of closing it.
	KeepSession bool
	// Stream names the run's stream (the producer workflow's ID; empty
	// for Owner): its runs share what they park in Sessions.
	Stream string
	// Filter is what the run was asked to let cross (nil: everything). A
	// window refuses to capture when it differs from the filters the tip
	// segment was written with (SLUICE-E-FILTER-CHANGED): only a rotation
	// starts a segment under new filters. Captures always run under the
	// segment's own recorded filters.
	Filter *filter.Filter
	// MaskKeyEnv names the worker's environment variable holding the mask
	// key, to rebuild a segment's keyed masks.
	MaskKeyEnv string
	// LookupEnv reads the worker's environment (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
}

// Result reports one committed (or empty) step.
type Result struct {
	// Committed is false when the window held no transaction.
	Committed bool `json:"committed"`
	// LinkID is the committed incremental (or, for a rotation, the new full).
	LinkID       string `json:"link_id,omitempty"`
	Start        string `json:"start,omitempty"`
	End          string `json:"end,omitempty"`
	Changes      int64  `json:"changes"`
	Transactions int64  `json:"transactions"`
	// LogBytes is the volume of decoded log messages the window read.
	LogBytes int64 `json:"log_bytes"`
	// StoredBytes is what the window's chunks occupy in the store.
	StoredBytes int64 `json:"stored_bytes"`
	// SegmentLength is the number of incrementals in the tip segment after the step.
	SegmentLength int `json:"segment_length"`
	// Links is the number of links in the whole chain after the step.
	Links int `json:"links"`
	// Slot is the health of the chain's log position (PostgreSQL: its slot)
	// after the step.
	Slot source.LogHealth `json:"slot"`
	// LastCommit is the source commit time of the window's last transaction.
	LastCommit time.Time `json:"last_commit,omitempty"`
}

// stream is what the run's parked sessions are shared by.
func (o *Options) stream() string {
	if o.Stream != "" {
		return o.Stream
	}
	return o.Owner
}

func (o *Options) defaults() error {
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AttemptID == "" {
		return errors.New("producer: attempt ID is required")
	}
	if o.Source == nil {
		return errors.New("producer: a source is required")
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	return nil
}

// openTip loads the catalog, checks the chain is of the source's engine, and
// opens a capture session at the tip's end with the schema as of the tip;
// with reuse, it takes back the session the owner's last window parked at
// that tip instead, when there is one (resumed says so).
//
// The session captures under the filters the tip segment was written with;
// unless changing is true (a rotation's closing incremental), a run asking
// for other filters is refused with SLUICE-E-FILTER-CHANGED.
func openTip(ctx context.Context, ch *chain.Chain, o Options, reuse, changing bool) (cat *chain.Catalog, capt source.Capture, resumed bool, err error) {
	// A catalog read from the store passed ValidateCatalog's checks.
	if cat, err = o.Catalogs.Latest(ctx, ch); err != nil {
		return nil, nil, false, err
	}
	if engine := o.Source.Engine(); cat.Source.Engine != engine {
		return nil, nil, false, errcode.New(errcode.ConfigInvalid, "the chain's source engine is %q; this producer reads %s", cat.Source.Engine, engine)
	}
	if parked := o.Sessions.take(cat.ChainID, o.stream(), o.Owner, cat.Tip().ID, cat.Tip().EndPosition); parked != nil {
		if reuse {
			return cat, tracked(parked), true, nil
		}
		parked.Close()
	}
	segFilter, err := segmentFilter(ctx, ch, cat, o, changing)
	if err != nil {
		return nil, nil, false, err
	}
	schema, err := ch.SchemaAt(ctx, cat, cat.Tip().ID)
	if err != nil {
		return nil, nil, false, err
	}
	if capt, err = o.Source.OpenCapture(ctx, source.CaptureOptions{
		Source: cat.Source, Start: cat.Tip().EndPosition, Schema: schema, Owner: o.Owner, OnTakeOver: o.OnTakeOver,
		Filter: segFilter,
	}); err != nil {
		return nil, nil, false, err
	}
	return cat, tracked(capt), false, nil
}

// segmentFilter returns the filter the tip segment was written with,
// refusing a run whose own filter differs unless changing.
func segmentFilter(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, o Options, changing bool) (*filter.Filter, error) {
	rec, err := ch.FiltersAt(ctx, cat, cat.Tip().ID)
	if err != nil {
		return nil, err
	}
	if want := o.Filter.Record(); !changing && !rec.Equal(want) {
		have, asked := filter.Describe(rec), filter.Describe(want)
		if have == "" {
			have = "none"
		}
		if asked == "" {
			asked = "none"
		}
		return nil, errcode.New(errcode.FilterChanged, "the chain's newest segment (full %s) was written with filters [%s]; this run asks for [%s]",
			cat.Segments[len(cat.Segments)-1].Full.ID, have, asked)
	}
	return filter.FromRecord(rec, o.MaskKeyEnv, o.LookupEnv)
}

// Window captures one window from the chain's tip and commits it as an
// incremental. An empty window commits nothing. A retried window starts from
// whatever tip the catalog names, so it neither drops nor repeats a
// transaction.
func Window(ctx context.Context, ch *chain.Chain, o Options, lim source.Limits) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	cat, capt, resumed, err := openTip(ctx, ch, o, true, false)
	if err != nil {
		return Result{}, err
	}
	parked := false
	defer func() {
		if !parked && capt != nil {
			capt.Close()
		}
	}()
	if lim.Until == "now" {
		if lim.Until, err = capt.CurrentPosition(ctx); err != nil {
			return Result{}, err
		}
	}
	w := newChangeWriter(ch, o.AttemptID, o.ChunkBytes)
	sink := w.add(ctx)
	delivered := false
	win, err := capt.Next(ctx, lim, func(c *chain.Change) error { delivered = true; return sink(c) })
	if err != nil && resumed && !delivered && ctx.Err() == nil {
		// A session parked since the last window may have lost its
		// connection meanwhile (the source restarted, say): it delivered
		// nothing, so open a fresh one at the same tip, once, rather than
		// fail the window.
		capt.Close()
		capt = nil
		if cat, capt, _, err = openTip(ctx, ch, o, false, false); err != nil {
			return Result{}, err
		}
		win, err = capt.Next(ctx, lim, sink)
	}
	if err != nil {
		w.cleanup()
		return Result{}, err
	}
	res := Result{Changes: win.Changes, Transactions: win.Transactions, LogBytes: win.Bytes, LastCommit: win.LastCommit}
	if win.Transactions > 0 {
		seqs, err := readSequences(ctx, capt)
		if err != nil {
			w.cleanup()
			return Result{}, err
		}
		m, err := w.manifest(ctx, cat, win, seqs.moved, o.Now())
		if err != nil {
			w.cleanup()
			return Result{}, err
		}
		next, err := commitOnto(ctx, ch, cat, func(next *chain.Catalog) error {
			if err := next.AppendIncremental(m); err != nil {
				return errcode.Wrap(errcode.ChainInvalid, err, "append incremental")
			}
			return nil
		})
		if err != nil {
			o.Catalogs.Forget(ch)
			w.cleanup()
			return Result{}, err
		}
		cat = next
		seqs.recorded()
		o.Catalogs.Put(ch, next)
		expireCatalog(ctx, ch, next)
		res.Committed, res.LinkID, res.Start, res.End = true, m.ID, m.StartPosition, m.EndPosition
		res.StoredBytes = w.stored
		if err := capt.Confirm(ctx, m.EndPosition); err != nil {
			return res, unconfirmed(err, m.EndPosition)
		}
	}
	res.SegmentLength = len(cat.Segments[len(cat.Segments)-1].Incrementals)
	res.Links = cat.LinkCount()
	if res.Slot, err = capt.LogHealth(ctx); err != nil {
		return res, err
	}
	if o.Sessions != nil && o.KeepSession {
		// The session stands at the end of what the catalog now holds:
		// the next window of this owner resumes it there.
		o.Sessions.park(cat.ChainID, o.stream(), o.Owner, cat.Tip().ID, cat.Tip().EndPosition, capt)
		parked = true
	}
	return res, nil
}

// Rotate closes the tip segment and starts a new one: it takes a new full
// anchored at the source's current position on a temporary slot, captures
// the old segment's last incremental up to exactly that anchor, and commits
// both in one catalog write that caps the old segment. A broker that skips
// fulls therefore still sees every transaction once.
func Rotate(ctx context.Context, ch *chain.Chain, o Options) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	cat, capt, _, err := openTip(ctx, ch, o, false, true)
	if err != nil {
		return Result{}, err
	}
	defer capt.Close()
	// The new segment (and the closing incremental before it) under data
	// keys of their own.
	ch.Keyring().StartNewKeys()
	full, cleanupFull, err := o.Source.RotationFull(ctx, ch, source.FullOptions{
		AttemptID: o.AttemptID + "-full", Parallel: o.Parallel, Now: o.Now, Filter: o.Filter,
	}, cat.Source)
	if err != nil {
		return Result{}, err
	}
	w := newChangeWriter(ch, o.AttemptID, o.ChunkBytes)
	fail := func(err error) (Result, error) {
		w.cleanup()
		cleanupFull()
		return Result{}, err
	}
	win, err := capt.Next(ctx, source.Limits{Before: full.EndPosition}, w.add(ctx))
	if err != nil {
		return fail(err)
	}
	full.Parent = cat.Tip().ID
	res := Result{Changes: win.Changes, Transactions: win.Transactions, LogBytes: win.Bytes, LastCommit: win.LastCommit}
	var last *chain.Manifest
	if win.Transactions > 0 {
		seqs, err := readSequences(ctx, capt)
		if err != nil {
			return fail(err)
		}
		if last, err = w.manifest(ctx, cat, win, seqs.moved, o.Now()); err != nil {
			return fail(err)
		}
		full.Parent = last.ID
	}
	if err := ch.PutManifest(ctx, full); err != nil {
		return fail(err)
	}
	next, err := commitOnto(ctx, ch, cat, func(next *chain.Catalog) error {
		if last != nil {
			if err := next.AppendIncremental(last); err != nil {
				return errcode.Wrap(errcode.ChainInvalid, err, "append closing incremental")
			}
		}
		if err := next.Rotate(full); err != nil {
			return errcode.Wrap(errcode.ChainInvalid, err, "rotate")
		}
		return nil
	})
	if err != nil {
		o.Catalogs.Forget(ch)
		return fail(err)
	}
	o.Catalogs.Put(ch, next)
	expireCatalog(ctx, ch, next)
	res.Committed, res.LinkID, res.Start, res.End = true, full.ID, full.StartPosition, full.EndPosition
	res.StoredBytes = w.stored
	for _, t := range full.Tables {
		for _, c := range t.Chunks {
			res.StoredBytes += c.Size
		}
	}
	if err := capt.Confirm(ctx, win.End); err != nil {
		return res, unconfirmed(err, win.End)
	}
	res.SegmentLength = 0
	res.Links = next.LinkCount()
	res.Slot, err = capt.LogHealth(ctx)
	return res, err
}

// changeWriter turns a window's changes into stored chunks.
type changeWriter struct {
	ch      *chain.Chain
	attempt string
	limit   int
	b       *chain.ChangeBuilder
	seq     int
	refs    []chain.ChunkRef
	keys    []string
	stored  int64
}

func newChangeWriter(ch *chain.Chain, attempt string, limit int) *changeWriter {
	return &changeWriter{ch: ch, attempt: attempt, limit: limit, b: chain.NewChangeBuilder()}
}

func (w *changeWriter) add(ctx context.Context) source.Sink {
	return func(c *chain.Change) error {
		if err := w.b.Append(c); err != nil {
			return err
		}
		if w.b.RawLen() >= w.limit {
			return w.flush(ctx)
		}
		return nil
	}
}

func (w *changeWriter) flush(ctx context.Context) error {
	if w.b.Records() == 0 {
		return nil
	}
	data, err := w.b.Encode()
	if err != nil {
		return fmt.Errorf("encode change chunk: %w", err)
	}
	key := chain.DataKey(w.attempt, fmt.Sprintf("changes-%06d.chunk", w.seq))
	w.keys = append(w.keys, key)
	ref, err := w.ch.WriteChunk(ctx, chain.ChunkPlace{Key: key, Ordinal: len(w.refs)}, data, w.b.Records(), int64(w.b.RawLen()))
	if err != nil {
		return err
	}
	w.refs = append(w.refs, ref)
	w.stored += int64(len(data))
	w.seq++
	w.b.Reset()
	return nil
}

// manifest flushes the last chunk and stores the incremental's manifest,
// which records seqs as its sequence values.
func (w *changeWriter) manifest(ctx context.Context, cat *chain.Catalog, win source.Window, seqs map[string]int64, now time.Time) (*chain.Manifest, error) {
	if err := w.flush(ctx); err != nil {
		return nil, err
	}
	tip := cat.Tip()
	m := &chain.Manifest{
		FormatVersion: chain.ManifestFormatVersion,
		Kind:          chain.KindIncremental,
		Parent:        tip.ID,
		Source:        cat.Source,
		StartPosition: tip.EndPosition,
		EndPosition:   win.End,
		CreatedAt:     now.UTC(),
		Schema:        win.Schema,
		Chunks:        w.refs,
		Changes:       win.Changes,
		Transactions:  win.Transactions,
		ApplyIdentity: true,
		Sequences:     seqs,
	}
	if err := w.ch.PutManifest(ctx, m); err != nil {
		return nil, err
	}
	return m, nil
}

// cleanup deletes the chunks of a window that was not committed.
func (w *changeWriter) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, k := range w.keys {
		_ = w.ch.Store().Delete(ctx, k)
	}
}

// unconfirmed marks a failed confirmation of a position the catalog already
// names, unless the slot itself was refused (lost, in use), which stays as is.
func unconfirmed(err error, pos string) error {
	if e, ok := errcode.As(err); ok {
		if spec, _ := errcode.Lookup(e.Code); spec.Exit == errcode.ExitRefused {
			return err
		}
	}
	return errcode.Wrap(errcode.SlotUnconfirmed, err, "the chain names the window ending at %s, but the slot could not be confirmed to it", pos)
}
