// Package chainview shows an operator what a backup chain holds: its
// segments and links with their commit-time ranges, counts and sizes, where
// each broker stands (List), and the transactions and changes of one link
// (Inspect). It only reads the store, through the chain package's readers
// and change decoder; it needs no worker and no Temporal.
package chainview

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Listing is what List reports about a chain. Its JSON field names are
// stable (docs/operations.md, "Browse a chain").
type Listing struct {
	// ChainID is the ID of the chain's first full.
	ChainID string `json:"chain_id"`
	// Generation is the catalog generation listed.
	Generation int64 `json:"generation"`
	// Source is the database the chain was taken from.
	Source chain.SourceInfo `json:"source"`
	// Sealed is true when the chain's manifests are encrypted.
	Sealed bool `json:"sealed"`
	// KeyNeeded is true when they are and no key was given: commit times
	// were not read (the catalog's counts and the chunk sizes were).
	KeyNeeded bool `json:"key_needed"`
	// Segments in chain order.
	Segments []SegmentView `json:"segments"`
	// Brokers are the position reports found in the store, by stream.
	Brokers []BrokerView `json:"brokers"`
}

// SegmentView is one segment of a Listing.
type SegmentView struct {
	// Index is the segment's place in the catalog, from 0.
	Index int `json:"index"`
	// Capped is true once a newer segment follows.
	Capped bool `json:"capped"`
	// Layout names the layout of a compacted segment; empty otherwise.
	Layout string `json:"layout,omitempty"`
	// Filters are the table filters, excluded columns and masks the
	// segment was written with (absent when everything crossed, or when
	// the chain is sealed and no key was given).
	Filters *chain.Filters `json:"filters,omitempty"`
	// Links are the segment's full and then its incrementals.
	Links []LinkView `json:"links"`
}

// LinkView is one link of a Listing.
type LinkView struct {
	// ID is the link's content-derived ID.
	ID string `json:"id"`
	// Kind is "full" or "incremental".
	Kind string `json:"kind"`
	// StartPosition and EndPosition are the link's source positions.
	StartPosition string `json:"start_position"`
	EndPosition   string `json:"end_position"`
	// CreatedAt is when the producer finished writing the link.
	CreatedAt time.Time `json:"created_at"`
	// FirstCommit and LastCommit are the commit times of the incremental's
	// first and last source transactions; absent for a full, for an
	// incremental without transactions, and without the key of a sealed
	// chain.
	FirstCommit *time.Time `json:"first_commit,omitempty"`
	LastCommit  *time.Time `json:"last_commit,omitempty"`
	// Transactions and Changes count an incremental's records; Rows a
	// full's rows (from the catalog).
	Transactions int64 `json:"transactions"`
	Changes      int64 `json:"changes"`
	Rows         int64 `json:"rows"`
	// Chunks and StoredBytes are the number and stored size of the chunks
	// the link's manifest names (for a compacted segment's incremental, the
	// merged chunks its records lie in, which it shares with neighbours).
	Chunks      int   `json:"chunks"`
	StoredBytes int64 `json:"stored_bytes"`
	// Brokers are the streams whose last fully applied link this is.
	Brokers []string `json:"brokers,omitempty"`

	// filters are a full's recorded filters.
	filters *chain.Filters
}

// Broker states in a BrokerView.
const (
	// BrokerAt: the broker's last applied link is in the chain.
	BrokerAt = "at"
	// BrokerOtherChain: the report names another chain.
	BrokerOtherChain = "other_chain"
	// BrokerLinkGone: the report names a link the catalog no longer holds
	// (pruned past the broker).
	BrokerLinkGone = "link_gone"
	// BrokerUnreadable: the report does not parse.
	BrokerUnreadable = "unreadable"
)

