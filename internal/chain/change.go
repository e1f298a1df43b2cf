package chain

import "fmt"

// Op is the kind of a change record.
type Op byte

// Change record kinds.
const (
	// OpBegin opens a source transaction.
	OpBegin Op = 'B'
	// OpCommit closes a source transaction.
	OpCommit Op = 'C'
	// OpInsert adds a row (New).
	OpInsert Op = 'I'
	// OpUpdate changes a row: New is the new image; Old, when present, is the
	// old key (OldKind 'K') or the whole old row (OldKind 'O').
	OpUpdate Op = 'U'
	// OpDelete removes a row identified by Old.
	OpDelete Op = 'D'
	// OpTruncate empties Tables.
	OpTruncate Op = 'T'
	// OpSchema records a table's new definition (Schema): a new table, or
	// columns added, dropped or retyped.
	OpSchema Op = 'S'
)

// Value kinds inside a change's row image.
const (
	// ValueNull is SQL NULL.
	ValueNull byte = 'n'
	// ValueUnchanged is a TOASTed value the update left unchanged and the
	// source did not send; an apply must leave the column as it is.
	ValueUnchanged byte = 'u'
	// ValueText is the type's text output (UTF-8) in Data.
	ValueText byte = 't'
)

// Value is one column of a change's row image.
type Value struct {
	Kind byte
	Data []byte
}

// Change is one record of an incremental: a transaction boundary, a row
// change, a truncate or a schema change, in source commit order.
type Change struct {
	Op Op
	// XID is the source transaction ID; CommitLSN the LSN of its commit
	// record. Together with Ordinal they are the change's apply identity.
	XID       uint32
	CommitLSN uint64
	// Ordinal numbers the changes of one transaction from 0 (Begin and
	// Commit carry none).
	Ordinal uint32
	// LSN is the WAL position of the message that carried the change.
	LSN uint64
	// CommitTime is the transaction's commit time in microseconds since the
	// Unix epoch (Begin and Commit).
	CommitTime int64
	// EndLSN is the end of the commit record (Commit): the position from which
	// the stream resumes after this transaction.
	EndLSN uint64
	// Table is the qualified table name (row changes and schema changes).
	Table string
	// Tables are the qualified names a truncate empties.
	Tables []string
	// TruncateFlags: bit 0 CASCADE, bit 1 RESTART IDENTITY.
	TruncateFlags uint8
	// OldKind is 'K' (key columns only, others NULL) or 'O' (whole old row)
	// when Old is present, 0 otherwise.
	OldKind byte
	// New and Old are row images over the table's columns in order.
	New []Value
	Old []Value
	// Schema is the table's new definition (OpSchema).
	Schema *Table
	// Identified is false for a change the reader could not name; such a
	// change carries no apply identity.
	Identified bool
	// Tx is the opaque ID of the source transaction for engines that name
	// their transactions by one (a MySQL GTID "uuid:n", a MariaDB GTID
	// "domain-server-seq"); empty for PostgreSQL, whose transactions are
	// named by XID and CommitLSN. Set only on identified records (format
	// version 2 and later).
	Tx string
}

// Identity names a source transaction: PostgreSQL's by its XID and the
// position of its commit record, other engines' by an opaque ID (Tx). With
// a change's Ordinal it is the change's apply identity.
type Identity struct {
	XID       uint32
	CommitLSN uint64
	Tx        string
}

// Identity returns the identity of the change's transaction.
func (c *Change) Identity() Identity { return Identity{XID: c.XID, CommitLSN: c.CommitLSN, Tx: c.Tx} }

// String names the transaction for messages.
func (id Identity) String() string {
	if id.Tx != "" {
		return id.Tx
	}
	return fmt.Sprintf("xid %d, commit %s", id.XID, FormatLSN(id.CommitLSN))
}

// Clone copies a change and its values out of an iterator's buffers, which
// the next record reuses.
func (c *Change) Clone() *Change {
	out := *c
	size := 0
	for _, v := range c.New {
		size += len(v.Data)
	}
	for _, v := range c.Old {
		size += len(v.Data)
	}
	buf := make([]byte, 0, size)
	copyVals := func(in []Value) []Value {
		if in == nil {
			return nil
		}
		vals := make([]Value, len(in))
		for i, v := range in {
			vals[i].Kind = v.Kind
			if v.Data != nil {
				start := len(buf)
				buf = append(buf, v.Data...)
				vals[i].Data = buf[start:len(buf):len(buf)]
			}
		}
		return vals
	}
	out.New = copyVals(c.New)
	out.Old = copyVals(c.Old)
	if c.Tables != nil {
		out.Tables = append([]string(nil), c.Tables...)
	}
	if c.Schema != nil {
		t := *c.Schema
		out.Schema = &t
	}
	return &out
}
