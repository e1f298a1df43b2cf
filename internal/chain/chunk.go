package chain

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/internal/errcode"
)

// ChunkKind says what a chunk's body holds.
type ChunkKind uint8

// Chunk kinds.
const (
	// ChunkKindRows is a chunk of table rows in binary COPY tuple framing.
	ChunkKindRows ChunkKind = 1
	// ChunkKindChanges is a chunk of an incremental's change records (see
	// ChangeBuilder and ChangeIter).
	ChunkKindChanges ChunkKind = 2
)

// ChunkMagic starts every chunk file.
const ChunkMagic = "SLCK"

// MaxChunkRawSize is the largest uncompressed body a chunk may declare. A
// header claiming more is refused before any memory is allocated for it.
const MaxChunkRawSize = 1 << 30

// maxChunkHeaderLen bounds the JSON header; real headers are well under 1 KiB.
const maxChunkHeaderLen = 64 << 10

// maxZstdRatio bounds how much a zstd frame can expand: every block holds
// at most 128 KiB and takes at least 4 bytes (an RLE block), so a body that
// claims more than this many bytes per compressed byte cannot be genuine.
const maxZstdRatio = 128 << 10 / 4

// chunkPrefixLen is the fixed part before the header length: magic,
// version, kind, flags.
const chunkPrefixLen = len(ChunkMagic) + 3

// ChunkHeader describes a chunk. It is stored as JSON after the chunk's
// fixed prefix (the kind is a prefix byte, not part of the JSON).
type ChunkHeader struct {
	// Kind is what the body holds.
	Kind ChunkKind
	// Table is the qualified name "schema.name" of the rows' table; empty
	// in a change chunk.
	Table string
	// Columns is the field count of every tuple; 0 in a change chunk.
	Columns int
	// Rows is the number of tuples, or of change records, in the body.
	Rows int64
	// RawSize is the uncompressed body length in bytes.
	RawSize int64
}

// chunkHeaderJSON is the stored form of ChunkHeader's JSON part.
type chunkHeaderJSON struct {
	Table   string `json:"table"`
	Columns int    `json:"columns"`
	Rows    int64  `json:"rows"`
	RawSize int64  `json:"raw_size"`
}

// RowBuilder accumulates the tuples of one row chunk and encodes the chunk
// file. A builder is reused for a table's chunks with Reset; it is not safe
// for concurrent use.
type RowBuilder struct {
	table   string
	columns int
	raw     []byte
	rows    int64
	out     []byte // reused encoding buffer
}

// NewRowBuilder returns a builder for chunks of the given table (qualified
// name) whose tuples have the given field count.
func NewRowBuilder(table string, columns int) *RowBuilder {
	return &RowBuilder{table: table, columns: columns}
}

// AppendTuple appends one tuple that is already framed (field count, then
// length-prefixed fields). It fails, appending nothing, unless tuple is
// exactly one complete tuple with the builder's field count.
func (b *RowBuilder) AppendTuple(tuple []byte) error {
	complete, n, err := ScanTuples(tuple, b.columns)
	if err == nil && (n != 1 || complete != len(tuple)) {
		err = fmt.Errorf("%w: want exactly one complete tuple, got %d tuples in %d of %d bytes",
			ErrMalformedTuple, n, complete, len(tuple))
	}
	if err != nil {
		return fmt.Errorf("append tuple to chunk of %s: %w", b.table, err)
	}
	b.raw = append(b.raw, tuple...)
	b.rows++
	return nil
}

// AppendTuples appends buf, which must consist of whole framed tuples with
// the builder's field count (as cut by ScanTuples), and returns how many
// tuples it held. On error nothing is appended.
func (b *RowBuilder) AppendTuples(buf []byte) (int, error) {
	complete, n, err := ScanTuples(buf, b.columns)
	if err == nil && complete != len(buf) {
		err = fmt.Errorf("%w: %d trailing bytes are not a complete tuple", ErrMalformedTuple, len(buf)-complete)
	}
	if err != nil {
		return 0, fmt.Errorf("append tuples to chunk of %s: %w", b.table, err)
	}
	b.raw = append(b.raw, buf...)
	b.rows += int64(n)
	return n, nil
}

// AppendRow frames and appends one row. A nil value is NULL; a non-nil empty
// value is an empty value. It panics if len(values) differs from the
// builder's field count or a value is longer than 2^31-1 bytes: both are
// programming errors.
func (b *RowBuilder) AppendRow(values [][]byte) {
	if len(values) != b.columns {
		panic(fmt.Sprintf("chain: AppendRow with %d values to a chunk of %d columns", len(values), b.columns))
	}
	need := 2 + 4*len(values)
	for _, v := range values {
		need += len(v)
	}
	b.raw = slices.Grow(b.raw, need)
	b.raw = binary.BigEndian.AppendUint16(b.raw, uint16(len(values)))
	for _, v := range values {
		if v == nil {
			b.raw = append(b.raw, 0xff, 0xff, 0xff, 0xff)
			continue
		}
		if len(v) > math.MaxInt32 {
			panic("chain: AppendRow value longer than 2^31-1 bytes")
		}
		b.raw = binary.BigEndian.AppendUint32(b.raw, uint32(len(v)))
		b.raw = append(b.raw, v...)
	}
	b.rows++
}

