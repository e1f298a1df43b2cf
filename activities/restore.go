package activities

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"

	"go.temporal.io/sdk/activity"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/pitr"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/target"
)

// PlanRestoreParams are the inputs of PlanRestore.
type PlanRestoreParams struct {
	Store StoreRef `json:"store"`
	// Through names the last link to restore; the chain's tip when empty.
	Through string `json:"through,omitempty"`
	// Until, an RFC 3339 time, restores every transaction that committed at
	// or before it and nothing after (restore --until).
	Until string `json:"until,omitempty"`
	// UntilPosition, a position of the chain's source engine (an LSN, a
	// GTID set, a binlog file:offset), restores every transaction at or
	// before it and nothing after (restore --until-position).
	UntilPosition string `json:"until_position,omitempty"`
	// Subset is the part of the chain's tables to restore (zero: all).
	Subset target.Subset `json:"subset,omitzero"`
}

// RestorePlan names the full to restore, its tables, and the incrementals
// of its segment to apply after it, in order.
type RestorePlan struct {
	ChainID string         `json:"chain_id"`
	FullID  string         `json:"full_id"`
	Tables  []RestoreTable `json:"tables"`
	Rows    int64          `json:"rows"`
	// Excluded names the tables of the full the subset leaves out.
	Excluded     []string `json:"excluded,omitempty"`
	Incrementals []string `json:"incrementals,omitempty"`
	Changes      int64    `json:"changes,omitempty"`
	// Through is the last link the restore reaches.
	Through string `json:"through"`
	// NotCarried names what the chain's source engine does not carry
	// (views, functions, …), for the operator to recreate by hand.
	NotCarried string `json:"not_carried,omitempty"`
	// Point is the point a restore --until stops at, as given; with
	// LastRecords and LastDigest when it stops inside the last incremental
	// (apply only its first LastRecords records, if its records digest is
	// still LastDigest).
	Point       string `json:"point,omitempty"`
	LastRecords int64  `json:"last_records,omitempty"`
	LastDigest  string `json:"last_digest,omitempty"`
	// LastChanges counts the row changes among those LastRecords.
	LastChanges int64 `json:"last_changes,omitempty"`
	// LastTransaction is the last transaction a restore to a point applies
	// (nil when it applies none after the full); NextTransaction the first
	// it leaves out (nil when the point is at the chain's newest one).
	LastTransaction *pitr.Transaction `json:"last_transaction,omitempty"`
	NextTransaction *pitr.Transaction `json:"next_transaction,omitempty"`
}

// RestoreTable is one table of a restore plan.
type RestoreTable struct {
	Name   string `json:"name"`
	Rows   int64  `json:"rows"`
	Chunks int    `json:"chunks"`
}

// PlanRestore loads and verifies the chain up to the link to restore (the
// tip unless Through names one), refuses when a severed-transaction finding
// of the chain involves a link on the restore path, and plans the restore:
// that link's segment full, then the segment's incrementals up to the link.
func (a *Activities) PlanRestore(ctx context.Context, p PlanRestoreParams) (RestorePlan, error) {
	defer a.heartbeat(ctx, nil).stop()
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return RestorePlan{}, a.temporalError(err)
	}
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return RestorePlan{}, a.temporalError(err)
	}
	if err := chain.ValidateCatalog(cat); err != nil {
		return RestorePlan{}, a.temporalError(err)
	}
	through := p.Through
	var cut *pitr.Cut
	if p.Until != "" || p.UntilPosition != "" {
		c, last, err := a.findPoint(ctx, ch, cat, p)
		if err != nil {
			return RestorePlan{}, a.temporalError(err)
		}
		cut, through = &c, last
	}
	if through == "" {
		through = cat.Tip().ID
	}
	if _, _, ok := cat.Find(through); !ok {
		return RestorePlan{}, a.temporalError(errcode.New(errcode.LinkNotFound, "the chain at %s has no link %s", p.Store.URL, through))
	}
	if err := ch.Verify(ctx, cat, through); err != nil {
		return RestorePlan{}, a.temporalError(err)
	}
	path, err := cat.Path(through)
	if err != nil {
		return RestorePlan{}, a.temporalError(errcode.Wrap(errcode.ChainInvalid, err, "path to %s", through))
	}
	if err := a.refuseSevered(ctx, ch, cat, path); err != nil {
		return RestorePlan{}, a.temporalError(err)
	}
	m, err := a.manifest(ctx, ch, path[0].ID)
	if err != nil {
		return RestorePlan{}, a.temporalError(err)
	}
	// What the source engine does not carry, as that engine says it (an
	// engine this worker does not link in carries no note).
	traits, _ := source.TraitsOf(m.Source.Engine)
	var plan RestorePlan
	sel, err := p.Subset.Select(m.Schema)
	if err != nil {
		return RestorePlan{}, a.temporalError(err)
	}
	_, plan.Excluded = sel.Schema(m.Schema)
	plan.ChainID, plan.FullID, plan.Through, plan.NotCarried = cat.ChainID, m.ID, through, traits.NotCarried
	for _, l := range path[1:] {
		plan.Incrementals = append(plan.Incrementals, l.ID)
		plan.Changes += l.Changes
	}
	if cut != nil {
		if err := a.planPoint(ctx, ch, cat, p, *cut, &plan); err != nil {
			return RestorePlan{}, a.temporalError(err)
		}
	}
	for _, t := range m.Tables {
		if !sel.Takes(t.Table) {
			continue
		}
		plan.Tables = append(plan.Tables, RestoreTable{Name: t.Table, Rows: t.Rows, Chunks: len(t.Chunks)})
		plan.Rows += t.Rows
	}
	if sel == nil {
		plan.Rows = m.Rows // the full's own count, as it records it
	}
	// Largest first, so the longest load starts at once.
	sort.SliceStable(plan.Tables, func(i, j int) bool {
		return tableBytes(m, plan.Tables[i].Name) > tableBytes(m, plan.Tables[j].Name)
	})
	return plan, nil
}

