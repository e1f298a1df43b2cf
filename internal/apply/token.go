// Package apply holds the engine-independent parts of replaying a chain into
// a target: the broker's position token and its checksum, apply identities
// and the marks that make a re-delivered change a no-op, and lane routing.
package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// Engine markers of position tokens.
const (
	// EngineBroker marks a token written by this broker.
	EngineBroker = "backup-broker-v2"
	// EngineBrokerClassic marks a token of the classic broker format, which
	// this broker recognises as a broker's but does not resume from.
	EngineBrokerClassic = "backup-broker"
)

// Token is the broker's position for one stream, stored in the target in the
// same transaction as the rows it describes.
type Token struct {
	Engine string `json:"_engine"`
	Stream string `json:"stream"`
	// ChainID is the chain the position belongs to.
	ChainID string `json:"chain_id"`
	// LastApplied is the last link fully applied (a full after a cold start).
	LastApplied string `json:"last_applied"`
	// InProgress is set while the broker is inside an incremental.
	InProgress *Progress `json:"in_progress,omitempty"`
	// Owner is the lease of the run that may advance the position: every
	// apply transaction checks it, so a zombie of an older run is fenced.
	Owner string `json:"owner,omitempty"`
	// Changes counts the changes this stream has applied since its start.
	Changes int64 `json:"changes,omitempty"`
	// UpdatedAt is when the position last moved.
	UpdatedAt time.Time `json:"updated_at"`
	// Verified is the newest catalog generation the stream verified before
	// applying from it, written with the position: a chain whose catalog
	// is older (a rollback, a truncated tail) is refused.
	Verified *Verified `json:"verified,omitempty"`
	// Subset is the part of the chain's tables the stream applies to this
	// target (zero: every table). A run asking for another is refused.
	Subset target.Subset `json:"subset,omitzero"`
}

// Verified names a catalog generation a broker verified: its number and
// the SHA-256 of its stored commit.
type Verified struct {
	Generation int64  `json:"generation"`
	Commit     string `json:"commit,omitempty"`
}

// CheckNotRolledBack refuses a catalog (generation gen, stored hash
// commit) older than the one rec records, or the same generation with
// other content: catalog objects were deleted or older ones put back.
func CheckNotRolledBack(stream string, rec *Verified, gen int64, commit string) error {
	if rec == nil {
		return nil
	}
	if gen < rec.Generation {
		return errcode.New(errcode.ChainRolledBack,
			"stream %q verified catalog generation %d, and the chain's latest is now %d: its newest generations were deleted or older ones put back", stream, rec.Generation, gen)
	}
	if gen == rec.Generation && rec.Commit != "" && commit != "" && commit != rec.Commit {
		return errcode.New(errcode.ChainRolledBack,
			"stream %q verified catalog generation %d with commit %s, and the store now holds another generation %d (commit %s)", stream, gen, rec.Commit, gen, commit)
	}
	return nil
}

// newer returns whichever of a and b is the newer generation.
func newer(a, b *Verified) *Verified {
	if a == nil || (b != nil && b.Generation > a.Generation) {
		return b
	}
	return a
}

// Progress is a position inside an incremental.
type Progress struct {
	Incremental string `json:"incremental"`
	// ChunksDigest identifies the incremental's chunk list, so a rewritten
	// incremental is never resumed into.
	ChunksDigest string `json:"chunks_digest"`
	// AppliedThrough counts the records (begin and commit included) applied
	// from the start of the incremental; it always ends at a transaction
	// boundary every lane has committed.
	AppliedThrough int64 `json:"applied_through"`
}

// ErrForeign is returned by Decode for a row written by another writer.
var ErrForeign = errors.New("position written by another writer")

// ErrCorrupt is returned by Decode for a broker row that does not decode or
// whose checksum does not match.
var ErrCorrupt = errors.New("broker position is damaged")

// Encode returns the token's stored text and its checksum.
func (t Token) Encode() (text, checksum string, err error) {
	t.UpdatedAt = chain.NormalizeTime(t.UpdatedAt)
	b, err := json.Marshal(t)
	if err != nil {
		return "", "", fmt.Errorf("encode position token: %w", err)
	}
	return string(b), Checksum(string(b)), nil
}

// Checksum is the hex SHA-256 of a token's text.
func Checksum(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

var engineMarker = regexp.MustCompile(`"_engine"\s*:\s*"([^"]*)"`)

// EngineOf reads a token's _engine marker even from text that does not
// decode as a whole; "" when there is none.
func EngineOf(text string) string {
	m := engineMarker.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	return m[1]
}

// Decode checks and decodes a stored token. A row without a broker marker is
// ErrForeign; a broker row that does not decode, fails its checksum or is of
// the classic format is ErrCorrupt (wrapped with what is wrong).
func Decode(text, checksum string) (Token, error) {
	engine := EngineOf(text)
	if engine != EngineBroker && engine != EngineBrokerClassic {
		if engine == "" {
			return Token{}, fmt.Errorf("%w: its token carries no _engine marker", ErrForeign)
		}
		return Token{}, fmt.Errorf("%w: its token's _engine is %q", ErrForeign, engine)
	}
	if engine == EngineBrokerClassic {
		return Token{}, fmt.Errorf("%w: the token is of the classic broker format", ErrCorrupt)
	}
	if Checksum(text) != checksum {
		return Token{}, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	var t Token
	if err := json.Unmarshal([]byte(text), &t); err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if t.ChainID == "" || t.LastApplied == "" {
		return Token{}, fmt.Errorf("%w: it names no chain or link", ErrCorrupt)
	}
	if t.InProgress != nil && (t.InProgress.Incremental == "" || t.InProgress.AppliedThrough < 0) {
		return Token{}, fmt.Errorf("%w: its in-progress position is malformed", ErrCorrupt)
	}
	return t, nil
}

// ChunksDigest identifies an incremental's records (chain's
// RecordsDigest): the SHA-256 of its stored chunks' digests in order, kept
// across a plain compaction that moves the records into merged chunks, and
// another for records a smart compaction rewrote.
func ChunksDigest(m *chain.Manifest) string { return m.RecordsDigest() }
