package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

// A checkpoint stores a segment's incrementals in pages: every run of
// pageLinks incrementals from the segment's start is one object named by the
// SHA-256 of its bytes (catalog/pages/<sha256>.json), written once and named
// by every later checkpoint while the segment lasts; only the rest (fewer
// than pageLinks) is written inline. A checkpoint therefore costs the
// number of pages plus one page, not the number of links.
const (
	pagePrefix = CatalogPrefix + "pages/"
	pageLinks  = 1000
	// pageReaders bounds the pages a loader reads at once.
	pageReaders = 8
)

// PageKey returns the key of the checkpoint page whose bytes hash to sha.
func PageKey(sha string) string { return pagePrefix + sha + ".json" }

// pageRef names one page of a checkpoint segment.
type pageRef struct {
	SHA256 string `json:"sha256"`
	Links  int    `json:"links"`
}

// checkpointSegment is a segment as a checkpoint stores it: Pages, then
// Incrementals, are its incrementals in order.
type checkpointSegment struct {
	Full         Link      `json:"full"`
	Pages        []pageRef `json:"pages,omitempty"`
	Incrementals []Link    `json:"incrementals,omitempty"`
	Capped       bool      `json:"capped,omitempty"`
	Layout       string    `json:"layout,omitempty"`
}

// pageSet remembers the pages known to be stored, by their first and last
// link IDs (a run of links is fixed by its ends: each link names its
// parent), so a checkpoint neither encodes nor writes a page twice. It is
// shared by the catalogs descending from one load.
type pageSet struct{ m sync.Map }

func pageKeyOf(links []Link) string { return links[0].ID + links[len(links)-1].ID }

// pagedSegments splits cat's segments into pages, writing the pages not
// known yet.
func (c *Chain) pagedSegments(ctx context.Context, cat *Catalog, known *pageSet) ([]checkpointSegment, error) {
	out := make([]checkpointSegment, len(cat.Segments))
	for si, s := range cat.Segments {
		cs := checkpointSegment{Full: s.Full, Capped: s.Capped, Layout: s.Layout}
		whole := len(s.Incrementals) / pageLinks * pageLinks
		for p := 0; p < whole; p += pageLinks {
			page := s.Incrementals[p : p+pageLinks]
			k := pageKeyOf(page)
			if ref, ok := known.m.Load(k); ok {
				cs.Pages = append(cs.Pages, ref.(pageRef))
				continue
			}
			data, err := json.Marshal(page)
			if err != nil {
				return nil, fmt.Errorf("encode catalog page: %w", err)
			}
			data = append(data, '\n')
			ref := pageRef{SHA256: sha256Hex(data), Links: len(page)}
			key := PageKey(ref.SHA256)
			if err := c.store.PutIfAbsent(ctx, key, data); err != nil && !errors.Is(err, blobstore.ErrExists) {
				return nil, c.unreachable(err, "write", key)
			}
			known.m.Store(k, ref)
			cs.Pages = append(cs.Pages, ref)
		}
		cs.Incrementals = s.Incrementals[whole:]
		out[si] = cs
	}
	return out, nil
}

// unpage reads the pages of a checkpoint's segments (several at once),
// checks each against its hash and length, and returns the segments whole.
// The pages read are added to known. Every reference is checked before any
// page is read, a page named twice is refused (its links would appear twice
// in the catalog, and each naming would cost a read of a whole page), and
// the first failure stops the reads still to start.
func (c *Chain) unpage(ctx context.Context, key string, segs []checkpointSegment, known *pageSet) ([]Segment, error) {
	type job struct{ seg, page int }
	var jobs []job
	named := map[string]bool{}
	for si, s := range segs {
		for pi, ref := range s.Pages {
			if !validDigest(ref.SHA256) || ref.Links != pageLinks {
				return nil, errcode.New(errcode.ChainInvalid, "catalog checkpoint %s names a page %q of %d links", key, ref.SHA256, ref.Links)
			}
			if named[ref.SHA256] {
				return nil, errcode.New(errcode.ChainInvalid, "catalog checkpoint %s names page %s twice", key, ref.SHA256)
			}
			named[ref.SHA256] = true
			jobs = append(jobs, job{si, pi})
		}
	}
	pages := make([][][]Link, len(segs))
	for si, s := range segs {
		pages[si] = make([][]Link, len(s.Pages))
	}
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	sem := make(chan struct{}, pageReaders)
	for _, j := range jobs {
		sem <- struct{}{}
		if readCtx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ref := segs[j.seg].Pages[j.page]
			p, err := c.readPage(readCtx, key, ref)
			if err != nil {
				once.Do(func() { first = err })
				cancel()
				return
			}
			pages[j.seg][j.page] = p
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, c.unreachable(err, "read the pages of", key)
	}
	out := make([]Segment, len(segs))
	for si, s := range segs {
		n := len(s.Incrementals)
		for pi, p := range pages[si] {
			n += len(p)
			known.m.Store(pageKeyOf(p), s.Pages[pi])
		}
		incs := make([]Link, 0, n)
		for _, p := range pages[si] {
			incs = append(incs, p...)
		}
		incs = append(incs, s.Incrementals...)
		if len(incs) == 0 {
			incs = nil
		}
		out[si] = Segment{Full: s.Full, Incrementals: incs, Capped: s.Capped, Layout: s.Layout}
	}
	return out, nil
}

// readPage reads one page a checkpoint (at key) names.
func (c *Chain) readPage(ctx context.Context, key string, ref pageRef) ([]Link, error) {
	if !validDigest(ref.SHA256) || ref.Links != pageLinks {
		return nil, errcode.New(errcode.ChainInvalid, "catalog checkpoint %s names a page %q of %d links", key, ref.SHA256, ref.Links)
	}
	pk := PageKey(ref.SHA256)
	data, err := blobstore.ReadAll(ctx, c.store, pk)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, errcode.Wrap(errcode.ChainInvalid, err, "catalog checkpoint %s names page %s, which is missing", key, pk)
	}
	if err != nil {
		return nil, c.unreachable(err, "read", pk)
	}
	if sha256Hex(data) != ref.SHA256 {
		return nil, errcode.New(errcode.ChainInvalid, "catalog page %s does not hash to its name", pk)
	}
	var links []Link
	if err := strictUnmarshal(data, &links); err != nil {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "catalog page %s does not parse", pk)
	}
	if len(links) != ref.Links {
		return nil, errcode.New(errcode.ChainInvalid, "catalog page %s holds %d links, checkpoint %s says %d", pk, len(links), key, ref.Links)
	}
	return links, nil
}