// Rows returns the number of tuples appended since the last Reset.
func (b *RowBuilder) Rows() int64 { return b.rows }

// RawLen returns the uncompressed body length so far, for cutting chunks at
// a target size.
func (b *RowBuilder) RawLen() int { return len(b.raw) }

// Reset empties the builder for the next chunk of the same table, keeping
// its buffers.
func (b *RowBuilder) Reset() {
	b.raw = b.raw[:0]
	b.rows = 0
}

// Encode returns the whole chunk file: prefix, header and compressed body.
// The returned slice is the caller's; the builder keeps its contents until
// Reset.
func (b *RowBuilder) Encode() ([]byte, error) {
	return b.encode(chunkLevel)
}

func (b *RowBuilder) encode(level zstd.EncoderLevel) ([]byte, error) {
	switch {
	case b.table == "":
		return nil, errors.New("encode chunk: empty table name")
	case b.columns < 0 || b.columns > MaxColumns:
		return nil, fmt.Errorf("encode chunk of %s: column count %d out of range", b.table, b.columns)
	case len(b.raw) > MaxChunkRawSize:
		return nil, fmt.Errorf("encode chunk of %s: body of %d bytes exceeds the %d-byte limit", b.table, len(b.raw), MaxChunkRawSize)
	}
	data, err := encodeChunkFile(&b.out, ChunkKindRows,
		chunkHeaderJSON{Table: b.table, Columns: b.columns, Rows: b.rows, RawSize: int64(len(b.raw))}, b.raw, level)
	if err != nil {
		return nil, fmt.Errorf("encode chunk of %s: %w", b.table, err)
	}
	return data, nil
}

// encodeChunkFile frames a chunk file of either kind: magic, version, kind,
// flags, the header's length and JSON, then the zstd-compressed body. buf is
// the builder's reusable output buffer; the returned bytes are a copy.
func encodeChunkFile(buf *[]byte, kind ChunkKind, h chunkHeaderJSON, raw []byte, level zstd.EncoderLevel) ([]byte, error) {
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	enc, err := encoderAt(level)
	if err != nil {
		return nil, err
	}
	prefix := chunkPrefixLen + binary.MaxVarintLen64 + len(hdr)
	if need := prefix + enc.MaxEncodedSize(len(raw)); cap(*buf) < need {
		*buf = make([]byte, 0, need)
	}
	out := append((*buf)[:0], ChunkMagic...)
	out = append(out, ChunkFormatVersion, byte(kind), 0)
	out = binary.AppendUvarint(out, uint64(len(hdr)))
	out = append(out, hdr...)
	if len(raw) > 0 {
		out = enc.EncodeAll(raw, out)
	}
	*buf = out
	return bytes.Clone(out), nil
}

// DecodeChunk checks and decodes a chunk file, returning its header and its
// uncompressed body. An unknown format version, kind or flag is a coded
// errcode.FormatUnsupported error; any other malformation (bad magic, bad
// header, a body that does not decompress, whose length or tuple or record
// count differs from the header, or whose framing is broken: for a change
// chunk, every record is parsed and checked) is a coded
// errcode.ChunkCorrupt error. It never panics, and it refuses a header that
// claims more than MaxChunkRawSize bytes, or more than the compressed bytes
// could expand to, before allocating for it.
func DecodeChunk(data []byte) (ChunkHeader, []byte, error) {
	return DecodeChunkInto(nil, data)
}

// DecodeChunkInto is DecodeChunk decoding into dst's storage when its
// capacity suffices, so a loop over chunks can reuse one buffer.
func DecodeChunkInto(dst, data []byte) (ChunkHeader, []byte, error) {
	h, payload, err := parseChunkPrefix(data)
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	if h.RawSize == 0 {
		if len(payload) != 0 {
			return ChunkHeader{}, nil, corrupt("header declares an empty body but %d compressed bytes follow", len(payload))
		}
		return h, dst[:0], nil
	}
	if h.RawSize > int64(len(payload))*maxZstdRatio {
		return ChunkHeader{}, nil, corrupt("header declares %d body bytes, more than %d compressed bytes can hold", h.RawSize, len(payload))
	}
	var fh zstd.Header
	if err := fh.Decode(payload); err != nil {
		return ChunkHeader{}, nil, errcode.Wrap(errcode.ChunkCorrupt, err, "chunk body is not a zstd frame")
	}
	if fh.HasFCS && fh.FrameContentSize != uint64(h.RawSize) {
		return ChunkHeader{}, nil, corrupt("zstd frame declares %d bytes, header %d", fh.FrameContentSize, h.RawSize)
	}
	dec, err := sharedDecoder()
	if err != nil {
		return ChunkHeader{}, nil, errcode.Wrap(errcode.Internal, err, "create zstd decoder")
	}
	if int64(cap(dst)) < h.RawSize {
		dst = make([]byte, 0, h.RawSize)
	}
	body, err := dec.DecodeAll(payload, dst[:0])
	if err != nil {
		return ChunkHeader{}, nil, errcode.Wrap(errcode.ChunkCorrupt, err, "chunk body does not decompress")
	}
	if int64(len(body)) != h.RawSize {
		return ChunkHeader{}, nil, corrupt("body decompresses to %d bytes, header says %d", len(body), h.RawSize)
	}
	if h.Kind == ChunkKindChanges {
		n, err := scanChanges(body)
		if err != nil {
			return ChunkHeader{}, nil, err
		}
		if n != h.Rows {
			return ChunkHeader{}, nil, corrupt("chunk body holds %d change records, header says %d", n, h.Rows)
		}
		return h, body, nil
	}
	complete, n, err := ScanTuples(body, h.Columns)
	if err != nil {
		return ChunkHeader{}, nil, errcode.Wrap(errcode.ChunkCorrupt, err, "chunk body framing")
	}
	if complete != len(body) {
		return ChunkHeader{}, nil, corrupt("chunk body ends inside a tuple at offset %d", complete)
	}
	if int64(n) != h.Rows {
		return ChunkHeader{}, nil, corrupt("chunk body holds %d tuples, header says %d", n, h.Rows)
	}
	return h, body, nil
}

