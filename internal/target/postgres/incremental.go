package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
)

// ApplyIncremental applies every change of incremental m to the target in
// one transaction, so an interrupted or retried apply never applies a source
// transaction twice. It reads m's change chunks in order (each verified
// against its reference), checks the transaction framing (changes only
// between a begin and its commit, ordinals increasing inside a
// transaction) and that the change records and transactions number what m
// records, and commits only then. schema is the schema in force before m;
// the one in force after it is returned, for the next incremental.
//
// Changes count as the manifest counts them: every record except the
// begin and commit records that frame a transaction. progress, when not
// nil, is called after each chunk with the number of changes applied so far.
// Damaged chunks surface as the chain package's coded errors, unchanged.
func ApplyIncremental(ctx context.Context, conn *pgx.Conn, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, progress func(changes int64)) (*chain.Schema, error) {
	if m == nil || m.Kind != chain.KindIncremental {
		return nil, errcode.New(errcode.ManifestInvalid, "apply incremental: link is not an incremental")
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, classify(err, "begin apply of incremental "+m.ID)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	after, err := applyIncrementalTx(ctx, conn, tx, ch, m, schema, progress)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, classify(err, "commit apply of incremental "+m.ID)
	}
	return after, nil
}

// applyIncrementalTx applies and checks incremental m inside tx.
func applyIncrementalTx(ctx context.Context, conn *pgx.Conn, tx pgx.Tx, ch *chain.Chain, m *chain.Manifest, schema *chain.Schema, progress func(changes int64)) (*chain.Schema, error) {
	a := NewApplier(schema)
	defer func() { _ = a.Release(context.WithoutCancel(ctx), conn) }()

	var f framing
	for _, ref := range m.Chunks {
		it, err := ch.ReadChangeChunk(ctx, ref)
		if err != nil {
			return nil, err
		}
		var n int64
		for it.Next() {
			c := it.Change()
			if err := f.check(c); err != nil {
				return nil, errcode.Wrap(errcode.ChunkCorrupt, err, "incremental %s, chunk %s, record %d", m.ID, ref.Key, n)
			}
			if err := a.Apply(ctx, tx, c); err != nil {
				return nil, fmt.Errorf("incremental %s: %w", m.ID, err)
			}
			n++
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		if n != ref.Rows {
			return nil, errcode.New(errcode.ChunkCorrupt, "incremental %s: chunk %s holds %d change records, the manifest records %d", m.ID, ref.Key, n, ref.Rows)
		}
		if err := a.Flush(ctx, tx); err != nil {
			return nil, fmt.Errorf("incremental %s: %w", m.ID, err)
		}
		if progress != nil {
			progress(f.changes)
		}
	}
	if f.open {
		return nil, errcode.New(errcode.ChunkCorrupt, "incremental %s ends inside source transaction %d", m.ID, f.xid)
	}
	if f.changes != m.Changes || f.txns != m.Transactions {
		return nil, errcode.New(errcode.ManifestInvalid,
			"incremental %s holds %d changes in %d transactions, the manifest records %d in %d",
			m.ID, f.changes, f.txns, m.Changes, m.Transactions)
	}
	return a.Schema(), nil
}

// framing checks that change records come in source transactions.
type framing struct {
	open       bool
	identified bool // the open transaction's begin carries an identity
	xid        uint32
	ordinal    int64 // last ordinal seen in the open transaction, -1 before any
	changes    int64 // records other than begin and commit
	txns       int64
}

func (f *framing) check(c *chain.Change) error {
	switch c.Op {
	case chain.OpBegin:
		if f.open {
			return fmt.Errorf("begin of transaction %d inside transaction %d", c.XID, f.xid)
		}
		f.open, f.identified, f.xid, f.ordinal = true, c.Identified, c.XID, -1
		return nil
	case chain.OpCommit:
		if !f.open {
			return fmt.Errorf("commit of transaction %d outside a transaction", c.XID)
		}
		if f.identified && c.Identified && c.XID != f.xid {
			return fmt.Errorf("commit of transaction %d closes transaction %d", c.XID, f.xid)
		}
		f.open = false
		f.txns++
		return nil
	}
	f.changes++
	if !f.open {
		return fmt.Errorf("%s of %s outside a transaction", opName(c.Op), c.Table)
	}
	if f.identified && c.Identified {
		if c.XID != f.xid {
			return fmt.Errorf("change of transaction %d inside transaction %d", c.XID, f.xid)
		}
		if int64(c.Ordinal) <= f.ordinal {
			return fmt.Errorf("change %d of transaction %d follows change %d", c.Ordinal, c.XID, f.ordinal)
		}
		f.ordinal = int64(c.Ordinal)
	}
	return nil
}