// BrokerView is one broker's reported position.
type BrokerView struct {
	// Stream is the broker's --stream-id.
	Stream string `json:"stream"`
	// State is BrokerAt, BrokerOtherChain, BrokerLinkGone or BrokerUnreadable.
	State string `json:"state"`
	// LastApplied is the last link the broker fully applied.
	LastApplied string `json:"last_applied,omitempty"`
	// Segment is the index of that link's segment (BrokerAt only).
	Segment int `json:"segment"`
	// Behind is how many links follow it in the chain (BrokerAt only).
	Behind int `json:"behind"`
	// UpdatedAt is when the broker last wrote its report.
	UpdatedAt time.Time `json:"updated_at"`
}

// List describes the chain ch holds: its latest catalog, each link's
// commit-time range and stored size, and the brokers' reported positions.
// It reads each incremental's manifest and the first and last of its
// chunks that hold records. A sealed chain read without its key is listed
// from the catalog and the manifests' clear chunk lists (Listing.KeyNeeded).
func List(ctx context.Context, ch *chain.Chain) (*Listing, error) {
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return nil, err
	}
	out := &Listing{ChainID: cat.ChainID, Generation: cat.Generation, Source: cat.Source,
		Segments: make([]SegmentView, 0, len(cat.Segments)), Brokers: []BrokerView{}}
	views, err := describeLinks(ctx, ch, cat, out)
	if err != nil {
		return nil, err
	}
	for si, s := range cat.Segments {
		n := 1 + len(s.Incrementals)
		out.Segments = append(out.Segments, SegmentView{Index: si, Capped: s.Capped, Layout: s.Layout, Filters: views[0].filters, Links: views[:n:n]})
		views = views[n:]
	}
	where := map[string]*LinkView{}
	order := map[string]int{}
	n := 0
	for si := range out.Segments {
		for li := range out.Segments[si].Links {
			lv := &out.Segments[si].Links[li]
			where[lv.ID], order[lv.ID] = lv, n
			n++
		}
	}
	reports, err := ch.BrokerPositions(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the brokers' reported positions: %w", err)
	}
	for _, p := range reports {
		bv := BrokerView{Stream: p.Stream, LastApplied: p.LastApplied, UpdatedAt: p.UpdatedAt, Segment: -1, Behind: -1}
		switch {
		case p.LastApplied == "":
			bv.State = BrokerUnreadable
		case p.ChainID != cat.ChainID:
			bv.State = BrokerOtherChain
		default:
			lv, ok := where[p.LastApplied]
			if !ok {
				bv.State = BrokerLinkGone
				break
			}
			_, si, _ := cat.Find(p.LastApplied)
			bv.State, bv.Segment, bv.Behind = BrokerAt, si, n-1-order[p.LastApplied]
			lv.Brokers = append(lv.Brokers, p.Stream)
		}
		out.Brokers = append(out.Brokers, bv)
	}
	return out, nil
}

// listReaders bounds how many links List describes at once: each costs a
// few requests to the store, and on an object store their latency, not
// the CPU, is what a long chain's listing waits on.
const listReaders = 8

// describeLinks describes every link of cat, in chain order. The first
// link tells whether the chain is sealed and the key missing; the others
// are then read by up to listReaders goroutines.
func describeLinks(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, out *Listing) ([]LinkView, error) {
	links := cat.Links()
	views := make([]LinkView, len(links))
	if len(links) == 0 {
		return views, nil
	}
	var err error
	views[0], out.Sealed, out.KeyNeeded, err = describeLink(ctx, ch, cat, links[0], false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(links))
	sealed, keyNeeded := make([]bool, len(links)), make([]bool, len(links))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(listReaders, len(links)-1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				views[i], sealed[i], keyNeeded[i], errs[i] = describeLink(ctx, ch, cat, links[i], out.KeyNeeded)
				if errs[i] != nil {
					cancel()
				}
			}
		}()
	}
	for i := 1; i < len(links) && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		// A chain whose links are not all alike (a plaintext full before
		// sealed links) is reported by its most guarded link.
		out.Sealed, out.KeyNeeded = out.Sealed || sealed[i], out.KeyNeeded || keyNeeded[i]
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return views, nil
}

