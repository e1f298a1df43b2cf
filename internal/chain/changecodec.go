package chain

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/internal/errcode"
)

// A change chunk's body is a sequence of records, one per Change, each
// prefixed by its length. Fields a record shares with the one before it
// (transaction ID, commit LSN, LSN) are written as differences or left out,
// and table names are written once per chunk and referenced by index after
// that. docs/chain-format.md section 4.4 describes the bytes.

// ErrInvalidChange is wrapped by ChangeBuilder.Append's errors about a
// change that cannot be recorded: an unknown operation, a missing table,
// schema or truncate list, or a malformed row image.
var ErrInvalidChange = errors.New("invalid change record")

// Field bits of a record's presence mask, in the order the fields follow.
const (
	fieldIdentified  = 1 << 0  // no bytes
	fieldXID         = 1 << 1  // zigzag varint: XID minus the previous record's, as int32
	fieldCommitLSN   = 1 << 2  // zigzag varint: CommitLSN minus the previous record's
	fieldLSN         = 1 << 3  // zigzag varint: LSN minus the previous record's
	fieldOrdinalNext = 1 << 4  // no bytes: Ordinal is the previous record's plus one
	fieldTable       = 1 << 5  // table reference
	fieldNew         = 1 << 6  // uvarint count, values
	fieldOld         = 1 << 7  // OldKind byte, uvarint count, values
	fieldOrdinal     = 1 << 8  // uvarint Ordinal
	fieldCommitTime  = 1 << 9  // zigzag varint: CommitTime minus the last one recorded
	fieldEndLSN      = 1 << 10 // zigzag varint: EndLSN minus this record's LSN
	fieldTables      = 1 << 11 // uvarint count, table references
	fieldTruncate    = 1 << 12 // TruncateFlags byte
	fieldSchema      = 1 << 13 // uvarint length, JSON of Table
	fieldTx          = 1 << 14 // uvarint length, the opaque transaction ID (format version 2)

	fieldsKnown = 1<<15 - 1
)

// minChangeRecordLen is the shortest record: length, op and mask, one byte each.
const minChangeRecordLen = 3

// maxInternedNames bounds the table names a ChangeIter keeps across Reset.
const maxInternedNames = 4096

// changeState is what a record's encoding depends on besides the record:
// the fields of the record before it and the last commit time recorded.
type changeState struct {
	tx         string
	xid        uint32
	commitLSN  uint64
	lsn        uint64
	ordinal    uint32
	commitTime int64
}

// validateChange checks the rules every recorded change obeys. It is shared
// by the builder (before writing) and the iterator (after reading), so
// whatever a reader accepts could have been written.
func validateChange(c *Change) error {
	switch c.Op {
	case OpBegin, OpCommit:
	case OpInsert, OpUpdate, OpDelete:
		if c.Table == "" {
			return fmt.Errorf("%w: %c change without a table", ErrInvalidChange, c.Op)
		}
	case OpTruncate:
		if len(c.Tables) == 0 {
			return fmt.Errorf("%w: truncate without tables", ErrInvalidChange)
		}
	case OpSchema:
		if c.Schema == nil {
			return fmt.Errorf("%w: schema change without a schema", ErrInvalidChange)
		}
	default:
		return fmt.Errorf("%w: unknown operation %#x", ErrInvalidChange, byte(c.Op))
	}
	for _, t := range c.Tables {
		if t == "" {
			return fmt.Errorf("%w: empty table name in a truncate", ErrInvalidChange)
		}
	}
	if c.Tx != "" && !c.Identified {
		return fmt.Errorf("%w: a transaction ID on a change without identity", ErrInvalidChange)
	}
	switch {
	case c.OldKind != 0 && c.OldKind != 'K' && c.OldKind != 'O':
		return fmt.Errorf("%w: old image kind %#x", ErrInvalidChange, c.OldKind)
	case len(c.Old) > 0 && c.OldKind == 0:
		return fmt.Errorf("%w: old image without a kind", ErrInvalidChange)
	case len(c.New) > MaxColumns || len(c.Old) > MaxColumns:
		return fmt.Errorf("%w: row image of %d/%d values exceeds %d", ErrInvalidChange, len(c.New), len(c.Old), MaxColumns)
	}
	for _, img := range [2][]Value{c.New, c.Old} {
		for i, v := range img {
			switch v.Kind {
			case ValueText:
			case ValueNull, ValueUnchanged:
				if len(v.Data) != 0 {
					return fmt.Errorf("%w: value %d of kind %c carries %d bytes", ErrInvalidChange, i, v.Kind, len(v.Data))
				}
			default:
				return fmt.Errorf("%w: value %d has unknown kind %#x", ErrInvalidChange, i, v.Kind)
			}
		}
	}
	return nil
}

