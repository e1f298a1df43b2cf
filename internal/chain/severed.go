package chain

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Shapes of damage the severed-transaction check reports (see
// docs/chain-format.md §6.4).
const (
	// ShapeSplit (A): a source transaction is cut across two incrementals,
	// or an incremental ends or begins inside one.
	ShapeSplit = "A"
	// ShapeRedelivered (B): an incremental's first transaction is the one
	// the incremental before it ended with, delivered again.
	ShapeRedelivered = "B"
	// ShapeIncomplete (C): an incremental's end position is not where its
	// stored changes end, so changes of its window are missing.
	ShapeIncomplete = "C"
)

// Finding is one piece of severed-transaction damage in a chain.
type Finding struct {
	// Shape is ShapeSplit, ShapeRedelivered or ShapeIncomplete.
	Shape string `json:"shape"`
	// Links are the IDs of the incrementals involved, in chain order.
	Links []string `json:"links"`
	// XID and CommitLSN identify the source transaction concerned; both are
	// zero when there is none (shape C of an incremental without
	// transactions) or the records carry no identity.
	XID       uint32 `json:"xid,omitempty"`
	CommitLSN uint64 `json:"commit_lsn,omitempty"`
	// Tx is the transaction's opaque ID, for engines that name transactions
	// by one (Identity.Tx).
	Tx string `json:"tx,omitempty"`
	// Detail says what was found, for an operator.
	Detail string `json:"detail"`
}

// String renders the finding on one line, for logs and the CLI.
func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shape %s in incremental", f.Shape)
	if len(f.Links) > 1 {
		b.WriteString("s")
	}
	b.WriteString(" " + strings.Join(f.Links, ", "))
	if f.Tx != "" {
		fmt.Fprintf(&b, " (transaction %s)", f.Tx)
	} else if f.XID != 0 || f.CommitLSN != 0 {
		fmt.Fprintf(&b, " (transaction xid %d, commit %s)", f.XID, FormatLSN(f.CommitLSN))
	}
	b.WriteString(": " + f.Detail)
	return b.String()
}

// Code is the error code a refusal over this finding carries:
// errcode.BackupIncomplete for shape C, errcode.ChainSeveredTransaction
// for shapes A and B.
func (f Finding) Code() errcode.Code {
	if f.Shape == ShapeIncomplete {
		return errcode.BackupIncomplete
	}
	return errcode.ChainSeveredTransaction
}

// Err returns the finding as a coded error whose message names its shape
// and links.
func (f Finding) Err() error {
	return errcode.New(f.Code(), "%s", f)
}

// Involves reports whether the incremental id is one of the finding's links.
func (f Finding) Involves(id string) bool {
	for _, l := range f.Links {
		if l == id {
			return true
		}
	}
	return false
}

// txIdentity names a source transaction.
type txIdentity = Identity

// severFacts are what the check needs to know about one incremental. They
// follow from its manifest and chunks alone, and a link's ID is derived from
// its manifest (which records its chunks' digests), so they never change for
// an ID.
type severFacts struct {
	engine     string // the source engine, which says how positions compare
	start, end string // the manifest's positions
	records    bool   // it holds at least one change record
	// startsInside: its first record is not a Begin; first is the
	// transaction of its first record.
	startsInside bool
	first        txIdentity
	// endsInside: its last record is not a Commit; last is the transaction
	// of its last record.
	endsInside bool
	last       txIdentity
	// committed: it holds a Commit record; lastCommit is the transaction of
	// the last one and lastEndLSN that record's EndLSN.
	committed  bool
	lastCommit txIdentity
	lastEndLSN uint64
}

// SeverCache remembers, per incremental, the boundary facts the
// severed-transaction check read from its chunks, so a later check reads
// only incrementals it has not seen. Entries are keyed by the link's
// content-derived ID and never go stale. The zero value is ready to use; a
// SeverCache is safe for concurrent use.
type SeverCache struct {
	mu    sync.Mutex
	facts map[string]severFacts
}

// NewSeverCache returns an empty cache.
func NewSeverCache() *SeverCache { return &SeverCache{} }