// findPoint parses the restore's point and finds it in the chain. It
// returns the cut and the last link of the cut's own segment: a cut may end
// on empty incrementals of later segments, which hold nothing to apply and
// are left out so the restore stays on one segment's path.
func (a *Activities) findPoint(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, p PlanRestoreParams) (pitr.Cut, string, error) {
	point, _, err := parsePoint(cat.Source.Engine, p.Until, p.UntilPosition)
	if err != nil {
		return pitr.Cut{}, "", err
	}
	cut, err := pitr.Find(ctx, ch, cat, point)
	if err != nil {
		return pitr.Cut{}, "", err
	}
	last := cut.Full.ID
	var kept []chain.Link
	for i, l := range cut.Incrementals {
		path, err := cat.Path(l.ID)
		if err != nil {
			return pitr.Cut{}, "", errcode.Wrap(errcode.ChainInvalid, err, "path to %s", l.ID)
		}
		if path[0].ID != cut.Full.ID {
			if l.Transactions > 0 || (i == len(cut.Incrementals)-1 && cut.Records >= 0) {
				return pitr.Cut{}, "", errcode.New(errcode.ChainInvalid, "the cut at %s goes on from full %s into incremental %s of another segment, which holds transactions", point, cut.Full.ID, l.ID)
			}
			continue
		}
		kept = append(kept, l)
		last = l.ID
	}
	cut.Incrementals = kept
	return cut, last, nil
}

// planPoint fills in what a restore to a point adds to its plan: the point,
// the records of the last incremental to apply with its digest, and the
// transactions on either side of the cut.
func (a *Activities) planPoint(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, p PlanRestoreParams, cut pitr.Cut, plan *RestorePlan) error {
	plan.Point = p.Until
	if plan.Point == "" {
		plan.Point = p.UntilPosition
	}
	plan.LastTransaction, plan.NextTransaction = cut.Last, cut.Next
	if len(cut.Incrementals) != len(plan.Incrementals) {
		return errcode.New(errcode.ChainInvalid, "the cut at %s names %d incrementals after full %s, its path %d", plan.Point, len(cut.Incrementals), plan.FullID, len(plan.Incrementals))
	}
	if cut.Records < 0 || len(cut.Incrementals) == 0 {
		return nil
	}
	last := cut.Incrementals[len(cut.Incrementals)-1]
	m, err := ch.LinkManifest(ctx, cat, last.ID)
	if err != nil {
		return err
	}
	plan.LastRecords, plan.LastDigest = cut.Records, m.RecordsDigest()
	// Only the records applied count as changes.
	plan.Changes -= last.Changes
	var changes int64
	err = ch.WalkIncremental(ctx, m, chain.FirstRecords(cut.Records, func(c *chain.Change) error {
		if c.Op != chain.OpBegin && c.Op != chain.OpCommit {
			changes++
		}
		return nil
	}), nil)
	if err != nil {
		return err
	}
	plan.Changes += changes
	plan.LastChanges = changes
	return nil
}

