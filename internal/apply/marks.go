package apply

import (
	"hash/maphash"

	"github.com/sluicehq/sluice/internal/chain"
)

// Identity names a source transaction (chain.Identity).
type Identity = chain.Identity

// IdentityOf returns the identity of a change's transaction.
func IdentityOf(c *chain.Change) Identity { return c.Identity() }

// Marks is the set of changes already applied, by transaction and ordinal.
type Marks map[Identity]map[uint32]struct{}

// Add records ordinals of a transaction as applied.
func (m Marks) Add(id Identity, ordinals ...uint32) {
	set := m[id]
	if set == nil {
		set = map[uint32]struct{}{}
		m[id] = set
	}
	for _, o := range ordinals {
		set[o] = struct{}{}
	}
}

// Has reports whether a change was already applied.
func (m Marks) Has(c *chain.Change) bool {
	set := m[IdentityOf(c)]
	if set == nil {
		return false
	}
	_, ok := set[c.Ordinal]
	return ok
}

var seed = maphash.MakeSeed()

// Lane picks the lane of a keyed change from its table and key values, so
// every change to one row lands on the same lane in order.
func Lane(table string, key [][]byte, lanes int) int {
	if lanes <= 1 {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(table)
	for _, k := range key {
		h.WriteByte(0)
		h.Write(k)
	}
	return int(h.Sum64() % uint64(lanes))
}
