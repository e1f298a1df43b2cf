package chain

import (
	"context"
	"sync"
)

// CatalogCache keeps the latest catalog read or committed of each chain, by
// the store's URL and how the handle verifies signatures (a catalog read
// without checking signatures never serves a handle that checks them), so
// that a process reading one chain again and again (a
// broker's polls, a producer's windows) reads only what was committed since
// (Refresh). The zero value is ready; a nil *CatalogCache caches nothing.
type CatalogCache struct {
	m sync.Map // store URL -> *Catalog
}

// Latest returns the latest committed catalog of ch, refreshed from the
// cached one.
func (cc *CatalogCache) Latest(ctx context.Context, ch *Chain) (*Catalog, error) {
	if cc == nil {
		return ch.LoadCatalog(ctx)
	}
	key := cacheKey(ch)
	var prev *Catalog
	if v, ok := cc.m.Load(key); ok {
		prev = v.(*Catalog)
	}
	cat, err := ch.Refresh(ctx, prev)
	if err != nil {
		cc.m.Delete(key)
		return nil, err
	}
	cc.m.Store(key, cat)
	return cat, nil
}

// Put records cat, which ch's CommitCatalog just committed, as its latest.
func (cc *CatalogCache) Put(ch *Chain, cat *Catalog) {
	if cc != nil && cat != nil && cat.stored != nil {
		cc.m.Store(cacheKey(ch), cat)
	}
}

// Forget drops what cc holds for ch, so the next Latest loads it whole (a
// commit that failed may have found the chain other than cc thought).
func (cc *CatalogCache) Forget(ch *Chain) {
	if cc != nil {
		cc.m.Delete(cacheKey(ch))
	}
}

// cacheKey names ch's chain and the signature checks its handle makes.
func cacheKey(ch *Chain) string {
	key := ch.Store().String()
	if ch.trust != nil {
		if v := ch.trust.t.Verifier; v != nil {
			key += "\x00verify " + v.ID
		}
		if ch.trust.t.RequireSignature {
			key += "\x00required"
		}
	}
	return key
}