// parseChunkPrefix checks the fixed prefix and header of a chunk file and
// returns the header and the compressed payload.
func parseChunkPrefix(data []byte) (ChunkHeader, []byte, error) {
	if len(data) < chunkPrefixLen+1 {
		return ChunkHeader{}, nil, corrupt("chunk is %d bytes, too short for its header", len(data))
	}
	if string(data[:len(ChunkMagic)]) != ChunkMagic {
		return ChunkHeader{}, nil, corrupt("chunk does not start with %q", ChunkMagic)
	}
	version, kind, flags := data[4], ChunkKind(data[5]), data[6]
	if version < OldestFormatVersion || version > ChunkFormatVersion {
		return ChunkHeader{}, nil, errcode.New(errcode.FormatUnsupported,
			"chunk format version %d; this sluice reads versions %d to %d", version, OldestFormatVersion, ChunkFormatVersion)
	}
	if kind != ChunkKindRows && kind != ChunkKindChanges {
		return ChunkHeader{}, nil, errcode.New(errcode.FormatUnsupported, "chunk kind %d is not readable by this sluice", kind)
	}
	if flags != 0 {
		return ChunkHeader{}, nil, errcode.New(errcode.FormatUnsupported, "chunk flags %#x are not readable by this sluice", flags)
	}
	rest := data[chunkPrefixLen:]
	hlen, n := binary.Uvarint(rest)
	if n <= 0 {
		return ChunkHeader{}, nil, corrupt("chunk header length is not a valid uvarint")
	}
	rest = rest[n:]
	if hlen > maxChunkHeaderLen || hlen > uint64(len(rest)) {
		return ChunkHeader{}, nil, corrupt("chunk header length %d exceeds the %d bytes that follow", hlen, len(rest))
	}
	var hj chunkHeaderJSON
	if err := strictUnmarshal(rest[:hlen], &hj); err != nil {
		return ChunkHeader{}, nil, errcode.Wrap(errcode.ChunkCorrupt, err, "chunk header does not parse")
	}
	h := ChunkHeader{Kind: kind, Table: hj.Table, Columns: hj.Columns, Rows: hj.Rows, RawSize: hj.RawSize}
	if kind == ChunkKindChanges {
		switch {
		case h.Table != "" || h.Columns != 0:
			return ChunkHeader{}, nil, corrupt("change chunk header names table %q and %d columns; it must name neither", h.Table, h.Columns)
		case h.RawSize < 0 || h.RawSize > MaxChunkRawSize:
			return ChunkHeader{}, nil, corrupt("chunk header raw size %d out of range (limit %d)", h.RawSize, MaxChunkRawSize)
		case h.Rows < 0 || h.Rows > h.RawSize/minChangeRecordLen:
			return ChunkHeader{}, nil, corrupt("chunk header record count %d impossible for %d body bytes", h.Rows, h.RawSize)
		}
		return h, rest[hlen:], nil
	}
	switch {
	case h.Table == "":
		return ChunkHeader{}, nil, corrupt("chunk header names no table")
	case h.Columns < 0 || h.Columns > MaxColumns:
		return ChunkHeader{}, nil, corrupt("chunk header column count %d out of range", h.Columns)
	case h.RawSize < 0 || h.RawSize > MaxChunkRawSize:
		return ChunkHeader{}, nil, corrupt("chunk header raw size %d out of range (limit %d)", h.RawSize, MaxChunkRawSize)
	case h.Rows < 0 || h.Rows > h.RawSize/(2+4*int64(h.Columns)):
		return ChunkHeader{}, nil, corrupt("chunk header row count %d impossible for %d body bytes", h.Rows, h.RawSize)
	}
	return h, rest[hlen:], nil
}

func corrupt(format string, args ...any) error {
	return errcode.New(errcode.ChunkCorrupt, format, args...)
}