// ChangeBuilder accumulates the change records of one change chunk and
// encodes the chunk file. Records must be appended in the incremental's
// order. A builder is reused for the next chunk with Reset; it is not safe
// for concurrent use.
type ChangeBuilder struct {
	raw     []byte
	records int64
	prev    changeState
	names   map[string]uint64 // table name → dictionary index
	nnames  uint64
	out     []byte // reused encoding buffer
}

// NewChangeBuilder returns an empty builder.
func NewChangeBuilder() *ChangeBuilder {
	return &ChangeBuilder{names: make(map[string]uint64)}
}

// Records returns the number of change records appended since the last Reset.
func (b *ChangeBuilder) Records() int64 { return b.records }

// RawLen returns the uncompressed body length so far, for cutting chunks at
// a target size.
func (b *ChangeBuilder) RawLen() int { return len(b.raw) }

// Reset empties the builder for the next chunk, keeping its buffers. The
// next chunk starts a new table-name dictionary.
func (b *ChangeBuilder) Reset() {
	b.raw = b.raw[:0]
	b.records = 0
	b.prev = changeState{}
	clear(b.names)
	b.nnames = 0
}

// Append encodes c as the chunk's next record. It checks c first and
// appends nothing when it is invalid: the operation must be known; inserts,
// updates and deletes need a Table; a schema change needs a Schema; a
// truncate needs Tables (none empty); OldKind must be 0, 'K' or 'O', and
// non-zero when Old has values; every value must be ValueNull or
// ValueUnchanged without data, or ValueText. For ValueText a nil Data is the
// empty string, not NULL. Append keeps no reference to c or its slices.
func (b *ChangeBuilder) Append(c *Change) error {
	if c == nil {
		return fmt.Errorf("%w: nil change", ErrInvalidChange)
	}
	if err := validateChange(c); err != nil {
		return err
	}
	var schema []byte
	if c.Schema != nil {
		var err error
		if schema, err = json.Marshal(c.Schema); err != nil {
			return fmt.Errorf("%w: schema of %s: %v", ErrInvalidChange, c.Table, err)
		}
	}
	if b.names == nil {
		b.names = make(map[string]uint64)
	}

	var mask uint64
	p := &b.prev
	if c.Identified {
		mask |= fieldIdentified
	}
	if c.XID != p.xid {
		mask |= fieldXID
	}
	if c.CommitLSN != p.commitLSN {
		mask |= fieldCommitLSN
	}
	if c.Tx != p.tx {
		mask |= fieldTx
	}
	if c.LSN != p.lsn {
		mask |= fieldLSN
	}
	if c.Ordinal != 0 {
		if c.Ordinal == p.ordinal+1 {
			mask |= fieldOrdinalNext
		} else {
			mask |= fieldOrdinal
		}
	}
	if c.Table != "" {
		mask |= fieldTable
	}
	if len(c.New) > 0 {
		mask |= fieldNew
	}
	if c.OldKind != 0 || len(c.Old) > 0 {
		mask |= fieldOld
	}
	if c.CommitTime != 0 {
		mask |= fieldCommitTime
	}
	if c.EndLSN != 0 {
		mask |= fieldEndLSN
	}
	if len(c.Tables) > 0 {
		mask |= fieldTables
	}
	if c.TruncateFlags != 0 {
		mask |= fieldTruncate
	}
	if c.Schema != nil {
		mask |= fieldSchema
	}

	// The record's length is known only at the end: reserve two bytes (enough
	// for records up to 16 KiB) and move the record if it needs another size.
	const reserve = 2
	start := len(b.raw)
	b.raw = append(b.raw, 0, 0, byte(c.Op))
	b.raw = binary.AppendUvarint(b.raw, mask)
	if mask&fieldXID != 0 {
		b.raw = binary.AppendVarint(b.raw, int64(int32(c.XID-p.xid)))
	}
	if mask&fieldCommitLSN != 0 {
		b.raw = binary.AppendVarint(b.raw, int64(c.CommitLSN-p.commitLSN))
	}
	if mask&fieldLSN != 0 {
		b.raw = binary.AppendVarint(b.raw, int64(c.LSN-p.lsn))
	}
	if mask&fieldTable != 0 {
		b.appendTableRef(c.Table)
	}
	if mask&fieldNew != 0 {
		b.appendValues(c.New)
	}
	if mask&fieldOld != 0 {
		b.raw = append(b.raw, c.OldKind)
		b.appendValues(c.Old)
	}
	if mask&fieldOrdinal != 0 {
		b.raw = binary.AppendUvarint(b.raw, uint64(c.Ordinal))
	}
	if mask&fieldCommitTime != 0 {
		b.raw = binary.AppendVarint(b.raw, int64(uint64(c.CommitTime)-uint64(p.commitTime)))
	}
	if mask&fieldEndLSN != 0 {
		b.raw = binary.AppendVarint(b.raw, int64(c.EndLSN-c.LSN))
	}
	if mask&fieldTables != 0 {
		b.raw = binary.AppendUvarint(b.raw, uint64(len(c.Tables)))
		for _, t := range c.Tables {
			b.appendTableRef(t)
		}
	}
	if mask&fieldTruncate != 0 {
		b.raw = append(b.raw, c.TruncateFlags)
	}
	if mask&fieldSchema != 0 {
		b.raw = binary.AppendUvarint(b.raw, uint64(len(schema)))
		b.raw = append(b.raw, schema...)
	}
	if mask&fieldTx != 0 {
		b.raw = binary.AppendUvarint(b.raw, uint64(len(c.Tx)))
		b.raw = append(b.raw, c.Tx...)
	}

	n := uint64(len(b.raw) - start - reserve)
	if size := uvarintLen(n); size == reserve {
		b.raw[start] = byte(n) | 0x80
		b.raw[start+1] = byte(n >> 7)
	} else {
		var prefix [binary.MaxVarintLen64]byte
		k := binary.PutUvarint(prefix[:], n)
		if k > reserve {
			b.raw = append(b.raw, prefix[:k-reserve]...)
		}
		copy(b.raw[start+k:], b.raw[start+reserve:start+reserve+int(n)])
		copy(b.raw[start:], prefix[:k])
		b.raw = b.raw[:start+k+int(n)]
	}

	p.xid, p.commitLSN, p.lsn, p.ordinal, p.tx = c.XID, c.CommitLSN, c.LSN, c.Ordinal, c.Tx
	if c.CommitTime != 0 {
		p.commitTime = c.CommitTime
	}
	b.records++
	return nil
}

