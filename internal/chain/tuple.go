package chain

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/errcode"
)

// A row chunk's body is a sequence of tuples framed exactly as in
// PostgreSQL's binary COPY format: an int16 field count, then for each field
// an int32 length (-1 for NULL) followed by that many bytes, all big-endian.

// MaxColumns is the largest field count a tuple can declare (the int16 range).
const MaxColumns = 1<<15 - 1

// ErrMalformedTuple is wrapped by errors about bytes that are not a valid
// tuple: a field count other than the expected one, or a length below -1.
var ErrMalformedTuple = errors.New("malformed tuple")

// ErrCopyTrailer is returned by ScanTuples when it meets the binary COPY
// trailer (a field count of -1) at a tuple boundary. The trailer ends a COPY
// stream; it never appears inside a chunk body.
var ErrCopyTrailer = errors.New("binary COPY trailer")

// copySignature starts every binary COPY stream.
var copySignature = []byte("PGCOPY\n\xff\r\n\x00")

// copyHeaderMin is the signature, the flags field and the extension length.
const copyHeaderMin = 11 + 4 + 4

// AppendCopyHeader appends the header of a binary COPY stream (signature, no
// flags, no header extension) to dst, as COPY FROM STDIN (FORMAT binary)
// expects before the first tuple.
func AppendCopyHeader(dst []byte) []byte {
	dst = append(dst, copySignature...)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	return binary.BigEndian.AppendUint32(dst, 0)
}

// AppendCopyTrailer appends the binary COPY trailer (int16 -1) to dst.
func AppendCopyTrailer(dst []byte) []byte {
	return append(dst, 0xff, 0xff)
}

// CopyHeaderLen returns the length of the binary COPY header (including any
// header extension) at the start of buf, which is where the first tuple
// begins. It returns io.ErrUnexpectedEOF when buf is too short to hold the
// whole header, and an error when the signature is wrong or the stream
// carries OIDs.
func CopyHeaderLen(buf []byte) (int, error) {
	if len(buf) < copyHeaderMin {
		if !bytes.HasPrefix(copySignature, buf[:min(len(buf), len(copySignature))]) {
			return 0, errors.New("binary COPY header: bad signature")
		}
		return 0, io.ErrUnexpectedEOF
	}
	if !bytes.Equal(buf[:len(copySignature)], copySignature) {
		return 0, errors.New("binary COPY header: bad signature")
	}
	flags := binary.BigEndian.Uint32(buf[11:])
	if flags&(1<<16) != 0 {
		return 0, errors.New("binary COPY header: stream includes OIDs, which sluice does not read")
	}
	if flags&0xffff != 0 {
		return 0, fmt.Errorf("binary COPY header: unknown critical flags %#x", flags&0xffff)
	}
	ext := binary.BigEndian.Uint32(buf[15:])
	if ext > 1<<30 {
		return 0, fmt.Errorf("binary COPY header: extension length %d out of range", ext)
	}
	n := copyHeaderMin + int(ext)
	if len(buf) < n {
		return 0, io.ErrUnexpectedEOF
	}
	return n, nil
}

// ScanTuples reads buf, which starts at a tuple boundary, and returns how many
// leading bytes form complete tuples of the given field count and how many
// tuples that is. An incomplete tuple at the end is not an error: complete
// stops before it. A field count other than columns, or a field length below
// -1, returns an error wrapping ErrMalformedTuple; the COPY trailer returns
// ErrCopyTrailer. In both cases complete and tuples cover the tuples before
// the offending one. ScanTuples does not allocate unless it fails.
func ScanTuples(buf []byte, columns int) (complete int, tuples int, err error) {
	if columns < 0 || columns > MaxColumns {
		return 0, 0, fmt.Errorf("%w: column count %d out of range", ErrMalformedTuple, columns)
	}
	off := 0
	for {
		if len(buf)-off < 2 {
			return off, tuples, nil
		}
		n := int16(binary.BigEndian.Uint16(buf[off:]))
		if int(n) != columns {
			if n == -1 {
				return off, tuples, ErrCopyTrailer
			}
			return off, tuples, fmt.Errorf("%w at offset %d: %d fields, want %d", ErrMalformedTuple, off, n, columns)
		}
		p := off + 2
		for range columns {
			if len(buf)-p < 4 {
				return off, tuples, nil
			}
			l := int32(binary.BigEndian.Uint32(buf[p:]))
			p += 4
			if l < 0 {
				if l != -1 {
					return off, tuples, fmt.Errorf("%w at offset %d: field length %d", ErrMalformedTuple, p-4, l)
				}
				continue
			}
			if int64(l) > int64(len(buf)-p) {
				return off, tuples, nil
			}
			p += int(l)
		}
		off = p
		tuples++
	}
}

