package main

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/ddlcheck"
)

// checkChainSchemas checks the recorded schema of every link the catalog
// names (a full's whole schema, an incremental's schema after its
// changes) with the validators every target runs before it sends
// anything (ddlcheck), so a forged or damaged schema is found before
// anyone restores it. With changes it also reads every incremental and
// checks each schema change record's table against the names its
// segment records. It returns how many schemas and records it checked;
// the first refusal is returned as its coded error, naming the link.
func checkChainSchemas(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, changes bool) (int, error) {
	n := 0
	names := ddlcheck.NamesOf(nil)
	for _, l := range cat.Links() {
		m, err := ch.LinkManifest(ctx, cat, l.ID)
		if err != nil {
			return n, err
		}
		if l.Kind == chain.KindFull {
			names = ddlcheck.NamesOf(m.Schema)
		}
		if m.Schema != nil {
			n++
			if err := ddlcheck.Check(m.Schema); err != nil {
				return n, fmt.Errorf("link %s: %w", l.ID, err)
			}
		}
		if !changes || l.Kind != chain.KindIncremental {
			continue
		}
		err = ch.WalkIncremental(ctx, m, func(c *chain.Change) error {
			if c.Op != chain.OpSchema || c.Schema == nil {
				return nil
			}
			n++
			return ddlcheck.CheckTable(c.Schema, names)
		}, nil)
		if err != nil {
			return n, fmt.Errorf("link %s: %w", l.ID, err)
		}
	}
	return n, nil
}