// describeLink reads what the listing shows of one link beyond the
// catalog: sizes, and an incremental's first and last commit times.
// keyless says the chain is sealed and no key was given, so only the
// manifest's clear chunk list is read; sealed and keyNeeded report what
// reading the link showed.
func describeLink(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, l chain.Link, keyless bool) (lv LinkView, sealed, keyNeeded bool, err error) {
	lv = LinkView{ID: l.ID, Kind: l.Kind, StartPosition: l.StartPosition, EndPosition: l.EndPosition,
		CreatedAt: l.CreatedAt, Transactions: l.Transactions, Changes: l.Changes, Rows: l.Rows}
	if !keyless {
		m, err := ch.LinkManifest(ctx, cat, l.ID)
		switch {
		case err == nil:
			sealed = ch.Keyring() != nil && ch.Keyring().Trust().Wrapper != nil
			lv.filters = m.Filters
			seen := map[string]bool{}
			for _, r := range m.AllChunks() {
				if !seen[r.Key] {
					seen[r.Key] = true
					lv.Chunks++
					lv.StoredBytes += r.Size
				}
			}
			if m.Kind == chain.KindIncremental {
				first, last, err := commitRange(ctx, ch, m)
				if err != nil {
					return lv, sealed, false, fmt.Errorf("read the commit times of incremental %s: %w", l.ID, err)
				}
				lv.FirstCommit, lv.LastCommit = first, last
			}
			return lv, sealed, false, nil
		case errcode.Is(err, errcode.KeyRequired):
			sealed, keyNeeded = true, true
		default:
			return lv, false, false, fmt.Errorf("read the manifest of link %s: %w", l.ID, err)
		}
	}
	// Without the key: the sealed manifest's clear chunk list.
	chunks, err := ch.ManifestChunks(ctx, l.ID)
	if err != nil {
		return lv, sealed, keyNeeded, fmt.Errorf("read the chunk list of link %s: %w", l.ID, err)
	}
	for _, c := range chunks {
		lv.Chunks++
		lv.StoredBytes += c.Size
	}
	return lv, sealed, keyNeeded, nil
}

// commitRange returns the commit times of an incremental's first and last
// source transactions, reading only the first and the last of its chunks
// that hold records (as the severed-transaction check does). A record's
// commit time is carried by the Begin and Commit records; nil when none is.
func commitRange(ctx context.Context, ch *chain.Chain, m *chain.Manifest) (first, last *time.Time, err error) {
	k := len(m.Chunks)
	for i, ref := range m.Chunks {
		f, l, n, err := chunkCommitTimes(ctx, ch, ref)
		if err != nil {
			return nil, nil, err
		}
		if n > 0 && first == nil {
			first = f
		}
		if l != nil {
			last = l
		}
		if first != nil {
			k = i
			break
		}
	}
	for j := len(m.Chunks) - 1; j > k; j-- {
		_, l, _, err := chunkCommitTimes(ctx, ch, m.Chunks[j])
		if err != nil {
			return nil, nil, err
		}
		if l != nil {
			return first, l, nil
		}
	}
	return first, last, nil
}

// chunkCommitTimes decodes one change chunk and returns the first and last
// commit times its records carry, and how many records it holds.
func chunkCommitTimes(ctx context.Context, ch *chain.Chain, ref chain.ChunkRef) (first, last *time.Time, n int64, err error) {
	it, err := ch.ReadChangeChunk(ctx, ref)
	if err != nil {
		return nil, nil, 0, err
	}
	for it.Next() {
		n++
		c := it.Change()
		if c.CommitTime == 0 {
			continue
		}
		t := CommitTime(c)
		if first == nil {
			first = &t
		}
		last = &t
	}
	if err := it.Err(); err != nil {
		return nil, nil, 0, fmt.Errorf("decode chunk %s: %w", ref.Key, err)
	}
	return first, last, n, nil
}

// CommitTime returns the commit time a Begin or Commit record carries.
func CommitTime(c *chain.Change) time.Time {
	return time.UnixMicro(c.CommitTime).UTC()
}