// TupleIter walks the tuples of a chunk body without copying them.
//
//	it := chain.NewTupleIter(body, columns)
//	for it.Next() {
//		use(it.Values())
//	}
//	if err := it.Err(); err != nil { ... }
type TupleIter struct {
	body    []byte
	off     int
	columns int
	values  [][]byte
	tuple   []byte
	err     error
}

// NewTupleIter returns an iterator over the tuples in body, each of which must
// have the given field count.
func NewTupleIter(body []byte, columns int) *TupleIter {
	it := &TupleIter{}
	it.Reset(body, columns)
	return it
}

// Reset points the iterator at a new body, keeping its buffers.
func (it *TupleIter) Reset(body []byte, columns int) {
	it.body, it.off, it.columns, it.tuple, it.err = body, 0, columns, nil, nil
	if columns < 0 || columns > MaxColumns {
		it.err = errcode.New(errcode.ChunkCorrupt, "tuple iterator: column count %d out of range", columns)
		return
	}
	if cap(it.values) < columns {
		it.values = make([][]byte, columns)
	}
	it.values = it.values[:columns]
}

// Next advances to the next tuple and reports whether there is one. It
// returns false at the end of the body or on malformed bytes (see Err).
func (it *TupleIter) Next() bool {
	if it.err != nil || it.off >= len(it.body) {
		it.tuple = nil
		return false
	}
	buf, start := it.body, it.off
	if len(buf)-start < 2 {
		return it.fail("offset %d: truncated field count", start)
	}
	if n := int16(binary.BigEndian.Uint16(buf[start:])); int(n) != it.columns {
		return it.fail("offset %d: %d fields, want %d", start, n, it.columns)
	}
	p := start + 2
	for i := range it.values {
		if len(buf)-p < 4 {
			return it.fail("offset %d: truncated field length", p)
		}
		l := int32(binary.BigEndian.Uint32(buf[p:]))
		p += 4
		switch {
		case l == -1:
			it.values[i] = nil
		case l < -1:
			return it.fail("offset %d: field length %d", p-4, l)
		case int64(l) > int64(len(buf)-p):
			return it.fail("offset %d: field of %d bytes runs past the end", p-4, l)
		default:
			end := p + int(l)
			it.values[i] = buf[p:end:end]
			p = end
		}
	}
	it.tuple = buf[start:p:p]
	it.off = p
	return true
}

func (it *TupleIter) fail(format string, args ...any) bool {
	it.err = errcode.Wrap(errcode.ChunkCorrupt, ErrMalformedTuple, "chunk body: "+format, args...)
	it.tuple = nil
	return false
}

// Values returns the current tuple's field values: nil for NULL, a non-nil
// (possibly empty) slice otherwise. The slice and the values alias the body
// and the iterator's buffer; they are valid until the next call to Next.
func (it *TupleIter) Values() [][]byte { return it.values }

// Tuple returns the current tuple's bytes, framing included, aliasing the body.
func (it *TupleIter) Tuple() []byte { return it.tuple }

// Err returns the error that stopped the iteration, if any: a coded
// errcode.ChunkCorrupt error.
func (it *TupleIter) Err() error { return it.err }
