package chain

import (
	"context"
	"slices"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Filters records what a segment's producer left out of the chain or
// masked before anything was encoded, so every reader knows what the
// segment does not hold. A full's manifest carries it; the incrementals of
// its segment were captured under the same filters (changing them starts a
// new segment). It never holds a mask key, only a fingerprint of it.
type Filters struct {
	// IncludeTables and ExcludeTables are the table patterns as given
	// (globs over "schema.table"; MySQL family: "db.table").
	IncludeTables []string `json:"include_tables,omitempty"`
	ExcludeTables []string `json:"exclude_tables,omitempty"`
	// ExcludeColumns are the columns left out, "schema.table.column", as
	// given.
	ExcludeColumns []string `json:"exclude_columns,omitempty"`
	// Masks are the masked columns and their strategies.
	Masks []MaskRecord `json:"masks,omitempty"`
}

// MaskRecord is one masked column as the chain records it.
type MaskRecord struct {
	// Column is "schema.table.column".
	Column string `json:"column"`
	// Strategy is the strategy as given ("hash", "email", "null",
	// "fixed:VALUE", "truncate:N", "keep-last:N").
	Strategy string `json:"strategy"`
	// KeyID fingerprints the key a keyed strategy (hash, email) used: the
	// first 16 hex characters of HMAC-SHA256(key, "sluice mask key id").
	// It names the key without revealing it; empty for unkeyed strategies.
	KeyID string `json:"key_id,omitempty"`
}

// Empty reports whether f filters nothing (nil counts as empty).
func (f *Filters) Empty() bool {
	return f == nil || (len(f.IncludeTables) == 0 && len(f.ExcludeTables) == 0 && len(f.ExcludeColumns) == 0 && len(f.Masks) == 0)
}

// Equal reports whether f and g filter alike (nil equals empty).
func (f *Filters) Equal(g *Filters) bool {
	if f.Empty() || g.Empty() {
		return f.Empty() == g.Empty()
	}
	return slices.Equal(f.IncludeTables, g.IncludeTables) && slices.Equal(f.ExcludeTables, g.ExcludeTables) &&
		slices.Equal(f.ExcludeColumns, g.ExcludeColumns) && slices.Equal(f.Masks, g.Masks)
}

// FiltersAt returns the filters of the segment that holds link id: those
// its full recorded (nil when it filtered nothing).
func (c *Chain) FiltersAt(ctx context.Context, cat *Catalog, id string) (*Filters, error) {
	path, err := cat.Path(id)
	if err != nil {
		return nil, errcode.Wrap(errcode.ChainInvalid, err, "find link %s", id)
	}
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].Kind != KindFull {
			continue
		}
		m, err := c.GetManifest(ctx, path[i].ID)
		if err != nil {
			return nil, err
		}
		return m.Filters, nil
	}
	return nil, errcode.New(errcode.ManifestInvalid, "no full precedes link %s", id)
}