// refuseSevered runs the severed-transaction check over the whole chain and
// returns the first finding that involves a link of the restore path as its
// coded error; findings on other links do not concern this restore.
func (a *Activities) refuseSevered(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, path []chain.Link) error {
	findings, err := ch.SeveredTransactions(ctx, cat, a.severCache())
	if err != nil {
		return err
	}
	for _, f := range findings {
		for _, l := range path {
			if f.Involves(l.ID) {
				return errcode.New(f.Code(), "refusing to restore through %s: a link on the restore path is damaged: %s", path[len(path)-1].ID, f)
			}
		}
	}
	return nil
}

// TargetParams name a restore's store, target and full.
type TargetParams struct {
	Store   StoreRef           `json:"store"`
	Target  credentials.DSNRef `json:"target"`
	ChainID string             `json:"chain_id"`
	FullID  string             `json:"full_id"`
	Replace bool               `json:"replace,omitempty"`
	// Subset is the part of the chain's tables restored (zero: all).
	Subset target.Subset `json:"subset,omitzero"`
	// Incrementals counts the incrementals the restore applies after the
	// full: with none, it writes no position (and no control table).
	Incrementals int `json:"incrementals,omitempty"`
	// ApplyConcurrency is how many lanes apply each incremental
	// (restore --apply-concurrency; 0 or 1: one transaction per
	// incremental).
	ApplyConcurrency int `json:"apply_concurrency,omitempty"`
}

// restoreFull is what a restore step works on: the chain, the full, the
// subset of the full's schema the restore creates, and the target.
type restoreFull struct {
	ch     *chain.Chain
	m      *chain.Manifest
	schema *chain.Schema
	sel    *target.Selection
	t      target.Target
}

// openFull opens the chain, the full a restore loads and its target; the
// caller closes the target.
func (a *Activities) openFull(ctx context.Context, p TargetParams) (restoreFull, error) {
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return restoreFull{}, err
	}
	m, err := a.manifest(ctx, ch, p.FullID)
	if err != nil {
		return restoreFull{}, err
	}
	if m.Schema == nil {
		return restoreFull{}, errcode.New(errcode.ManifestInvalid, "full %s records no schema", m.ID)
	}
	sel, err := p.Subset.Select(m.Schema)
	if err != nil {
		return restoreFull{}, err
	}
	schema, _ := sel.Schema(m.Schema)
	t, err := openTarget(ctx, p.Target)
	if err != nil {
		return restoreFull{}, err
	}
	return restoreFull{ch: ch, m: m, schema: schema, sel: sel, t: t}, nil
}

// PrepareTarget refuses a target whose tables already hold rows (unless
// Replace) and creates the schemas, types and free sequences the tables need.
func (a *Activities) PrepareTarget(ctx context.Context, p TargetParams) error {
	defer a.heartbeat(ctx, nil).stop()
	f, err := a.openFull(ctx, p)
	if err != nil {
		return a.temporalError(err)
	}
	defer f.t.Close(context.Background())
	if err := f.t.Prepare(ctx, f.schema, p.Replace); err != nil {
		return a.temporalError(err)
	}
	// The incrementals after the full apply as a broker's do, under a
	// position of the restore's own: it starts at the full, its marks
	// cleared, so a restore that starts over skips nothing. A restore of
	// a full alone writes no control table, and drops the position an
	// earlier restore of the chain left.
	st := f.t.State()
	stream := RestoreStream(p.ChainID)
	if p.Incrementals == 0 {
		if _, found, err := st.ReadState(ctx, stream); err != nil || !found {
			return a.temporalError(err)
		}
		return a.temporalError(st.ReplaceState(ctx, stream, nil))
	}
	if err := st.EnsureControlTables(ctx); err != nil {
		return a.temporalError(err)
	}
	tok := apply.Token{Engine: apply.EngineBroker, Stream: stream, ChainID: p.ChainID, LastApplied: p.FullID, Subset: p.Subset}
	return a.temporalError(replaceState(ctx, st, tok))
}

// RestoreStream is the stream a restore of chain chainID applies its
// incrementals under: a position row and marks in the target's control
// tables, as a broker's. Its ':' is refused in a --stream-id, so no
// broker shares it.
func RestoreStream(chainID string) string { return "restore:" + chainID }

