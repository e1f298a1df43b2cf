package chain

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/internal/errcode"
)

// String names the operation for messages ("insert", "schema change").
func (o Op) String() string {
	switch o {
	case OpBegin:
		return "begin"
	case OpCommit:
		return "commit"
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	case OpTruncate:
		return "truncate"
	case OpSchema:
		return "schema change"
	}
	return "change " + strconv.Quote(string(rune(o)))
}

// FirstRecords limits visit to the first n records of a walk: the later
// ones are still read (so the walk checks them) but not visited. With n of
// 0 or less visit sees every record. A restore to a point applies the
// records of its last incremental before the first transaction it leaves
// out this way.
func FirstRecords(n int64, visit func(*Change) error) func(*Change) error {
	if n <= 0 {
		return visit
	}
	var seen int64
	return func(c *Change) error {
		seen++
		if seen > n {
			return nil
		}
		return visit(c)
	}
}

// WalkIncremental reads every change record of incremental m in order,
// checking as it goes that records come in source transactions (row,
// truncate and schema changes only between a begin and its commit and,
// where identified, of the open transaction with increasing ordinals), that
// each chunk holds the records its reference counts, and at the end that no
// transaction is left open and the changes and transactions number what m
// records. visit is called with each record (its buffers are valid only
// during the call); afterChunk, when set, after each chunk with the changes
// so far. A framing fault is a coded ChunkCorrupt error, a count that
// differs from m ManifestInvalid; visit's and afterChunk's errors are
// returned as they are.
func (c *Chain) WalkIncremental(ctx context.Context, m *Manifest, visit func(*Change) error, afterChunk func(changes int64) error) error {
	var f Framing
	for _, ref := range m.Chunks {
		it, err := c.ReadChangeChunk(ctx, ref)
		if err != nil {
			return err
		}
		var n int64
		for it.Next() {
			ch := it.Change()
			if err := f.Check(m, ref, n, ch); err != nil {
				return err
			}
			if err := visit(ch); err != nil {
				return err
			}
			n++
		}
		if err := it.Err(); err != nil {
			return err
		}
		if err := CheckChunkRecords(m, ref, n); err != nil {
			return err
		}
		if afterChunk != nil {
			if err := afterChunk(f.changes); err != nil {
				return err
			}
		}
	}
	return f.End(m)
}

// CheckChunkRecords refuses a chunk of incremental m that held n change
// records where its reference counts another number (ChunkCorrupt).
func CheckChunkRecords(m *Manifest, ref ChunkRef, n int64) error {
	if n != ref.Rows {
		return errcode.New(errcode.ChunkCorrupt, "incremental %s: chunk %s holds %d change records, the manifest records %d", m.ID, ref.Key, n, ref.Rows)
	}
	return nil
}

// Check follows record c, the n-th of chunk ref of incremental m, and
// refuses it with a coded ChunkCorrupt error when it breaks the framing:
// a row, truncate or schema change outside a transaction, a begin inside
// one, a commit outside one, or (where identified) a change of another
// transaction or out of ordinal order.
func (f *Framing) Check(m *Manifest, ref ChunkRef, n int64, c *Change) error {
	if err := f.check(c); err != nil {
		return errcode.Wrap(errcode.ChunkCorrupt, err, "incremental %s, chunk %s, record %d", m.ID, ref.Key, n)
	}
	return nil
}

// End checks, after the last record of incremental m, that no transaction
// is left open (ChunkCorrupt) and that the changes and transactions read
// number what m records (ManifestInvalid).
func (f *Framing) End(m *Manifest) error {
	if f.open {
		return errcode.New(errcode.ChunkCorrupt, "incremental %s ends inside source transaction %s", m.ID, txName(f.id))
	}
	if f.changes != m.Changes || f.txns != m.Transactions {
		return errcode.New(errcode.ManifestInvalid,
			"incremental %s holds %d changes in %d transactions, the manifest records %d in %d",
			m.ID, f.changes, f.txns, m.Changes, m.Transactions)
	}
	return nil
}

// txName names a transaction in framing messages: its XID, or its opaque ID.
func txName(id Identity) string {
	if id.Tx != "" {
		return id.Tx
	}
	return strconv.FormatUint(uint64(id.XID), 10)
}

// Framing follows the transaction structure of an incremental's records as
// they are read, and counts their changes and transactions: the checks
// WalkIncremental makes, for a reader that walks the chunks itself (the
// broker's and restore's apply). The zero value is ready before the first
// record.
type Framing struct {
	open       bool
	identified bool // the open transaction's begin carries an identity
	id         Identity
	ordinal    int64 // last ordinal seen in the open transaction, -1 before any
	changes    int64 // records other than begin and commit
	txns       int64
}

func (f *Framing) check(c *Change) error {
	switch c.Op {
	case OpBegin:
		if f.open {
			return fmt.Errorf("begin of transaction %s inside transaction %s", txName(c.Identity()), txName(f.id))
		}
		f.open, f.identified, f.id, f.ordinal = true, c.Identified, c.Identity(), -1
		return nil
	case OpCommit:
		if !f.open {
			return fmt.Errorf("commit of transaction %s outside a transaction", txName(c.Identity()))
		}
		if f.identified && c.Identified && !sameTx(c.Identity(), f.id) {
			return fmt.Errorf("commit of transaction %s closes transaction %s", txName(c.Identity()), txName(f.id))
		}
		f.open = false
		f.txns++
		return nil
	}
	f.changes++
	if !f.open {
		return fmt.Errorf("%s of %s outside a transaction", c.Op, c.Table)
	}
	if f.identified && c.Identified {
		if !sameTx(c.Identity(), f.id) {
			return fmt.Errorf("change of transaction %s inside transaction %s", txName(c.Identity()), txName(f.id))
		}
		if int64(c.Ordinal) <= f.ordinal {
			return fmt.Errorf("change %d of transaction %s follows change %d", c.Ordinal, txName(c.Identity()), f.ordinal)
		}
		f.ordinal = int64(c.Ordinal)
	}
	return nil
}

// sameTx compares the transaction of a record with the open one: by opaque
// ID where there is one, else by XID (a begin record of PostgreSQL carries
// the commit LSN too, but framing has always compared XIDs only).
func sameTx(a, b Identity) bool {
	if a.Tx != "" || b.Tx != "" {
		return a.Tx == b.Tx
	}
	return a.XID == b.XID
}

// ChangeError describes a change a target cannot apply: the operation, the
// table and the change's place in its source transaction, then the reason.
func ChangeError(c *Change, format string, args ...any) error {
	where := fmt.Sprintf("xid %d", c.XID)
	if c.Tx != "" {
		where = "transaction " + c.Tx
	}
	return fmt.Errorf("apply %s to %s (%s, change %d): %s", c.Op, c.Table, where, c.Ordinal, fmt.Sprintf(format, args...))
}

// CheckImages checks that a row change's images have one value per
// supplied column of its table (columns of them).
func CheckImages(c *Change, columns int) error {
	if c.New != nil && len(c.New) != columns {
		return ChangeError(c, "new row image has %d values, the table has %d supplied columns", len(c.New), columns)
	}
	if c.OldKind != 0 && len(c.Old) != columns {
		return ChangeError(c, "old row image has %d values, the table has %d supplied columns", len(c.Old), columns)
	}
	return nil
}