func (c *SeverCache) get(id string) (severFacts, bool) {
	if c == nil {
		return severFacts{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.facts[id]
	return f, ok
}

func (c *SeverCache) put(id string, f severFacts) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.facts == nil {
		c.facts = make(map[string]severFacts)
	}
	c.facts[id] = f
}

// SeveredTransactions checks every incremental of the chain cat describes,
// in chain order, for the three shapes of severed-transaction damage
// (docs/chain-format.md §6.4) and returns every finding, in chain order; no
// finding means the chain is clean. Consecutive incrementals are compared
// across fulls (a rotation's closing incremental is followed by the next
// segment's first incremental); incrementals without records are skipped
// in that comparison. It reads each incremental's manifest and the chunks
// at its two ends (more only when its last chunk holds no Commit record),
// one chunk at a time, and remembers what it read in cache (nil: no cache).
// A damaged manifest or chunk is returned as its coded error.
func (c *Chain) SeveredTransactions(ctx context.Context, cat *Catalog, cache *SeverCache) ([]Finding, error) {
	var out []Finding
	var prev severFacts
	prevID := ""
	for _, l := range cat.Links() {
		if l.Kind != KindIncremental {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := c.severFactsOf(ctx, cat, l.ID, cache)
		if err != nil {
			return nil, err
		}
		if f.records {
			if fd, ok := boundaryFinding(prevID, prev, l.ID, f); ok {
				out = append(out, fd)
			}
			prev, prevID = f, l.ID
		}
		if fd, ok := incompleteFinding(l.ID, f); ok {
			out = append(out, fd)
		}
	}
	if fd, ok := boundaryFinding(prevID, prev, "", severFacts{}); ok {
		out = append(out, fd)
	}
	return out, nil
}

// boundaryFinding judges the boundary between the incremental prevID (empty
// before the first) and the incremental curID (empty after the last): shapes
// A and B.
func boundaryFinding(prevID string, prev severFacts, curID string, cur severFacts) (Finding, bool) {
	switch {
	case prevID != "" && prev.endsInside:
		f := Finding{Shape: ShapeSplit, Links: []string{prevID}, XID: prev.last.XID, CommitLSN: prev.last.CommitLSN, Tx: prev.last.Tx}
		switch {
		case curID == "":
			f.Detail = "the chain's last incremental ends inside a transaction: its Commit record is missing"
		case cur.startsInside && cur.first == prev.last:
			f.Links = append(f.Links, curID)
			f.Detail = "the transaction is cut in two: the first incremental ends inside it, the second begins inside it"
		case cur.startsInside:
			f.Links = append(f.Links, curID)
			f.Detail = fmt.Sprintf("the first incremental ends inside the transaction, the second begins inside another one (%s): the Commit of one and the Begin of the other are missing", cur.first)
		case cur.first == prev.last:
			f.Links = append(f.Links, curID)
			f.Detail = "the first incremental ends inside the transaction and the second delivers it again from its Begin record"
		default:
			f.Detail = fmt.Sprintf("the incremental ends inside the transaction and the next one (%s) does not continue it: the rest of it is missing", curID)
		}
		return f, true
	case curID != "" && cur.startsInside:
		f := Finding{Shape: ShapeSplit, Links: []string{curID}, XID: cur.first.XID, CommitLSN: cur.first.CommitLSN, Tx: cur.first.Tx,
			Detail: "the incremental begins inside a transaction: its Begin record is missing"}
		if prevID != "" {
			f.Detail += fmt.Sprintf(" (the incremental before it, %s, ends with a complete transaction)", prevID)
		}
		return f, true
	case prevID != "" && curID != "" && cur.engine == "postgres" && prev.last == cur.first && (cur.first.CommitLSN != 0 || cur.first.Tx != ""):
		// Shape B is judged on PostgreSQL chains only: there a transaction
		// delivered again is the known failure of a slot confirmed too
		// early. Other engines' chains are judged by shapes A and C.
		return Finding{Shape: ShapeRedelivered, Links: []string{prevID, curID}, XID: cur.first.XID, CommitLSN: cur.first.CommitLSN, Tx: cur.first.Tx,
			Detail: "the second incremental's first transaction is the first's last transaction, delivered again"}, true
	}
	return Finding{}, false
}

// incompleteFinding judges one incremental's end position against its
// records: shape C.
func incompleteFinding(id string, f severFacts) (Finding, bool) {
	if !f.committed {
		if SamePosition(f.engine, f.start, f.end) {
			return Finding{}, false
		}
		return Finding{Shape: ShapeIncomplete, Links: []string{id},
			Detail: fmt.Sprintf("the incremental holds no complete transaction, yet its end position %s is not its start position %s: the changes between are missing",
				f.end, f.start)}, true
	}
	lsn, ok := lsnOf(f.engine)
	if !ok {
		// The engine's records carry no log positions to compare with.
		return Finding{}, false
	}
	fd := Finding{Shape: ShapeIncomplete, Links: []string{id}, XID: f.lastCommit.XID, CommitLSN: f.lastCommit.CommitLSN, Tx: f.lastCommit.Tx}
	end, err := lsn.parse(f.end)
	switch {
	case err != nil:
		fd.Detail = fmt.Sprintf("its end position %q is not a log position; its last transaction ends at %s",
			f.end, lsn.format(f.lastEndLSN))
	case end > f.lastEndLSN:
		fd.Detail = fmt.Sprintf("its end position %s lies past %s, where its last stored transaction ends: the changes between are missing",
			f.end, lsn.format(f.lastEndLSN))
	case end < f.lastEndLSN:
		fd.Detail = fmt.Sprintf("its end position %s lies before %s, where its last stored transaction ends",
			f.end, lsn.format(f.lastEndLSN))
	default:
		return Finding{}, false
	}
	return fd, true
}

// severFactsOf returns the facts of incremental id, from cache or by reading
// its manifest and chunks (through its segment's layout when cat names one:
// a smart compaction's records have facts of their own, so the cache keys
// on the layout too).
func (c *Chain) severFactsOf(ctx context.Context, cat *Catalog, id string, cache *SeverCache) (severFacts, error) {
	key := id
	if _, si, ok := cat.Find(id); ok && cat.Segments[si].Layout != "" {
		key = id + "@" + cat.Segments[si].Layout
	}
	if f, ok := cache.get(key); ok {
		return f, nil
	}
	m, err := c.LinkManifest(ctx, cat, id)
	if err != nil {
		return severFacts{}, err
	}
	if m.Kind != KindIncremental {
		return severFacts{}, errcode.New(errcode.ChainInvalid, "link %s: the catalog lists an incremental, its manifest is a %s", id, m.Kind)
	}
	f := severFacts{engine: m.Source.Engine, start: m.StartPosition, end: m.EndPosition}

	// The first chunk that holds a record gives the start.
	head, k := chunkFacts{}, -1
	for i, ref := range m.Chunks {
		cf, err := c.scanChangeChunk(ctx, ref)
		if err != nil {
			return severFacts{}, err
		}
		if cf.records > 0 {
			head, k = cf, i
			break
		}
	}
	if k < 0 {
		cache.put(key, f)
		return f, nil
	}
	f.records = true
	f.startsInside = head.firstOp != OpBegin
	f.first = head.first

	// Walk back from the last chunk: the last record, then the last Commit
	// record, which may sit in an earlier chunk when the incremental ends
	// inside a transaction.
	haveLast := false
	for j := len(m.Chunks) - 1; j > k && !(haveLast && f.committed); j-- {
		cf, err := c.scanChangeChunk(ctx, m.Chunks[j])
		if err != nil {
			return severFacts{}, err
		}
		if cf.records == 0 {
			continue
		}
		if !haveLast {
			f.endsInside, f.last, haveLast = cf.lastOp != OpCommit, cf.last, true
		}
		if cf.committed {
			f.committed, f.lastCommit, f.lastEndLSN = true, cf.lastCommit, cf.lastEndLSN
		}
	}
	if !haveLast {
		f.endsInside, f.last = head.lastOp != OpCommit, head.last
	}
	if !f.committed && head.committed {
		f.committed, f.lastCommit, f.lastEndLSN = true, head.lastCommit, head.lastEndLSN
	}
	cache.put(key, f)
	return f, nil
}

// chunkFacts summarise one change chunk for the check.
type chunkFacts struct {
	records    int64
	firstOp    Op
	first      txIdentity
	lastOp     Op
	last       txIdentity
	committed  bool
	lastCommit txIdentity
	lastEndLSN uint64
}

// scanChangeChunk reads one change chunk and walks its records, keeping
// only the summary.
func (c *Chain) scanChangeChunk(ctx context.Context, ref ChunkRef) (chunkFacts, error) {
	it, err := c.ReadChangeChunk(ctx, ref)
	if err != nil {
		return chunkFacts{}, err
	}
	var f chunkFacts
	for it.Next() {
		ch := it.Change()
		id := ch.Identity()
		if f.records == 0 {
			f.firstOp, f.first = ch.Op, id
		}
		f.records++
		f.lastOp, f.last = ch.Op, id
		if ch.Op == OpCommit {
			f.committed, f.lastCommit, f.lastEndLSN = true, id, ch.EndLSN
		}
	}
	if err := it.Err(); err != nil {
		return chunkFacts{}, chunkErr(err, ref.Key)
	}
	return f, nil
}
