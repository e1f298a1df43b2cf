package chain

import (
	"context"

	"github.com/sluicehq/sluice/internal/errcode"
)

// SchemaAt returns the recorded schema in force after link id: the newest
// schema recorded by id or an earlier link of its segment.
func (c *Chain) SchemaAt(ctx context.Context, cat *Catalog, id string) (*Schema, error) {
	path, err := cat.Path(id)
	if err != nil {
		return nil, errcode.Wrap(errcode.ChainInvalid, err, "find link %s", id)
	}
	for i := len(path) - 1; i >= 0; i-- {
		m, err := c.GetManifest(ctx, path[i].ID)
		if err != nil {
			return nil, err
		}
		if m.Schema != nil {
			return m.Schema, nil
		}
	}
	return nil, errcode.New(errcode.ManifestInvalid, "no link up to %s records a schema", id)
}
