// Package seal encrypts and authenticates what a chain stores, and signs
// its catalog (docs/security.md, docs/chain-format.md §11).
//
// A chain's bytes are sealed with AES-256-GCM under random data keys. A
// data key never appears in the store, in workflow history, logs or
// metrics: the store holds it wrapped in an Envelope by a Wrapper (a
// passphrase stretched with Argon2id, age recipients, or a KMS key), and
// commands carry a KeyRef, a reference the worker resolves. Catalog
// generations are signed with Ed25519 (SigningKey, VerifyKey).
//
// Nothing here does I/O on the store; internal/chain decides what is
// sealed and where.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Algorithm is the AEAD every data key is used with.
const Algorithm = "AES-256-GCM"

// DataKeySize is the length of a data key in bytes.
const DataKeySize = 32

// sealedMagic starts every sealed object; the byte after it is the seal
// format version.
var sealedMagic = [4]byte{'S', 'L', 'S', 'E'}

const (
	sealVersion = 1
	nonceSize   = 12
	// prefixLen is the magic, the version and the nonce.
	prefixLen = len(sealedMagic) + 1 + nonceSize
	// Overhead is how many bytes sealing adds to a plaintext.
	Overhead = prefixLen + 16
)

// DataKey is one chain data key, ready to seal and open. Its ID names the
// envelope that holds it wrapped (keys/<id>.json).
type DataKey struct {
	// ID is 32 lowercase hex characters, random, unique to the key.
	ID   string
	aead cipher.AEAD
	raw  []byte
}

// NewDataKey draws a fresh random data key and ID.
func NewDataKey() (*DataKey, error) {
	raw := make([]byte, DataKeySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("draw a data key: %w", err)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("draw a data key ID: %w", err)
	}
	return dataKeyFrom(hex.EncodeToString(id), raw)
}

func dataKeyFrom(id string, raw []byte) (*DataKey, error) {
	if len(raw) != DataKeySize {
		return nil, errcode.New(errcode.KeyWrong, "data key %s unwrapped to %d bytes, not %d", id, len(raw), DataKeySize)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("data key %s: %w", id, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("data key %s: %w", id, err)
	}
	return &DataKey{ID: id, aead: aead, raw: raw}, nil
}

// ValidKeyID reports whether id has the form of a data key ID.
func ValidKeyID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// String names the key by its ID only.
func (k *DataKey) String() string { return "data key " + k.ID }

// IsSealed reports whether data starts like a sealed object.
func IsSealed(data []byte) bool {
	return len(data) >= len(sealedMagic) && [4]byte(data[:4]) == sealedMagic
}

// Seal encrypts plain under the key with a random nonce, binding it to aad,
// and returns the sealed object: magic, version, nonce, ciphertext and tag.
// dst, when it has the capacity, is reused.
func (k *DataKey) Seal(dst, plain, aad []byte) ([]byte, error) {
	need := Overhead + len(plain)
	if cap(dst) < need {
		dst = make([]byte, 0, need)
	}
	dst = dst[:prefixLen]
	copy(dst, sealedMagic[:])
	dst[4] = sealVersion
	if _, err := rand.Read(dst[5:prefixLen]); err != nil {
		return nil, fmt.Errorf("draw a nonce: %w", err)
	}
	return k.aead.Seal(dst, dst[5:prefixLen], plain, k.boundAAD(dst[:5], aad)), nil
}

// Open authenticates and decrypts a sealed object made by Seal with the
// same aad. Anything else (changed bytes, another place's aad, another
// key) is a coded errcode.ChunkSealBroken error; what names the object is
// the caller's to add.
func (k *DataKey) Open(dst, sealed, aad []byte) ([]byte, error) {
	if !IsSealed(sealed) || len(sealed) < Overhead {
		return nil, errcode.New(errcode.ChunkSealBroken, "the object is not sealed (no seal header)")
	}
	if sealed[4] != sealVersion {
		return nil, errcode.New(errcode.FormatUnsupported, "seal format version %d is not one this sluice reads", sealed[4])
	}
	out, err := k.aead.Open(dst, sealed[5:prefixLen], sealed[prefixLen:], k.boundAAD(sealed[:5], aad))
	if err != nil {
		return nil, errcode.New(errcode.ChunkSealBroken, "authentication under %s failed: the bytes were changed, or belong to another place, link or chain", k)
	}
	return out, nil
}

// OpenInPlace is Open decrypting into sealed's own bytes: the plaintext it
// returns shares sealed's backing array, which the caller must not use
// otherwise afterwards. It spares a reader a second buffer of the chunk's
// size.
func (k *DataKey) OpenInPlace(sealed, aad []byte) ([]byte, error) {
	if !IsSealed(sealed) || len(sealed) < Overhead {
		return nil, errcode.New(errcode.ChunkSealBroken, "the object is not sealed (no seal header)")
	}
	return k.Open(sealed[prefixLen:prefixLen], sealed, aad)
}

// boundAAD prefixes the caller's associated data with the seal header and
// the key's ID, so a sealed object opens only as what and where it was
// sealed.
func (k *DataKey) boundAAD(header, aad []byte) []byte {
	b := make([]byte, 0, len(header)+len(k.ID)+len(aad)+8)
	b = append(b, header...)
	b = append(b, k.ID...)
	return append(b, aad...)
}

// AAD builds associated data from fields, each length-prefixed so no two
// field lists encode alike.
func AAD(fields ...string) []byte {
	n := 0
	for _, f := range fields {
		n += len(f) + binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// Material returns the raw key. Only tests call it, to show the key
// appears nowhere it must not.
func (k *DataKey) Material() []byte { return append([]byte(nil), k.raw...) }
