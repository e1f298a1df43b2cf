package verify

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/bits"

	"github.com/sluicehq/sluice/internal/value"
)

// Digest is an order-independent digest of a multiset of rows: how many
// there are and the sum, modulo 2^256, of each row's SHA-256. A sum (unlike
// an XOR) does not cancel a row that appears twice, so a duplicated row of
// a keyless table changes it, as does any changed value. Digests of
// disjoint parts of a table add up to the table's.
type Digest struct {
	Rows int64
	sum  [4]uint64 // little-endian limbs of the 256-bit sum
	buf  []byte
}

// Add folds one row into the digest. Each value is normalised by its
// column's neutral kind — rendered as the text PostgreSQL prints for it
// (value.EncodePGText) — so engines that store a value differently (a MySQL
// DATETIME, an SQLite REAL) digest alike when the value is the same.
func (d *Digest) Add(kinds []value.Kind, row []value.Value) {
	d.buf = appendRow(d.buf[:0], kinds, row)
	d.addHash(sha256.Sum256(d.buf))
}

// addHash folds one row's hash into the digest.
func (d *Digest) addHash(h [32]byte) {
	var carry uint64
	for i := range d.sum {
		// The hash's bytes read big-endian, most significant limb first.
		limb := binary.BigEndian.Uint64(h[24-8*i:])
		d.sum[i], carry = bits.Add64(d.sum[i], limb, carry)
	}
	d.Rows++
}

// appendRow appends the framed rendering of row's values to b: for each a
// tag (n NULL, t text, e a value its kind cannot render, by the reason)
// and, but for NULL, its length and text.
func appendRow(b []byte, kinds []value.Kind, row []value.Value) []byte {
	for i, v := range row {
		if v.Null {
			b = append(b, 'n')
			continue
		}
		text, err := value.EncodePGText(kinds[i], v)
		if err != nil {
			// A value its kind cannot render still digests, by the
			// reason, so the two sides compare unequal unless they fail
			// alike.
			b = append(b, 'e')
			text = []byte(err.Error())
		} else {
			b = append(b, 't')
		}
		b = binary.AppendUvarint(b, uint64(len(text)))
		b = append(b, text...)
	}
	return b
}

// Sum is the 256-bit sum as 64 hex characters.
func (d *Digest) Sum() string {
	var out [32]byte
	for i, limb := range d.sum {
		binary.BigEndian.PutUint64(out[24-8*i:], limb)
	}
	return hex.EncodeToString(out[:])
}

// Equal reports whether two digests hold the same count and sum.
func (d *Digest) Equal(o *Digest) bool { return d.Rows == o.Rows && d.sum == o.sum }
