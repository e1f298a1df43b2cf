package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/errcode"
)

// IDLength is the length of a content-derived ID in hex characters.
const IDLength = 40

// NormalizeTime returns t in UTC, truncated to whole microseconds, which is
// the form every timestamp takes in the chain. A normalized time survives a
// JSON round trip unchanged, so hashes computed over it are reproducible.
func NormalizeTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// canonicalManifest returns the canonical JSON encoding of m with CreatedAt
// normalized and the ID replaced by id. encoding/json emits struct fields in
// declaration order without whitespace, so the encoding is deterministic.
func canonicalManifest(m *Manifest, id string) ([]byte, error) {
	c := *m
	c.ID = id
	c.CreatedAt = NormalizeTime(m.CreatedAt)
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return b, nil
}

// ComputeID returns the content-derived ID of m: the first 40 lowercase hex
// characters of the SHA-256 of the canonical encoding of m with its ID empty
// and CreatedAt normalized (see NormalizeTime). m is not modified.
func ComputeID(m *Manifest) (string, error) {
	if m == nil {
		return "", fmt.Errorf("compute manifest id: nil manifest")
	}
	b, err := canonicalManifest(m, "")
	if err != nil {
		return "", fmt.Errorf("compute manifest id: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:IDLength], nil
}

// Seal sets m.FormatVersion to ManifestFormatVersion when it is zero,
// normalizes m.CreatedAt and sets m.ID to the content-derived ID. Call it
// after the last change to the manifest's content.
func (m *Manifest) Seal() error {
	if m.FormatVersion == 0 {
		m.FormatVersion = ManifestFormatVersion
	}
	m.CreatedAt = NormalizeTime(m.CreatedAt)
	id, err := ComputeID(m)
	if err != nil {
		return err
	}
	m.ID = id
	return nil
}

// VerifyID recomputes m's ID from its content and returns a coded
// errcode.ManifestInvalid error when it differs from m.ID.
func VerifyID(m *Manifest) error {
	if m == nil {
		return errcode.New(errcode.ManifestInvalid, "nil manifest")
	}
	want, err := ComputeID(m)
	if err != nil {
		return errcode.Wrap(errcode.ManifestInvalid, err, "manifest %s", m.ID)
	}
	if m.ID != want {
		return errcode.New(errcode.ManifestInvalid,
			"manifest %s: content hashes to %s, so it was altered after it was sealed", m.ID, want)
	}
	return nil
}

// ValidID reports whether id has the form of a content-derived ID: 40
// lowercase hex characters.
func ValidID(id string) bool { return isLowerHex(id, IDLength) }

// validSHA256 reports whether s is a lowercase hex SHA-256 digest.
func validSHA256(s string) bool { return isLowerHex(s, 2*sha256.Size) }

// isLowerHex reports whether s is exactly n lowercase hex characters.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