// EndRestore ends the restore's stream once every incremental is applied:
// its marks go, and its position stays, with no run holding it, as the
// record of the last link the restore applied (what a broker's
// --at-chain-id then names). The next restore of the chain replaces it.
func (a *Activities) EndRestore(ctx context.Context, p TargetParams) error {
	defer a.heartbeat(ctx, nil).stop()
	t, err := openTarget(ctx, p.Target)
	if err != nil {
		return a.temporalError(err)
	}
	defer t.Close(context.Background())
	stream := RestoreStream(p.ChainID)
	row, found, err := t.State().ReadState(ctx, stream)
	if err != nil {
		return a.temporalError(err)
	}
	if !found {
		return a.temporalError(errcode.New(errcode.RestorePositionMissing, "the target holds no position of the restore of chain %s (stream %s) to end", p.ChainID, stream))
	}
	tok, err := apply.Decode(row.Token, row.Checksum)
	if err != nil {
		return a.temporalError(errcode.Wrap(errcode.BrokerPositionCorrupt, err, "stream %s", stream))
	}
	tok.Owner = ""
	return a.temporalError(replaceState(ctx, t.State(), tok))
}

// LoadTableParams name one table to load.
type LoadTableParams struct {
	TargetParams
	Table string `json:"table"`
}

// LoadProgress is the heartbeat of LoadTable.
type LoadProgress struct {
	Table    string `json:"table"`
	Rows     int64  `json:"rows"`
	RawBytes int64  `json:"raw_bytes"`
}

// LoadTable recreates and loads one table in one target transaction, so a
// retry redoes only this table and never doubles a row.
func (a *Activities) LoadTable(ctx context.Context, p LoadTableParams) (int64, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	f, err := a.openFull(ctx, p.TargetParams)
	if err != nil {
		return 0, a.temporalError(err)
	}
	defer f.t.Close(context.Background())
	var td *chain.TableData
	for i := range f.m.Tables {
		if f.m.Tables[i].Table == p.Table {
			td = &f.m.Tables[i]
		}
	}
	if td == nil {
		return 0, a.temporalError(fmt.Errorf("full %s has no table %s", f.m.ID, p.Table))
	}
	if !f.sel.Takes(p.Table) {
		return 0, a.temporalError(fmt.Errorf("table %s of full %s is not in the restore's subset (%s)", p.Table, f.m.ID, p.Subset))
	}
	var rows, raw atomic.Int64
	hb.report(func() any {
		return LoadProgress{Table: p.Table, Rows: rows.Load(), RawBytes: raw.Load()}
	})
	n, err := f.t.LoadTable(ctx, f.ch, f.schema, *td, func(r, b int64) {
		rows.Add(r)
		raw.Add(b)
	})
	if err == nil && a.Observe != nil {
		a.Observe.RowsRestored(n)
	}
	return n, a.temporalError(err)
}

// FinishTarget adds foreign keys and sets the free sequences' values.
func (a *Activities) FinishTarget(ctx context.Context, p TargetParams) error {
	defer a.heartbeat(ctx, nil).stop()
	f, err := a.openFull(ctx, p)
	if err != nil {
		return a.temporalError(err)
	}
	defer f.t.Close(context.Background())
	return a.temporalError(f.t.Finish(ctx, f.schema))
}

// ApplyIncrementalParams name one incremental a restore applies.
type ApplyIncrementalParams struct {
	TargetParams
	Incremental string `json:"incremental"`
	// After is the link the restore's position must record as applied
	// before this incremental: the previous incremental, or the full for
	// the first. Empty in runs planned before restores applied through
	// positions: the full, or the plan's previous incremental, is then
	// taken from the chain.
	After string `json:"after,omitempty"`
	// Records, when positive, applies only the incremental's first Records
	// records: the restore to a point stops inside it. 0 applies them all.
	Records int64 `json:"records,omitempty"`
	// RecordsDigest is the incremental's records digest when the restore
	// was planned; with Records it makes sure the count still marks the
	// same transactions (a compaction may have rewritten the incremental).
	RecordsDigest string `json:"recordsDigest,omitempty"`
}

// ApplyProgress is the heartbeat of ApplyIncremental.
type ApplyProgress struct {
	Incremental string `json:"incremental"`
	Changes     int64  `json:"changes"`
}