// appendTableRef writes a reference to name, defining it on first use.
func (b *ChangeBuilder) appendTableRef(name string) {
	if i, ok := b.names[name]; ok {
		b.raw = binary.AppendUvarint(b.raw, i)
		return
	}
	b.names[name] = b.nnames
	b.raw = binary.AppendUvarint(b.raw, b.nnames)
	b.nnames++
	b.raw = binary.AppendUvarint(b.raw, uint64(len(name)))
	b.raw = append(b.raw, name...)
}

// appendValues writes a row image: its value count, then each value.
func (b *ChangeBuilder) appendValues(vals []Value) {
	b.raw = binary.AppendUvarint(b.raw, uint64(len(vals)))
	for _, v := range vals {
		if v.Kind != ValueText {
			b.raw = append(b.raw, v.Kind)
			continue
		}
		if l := len(v.Data); l < 0x80 {
			b.raw = append(b.raw, ValueText, byte(l))
		} else {
			b.raw = binary.AppendUvarint(append(b.raw, ValueText), uint64(l))
		}
		b.raw = append(b.raw, v.Data...)
	}
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Encode returns the whole chunk file: prefix, header (no table, zero
// columns, the record count as rows) and compressed body. The returned
// slice is the caller's; the builder keeps its contents until Reset.
func (b *ChangeBuilder) Encode() ([]byte, error) {
	return b.encode(chunkLevel)
}

func (b *ChangeBuilder) encode(level zstd.EncoderLevel) ([]byte, error) {
	if len(b.raw) > MaxChunkRawSize {
		return nil, fmt.Errorf("encode change chunk: body of %d bytes exceeds the %d-byte limit", len(b.raw), MaxChunkRawSize)
	}
	data, err := encodeChunkFile(&b.out, ChunkKindChanges, chunkHeaderJSON{Rows: b.records, RawSize: int64(len(b.raw))}, b.raw, level)
	if err != nil {
		return nil, fmt.Errorf("encode change chunk: %w", err)
	}
	return data, nil
}

// ChangeIter walks the records of a change chunk's body (as returned by
// DecodeChunk for a chunk of kind ChunkKindChanges).
//
//	it := chain.NewChangeIter(body)
//	for it.Next() {
//		use(it.Change())
//	}
//	if err := it.Err(); err != nil { ... }
//
// The iterator does not allocate per record, except to decode a schema
// change's Schema. It is not safe for concurrent use.
type ChangeIter struct {
	body   []byte
	off    int
	prev   changeState
	dict   []string
	intern map[string]string // table names seen by this iterator, across Reset
	c      Change
	newBuf []Value
	oldBuf []Value
	tables []string
	err    error
	// limited iterators (a span of a chunk) stop after left more records.
	limited bool
	left    int64
}

// NewChangeIter returns an iterator over the change records in body.
func NewChangeIter(body []byte) *ChangeIter {
	it := &ChangeIter{}
	it.Reset(body)
	return it
}

// Reset points the iterator at a new body, keeping its buffers.
func (it *ChangeIter) Reset(body []byte) {
	it.body, it.off, it.prev, it.err, it.limited = body, 0, changeState{}, nil, false
	it.dict = it.dict[:0]
	it.c = Change{}
}

// Change returns the current record. The Change, and the New, Old and
// Tables slices it holds, belong to the iterator: the next call to Next
// overwrites them. Every Value.Data aliases the body (a non-nil, possibly
// empty slice for ValueText, nil for the other kinds). Table names and a
// schema change's Schema are not reused and may be kept.
func (it *ChangeIter) Change() *Change { return &it.c }

// Err returns the error that stopped the iteration, if any: a coded
// errcode.ChunkCorrupt error giving the record's offset in the body.
func (it *ChangeIter) Err() error { return it.err }

// Next advances to the next record and reports whether there is one. It
// returns false at the end of the body or on malformed bytes (see Err).
func (it *ChangeIter) Next() bool {
	if it.err != nil || it.off >= len(it.body) || (it.limited && it.left <= 0) {
		return false
	}
	if it.limited {
		it.left--
	}
	start := it.off
	n, k := binary.Uvarint(it.body[start:])
	if k <= 0 {
		return it.fail(start, "record length is not a valid uvarint")
	}
	if n > uint64(len(it.body)-start-k) {
		return it.fail(start, "record of %d bytes runs past the end of the body", n)
	}
	rec := it.body[start+k : start+k+int(n)]
	if msg, args := it.parse(rec); msg != "" {
		return it.fail(start, msg, args...)
	}
	if err := validateChange(&it.c); err != nil {
		return it.fail(start, "%v", err)
	}
	it.off = start + k + int(n)
	return true
}

func (it *ChangeIter) fail(off int, format string, args ...any) bool {
	it.err = errcode.New(errcode.ChunkCorrupt, fmt.Sprintf("change chunk body: record at offset %d: ", off)+format, args...)
	it.c = Change{}
	return false
}

// recReader reads the fields of one record. Its methods return ok false when
// the record ends too early or a varint is malformed.
type recReader struct {
	b []byte
	p int
}

func (r *recReader) byte() (byte, bool) {
	if r.p >= len(r.b) {
		return 0, false
	}
	r.p++
	return r.b[r.p-1], true
}

func (r *recReader) uvarint() (uint64, bool) {
	if r.p < len(r.b) && r.b[r.p] < 0x80 {
		r.p++
		return uint64(r.b[r.p-1]), true
	}
	v, n := binary.Uvarint(r.b[r.p:])
	if n <= 0 {
		return 0, false
	}
	r.p += n
	return v, true
}

func (r *recReader) varint() (int64, bool) {
	u, ok := r.uvarint()
	return int64(u>>1) ^ -int64(u&1), ok
}

// bytes returns the next n bytes, aliasing the record, capacity clipped.
func (r *recReader) bytes(n uint64) ([]byte, bool) {
	if n > uint64(len(r.b)-r.p) {
		return nil, false
	}
	end := r.p + int(n)
	s := r.b[r.p:end:end]
	r.p = end
	return s, true
}

// parse decodes rec into it.c and advances the state. On failure it returns
// a message and its arguments.
func (it *ChangeIter) parse(rec []byte) (string, []any) {
	r := recReader{b: rec}
	c := &it.c
	*c = Change{}
	p := &it.prev
	op, ok := r.byte()
	if !ok {
		return "empty record", nil
	}
	c.Op = Op(op)
	mask, ok := r.uvarint()
	if !ok {
		return "bad field mask", nil
	}
	if mask&^fieldsKnown != 0 {
		return "unknown fields %#x", []any{mask &^ fieldsKnown}
	}
	if mask&fieldOrdinalNext != 0 && mask&fieldOrdinal != 0 {
		return "ordinal given twice", nil
	}
	c.Identified = mask&fieldIdentified != 0
	c.XID, c.CommitLSN, c.LSN, c.Tx = p.xid, p.commitLSN, p.lsn, p.tx
	if mask&fieldXID != 0 {
		d, ok := r.varint()
		if !ok || d < math.MinInt32 || d > math.MaxInt32 {
			return "bad transaction ID", nil
		}
		c.XID = p.xid + uint32(int32(d))
	}
	if mask&fieldCommitLSN != 0 {
		d, ok := r.varint()
		if !ok {
			return "bad commit LSN", nil
		}
		c.CommitLSN = p.commitLSN + uint64(d)
	}
	if mask&fieldLSN != 0 {
		d, ok := r.varint()
		if !ok {
			return "bad LSN", nil
		}
		c.LSN = p.lsn + uint64(d)
	}
	if mask&fieldOrdinalNext != 0 {
		c.Ordinal = p.ordinal + 1
	}
	if mask&fieldTable != 0 {
		name, msg := it.tableRef(&r)
		if msg != "" {
			return msg, nil
		}
		c.Table = name
	}
	if mask&fieldNew != 0 {
		vals, msg := readValues(&r, it.newBuf[:0])
		if msg != "" {
			return "new image: " + msg, nil
		}
		it.newBuf, c.New = vals, vals
	}
	if mask&fieldOld != 0 {
		kind, ok := r.byte()
		if !ok || (kind != 'K' && kind != 'O') {
			return "bad old image kind", nil
		}
		c.OldKind = kind
		vals, msg := readValues(&r, it.oldBuf[:0])
		if msg != "" {
			return "old image: " + msg, nil
		}
		it.oldBuf, c.Old = vals, vals
	}
	if mask&fieldOrdinal != 0 {
		v, ok := r.uvarint()
		if !ok || v > math.MaxUint32 {
			return "bad ordinal", nil
		}
		c.Ordinal = uint32(v)
	}
	if mask&fieldCommitTime != 0 {
		d, ok := r.varint()
		if !ok {
			return "bad commit time", nil
		}
		c.CommitTime = int64(uint64(p.commitTime) + uint64(d))
	}
	if mask&fieldEndLSN != 0 {
		d, ok := r.varint()
		if !ok {
			return "bad end LSN", nil
		}
		c.EndLSN = c.LSN + uint64(d)
	}
	if mask&fieldTables != 0 {
		n, ok := r.uvarint()
		// Every reference takes at least one byte.
		if !ok || n > uint64(len(r.b)-r.p) {
			return "bad truncate table count", nil
		}
		tables := it.tables[:0]
		for range n {
			name, msg := it.tableRef(&r)
			if msg != "" {
				return msg, nil
			}
			tables = append(tables, name)
		}
		it.tables, c.Tables = tables, tables
	}
	if mask&fieldTruncate != 0 {
		if c.TruncateFlags, ok = r.byte(); !ok {
			return "bad truncate flags", nil
		}
	}
	if mask&fieldSchema != 0 {
		n, ok := r.uvarint()
		if !ok {
			return "bad schema length", nil
		}
		js, ok := r.bytes(n)
		if !ok {
			return "schema of %d bytes runs past the record", []any{n}
		}
		var t Table
		if err := strictUnmarshal(js, &t); err != nil {
			return "schema does not parse: %v", []any{err}
		}
		c.Schema = &t
	}
	if mask&fieldTx != 0 {
		n, ok := r.uvarint()
		if !ok {
			return "bad transaction ID length", nil
		}
		tx, ok := r.bytes(n)
		if !ok {
			return "transaction ID of %d bytes runs past the record", []any{n}
		}
		c.Tx = string(tx)
	}
	if r.p != len(rec) {
		return "%d bytes left over", []any{len(rec) - r.p}
	}
	p.xid, p.commitLSN, p.lsn, p.ordinal, p.tx = c.XID, c.CommitLSN, c.LSN, c.Ordinal, c.Tx
	if c.CommitTime != 0 {
		p.commitTime = c.CommitTime
	}
	return "", nil
}

// tableRef reads a table reference, defining a new dictionary entry when it
// is the next unused index.
func (it *ChangeIter) tableRef(r *recReader) (string, string) {
	i, ok := r.uvarint()
	if !ok {
		return "", "bad table reference"
	}
	if i < uint64(len(it.dict)) {
		return it.dict[i], ""
	}
	if i > uint64(len(it.dict)) {
		return "", fmt.Sprintf("table reference %d beyond the %d names defined", i, len(it.dict))
	}
	n, ok := r.uvarint()
	if !ok || n == 0 {
		return "", "bad table name length"
	}
	b, ok := r.bytes(n)
	if !ok {
		return "", "table name runs past the record"
	}
	name, ok := it.intern[string(b)]
	if !ok {
		name = string(b)
		if it.intern == nil {
			it.intern = make(map[string]string)
		}
		if len(it.intern) < maxInternedNames {
			it.intern[name] = name
		}
	}
	it.dict = append(it.dict, name)
	return name, ""
}

// readValues reads a row image into buf's storage.
func readValues(r *recReader, buf []Value) ([]Value, string) {
	n, ok := r.uvarint()
	// Every value takes at least one byte.
	if !ok || n > MaxColumns || n > uint64(len(r.b)-r.p) {
		return buf, "bad value count"
	}
	if uint64(cap(buf)) < n {
		buf = make([]Value, 0, max(n, 16))
	}
	buf = buf[:n]
	for i := range buf {
		kind, _ := r.byte()
		switch kind {
		case ValueNull, ValueUnchanged:
			buf[i] = Value{Kind: kind}
		case ValueText:
			l, ok := r.uvarint()
			if !ok {
				return buf, "bad value length"
			}
			d, ok := r.bytes(l)
			if !ok {
				return buf, fmt.Sprintf("value %d of %d bytes runs past the record", i, l)
			}
			buf[i] = Value{Kind: ValueText, Data: d}
		default:
			return buf, fmt.Sprintf("value %d has unknown kind %#x", i, kind)
		}
	}
	return buf, ""
}

// scanChanges parses every record of a change body and returns how many
// there are; DecodeChunk uses it to check a change chunk's framing.
func scanChanges(body []byte) (int64, error) {
	it := NewChangeIter(body)
	var n int64
	for it.Next() {
		n++
	}
	return n, it.Err()
}

// ReadChangeChunk reads and checks the change chunk ref names, as ReadChunk
// does, and returns an iterator over its records. A chunk of another kind
// (row chunks where change records are expected) is a coded
// errcode.ChunkCorrupt error naming the key.
func (c *Chain) ReadChangeChunk(ctx context.Context, ref ChunkRef) (*ChangeIter, error) {
	h, body, err := c.ReadChunk(ctx, ref)
	if err != nil {
		return nil, err
	}
	if h.Kind != ChunkKindChanges {
		return nil, errcode.New(errcode.ChunkCorrupt,
			"chunk %s holds rows of %s (kind %d), not change records", ref.Key, h.Table, h.Kind)
	}
	it := NewChangeIter(body)
	if ref.Span != nil {
		// A span of a compacted chunk: the records before it are decoded
		// (each is written relative to the one before) and passed over.
		for i := int64(0); i < ref.Span.Skip; i++ {
			if !it.Next() {
				if err := it.Err(); err != nil {
					return nil, chunkErr(err, ref.Key)
				}
				return nil, errcode.New(errcode.ChunkCorrupt, "chunk %s ends before the %d records its span skips", ref.Key, ref.Span.Skip)
			}
		}
		it.limited, it.left = true, ref.Rows
	}
	return it, nil
}