// ApplyIncremental applies one incremental to a restored target through the
// broker's apply (internal/apply) under the restore's own position
// (RestoreStream): a retry resumes from what the target committed and never
// applies a change twice. With one lane the incremental applies in one
// target transaction, position included; with more, on lanes as a broker
// does, when the judgment finds every table it touches replayable so
// (otherwise on one lane, with a warning). It returns the number of
// changes of the incremental, also when a retry finds it applied.
func (a *Activities) ApplyIncremental(ctx context.Context, p ApplyIncrementalParams) (int64, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return 0, a.temporalError(err)
	}
	m, schema, err := a.incrementalAt(ctx, ch, p.Incremental)
	if err != nil {
		return 0, a.temporalError(err)
	}
	if p.Records > 0 && m.RecordsDigest() != p.RecordsDigest {
		return 0, a.temporalError(errcode.New(errcode.RestoreLinkRewritten,
			"incremental %s of chain %s changed since the restore was planned: its records digest is %s, the plan counted %d records of %s",
			m.ID, p.ChainID, m.RecordsDigest(), p.Records, p.RecordsDigest))
	}
	after := p.After
	if after == "" {
		if after, err = a.linkBefore(ctx, ch, m.ID); err != nil {
			return 0, a.temporalError(err)
		}
	}
	t, err := openTarget(ctx, p.Target)
	if err != nil {
		return 0, a.temporalError(err)
	}
	defer t.Close(context.Background())
	stream := RestoreStream(p.ChainID)
	info := activity.GetInfo(ctx)
	owner := fmt.Sprintf("%s/%s/%d", info.WorkflowExecution.RunID, info.ActivityID, info.Attempt)
	if err := apply.Claim(ctx, t.State(), stream, owner); err != nil {
		if errcode.Is(err, errcode.BrokerNoPosition) {
			err = errcode.New(errcode.RestorePositionMissing, "the target holds no position of the restore of chain %s (stream %s) to apply incremental %s after", p.ChainID, stream, m.ID)
		}
		return 0, a.temporalError(err)
	}
	o := apply.RestoreOptions(stream, owner, after, p.Subset, p.Records, p.RecordsDigest)
	if p.ApplyConcurrency > 1 {
		if err := restoreLanes(ctx, t, ch, m, schema, p, &o); err != nil {
			return 0, a.temporalError(err)
		}
	}
	var done atomic.Int64
	hb.report(func() any { return ApplyProgress{Incremental: m.ID, Changes: done.Load()} })
	o.Progress = func(n int64) { done.Store(n) }
	r, err := apply.ApplyIncremental(ctx, ch, m, schema, t, o)
	if err != nil {
		return 0, a.temporalError(err)
	}
	if r.Replan {
		return 0, a.temporalError(errcode.New(errcode.RestoreLinkRewritten,
			"incremental %s of chain %s changed since the restore was planned", m.ID, p.ChainID))
	}
	if r.Stopped {
		// The source's counters as the incremental ended, raised over the
		// part a restore to a point applies (never lowered; a counter
		// ahead of its rows is harmless).
		sel, err := p.Subset.Select(schema)
		if err != nil {
			return 0, a.temporalError(err)
		}
		if _, err := apply.RaiseSequences(ctx, t, m, schema, sel); err != nil {
			return 0, a.temporalError(err)
		}
	}
	return m.Changes, nil
}

// restoreLanes sets o to apply on p.ApplyConcurrency lanes, with the
// insert arbiters the judgment of m finds on the target, when the
// judgment finds the incremental replayable on lanes exactly once; a
// table without key or identities leaves o on one lane, one transaction.
func restoreLanes(ctx context.Context, t target.Target, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, p ApplyIncrementalParams, o *apply.Options) error {
	sel, err := p.Subset.Select(schema)
	if err != nil {
		return err
	}
	j, err := t.JudgeIncremental(ctx, ch, m, schema, sel)
	if errcode.Is(err, errcode.BrokerKeylessTable) {
		slog.Warn("restore: this incremental applies on one lane, in one transaction: a table it touches has no key and its changes no identities",
			"incremental", m.ID, "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	o.Lanes, o.Arbiters, o.CheckpointChanges = p.ApplyConcurrency, j.Arbiters, apply.DefaultCheckpointChanges
	return nil
}

// linkBefore is the link before incremental id in its segment: the
// previous incremental, or the segment's full.
func (a *Activities) linkBefore(ctx context.Context, ch *chain.Chain, id string) (string, error) {
	cat, err := a.catalogs.Latest(ctx, ch)
	if err != nil {
		return "", err
	}
	path, err := cat.Path(id)
	if err != nil {
		return "", err
	}
	if len(path) < 2 {
		return "", errcode.New(errcode.ManifestInvalid, "link %s is a full, not an incremental", id)
	}
	return path[len(path)-2].ID, nil
}

// tableBytes is the raw size of a table's chunks in a full.
func tableBytes(m *chain.Manifest, table string) int64 {
	var n int64
	for _, t := range m.Tables {
		if t.Table == table {
			for _, c := range t.Chunks {
				n += c.RawSize
			}
		}
	}
	return n
}
