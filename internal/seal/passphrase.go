package seal

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	"golang.org/x/crypto/argon2"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Argon2Params are the stretching parameters and salt of a passphrase
// wrapping, recorded beside it so a reader derives the same wrapping key.
type Argon2Params struct {
	// Time is the number of passes.
	Time uint32 `json:"time"`
	// MemoryKiB is the memory cost in KiB.
	MemoryKiB uint32 `json:"memory_kib"`
	// Threads is the degree of parallelism.
	Threads uint8 `json:"threads"`
	// Salt is 16 random bytes (base64 in JSON).
	Salt []byte `json:"salt"`
}

// DefaultArgon2 is what new passphrase wrappings use: RFC 9106's second
// recommended setting (3 passes, 64 MiB, 4 lanes).
var DefaultArgon2 = Argon2Params{Time: 3, MemoryKiB: 64 * 1024, Threads: 4}

// Bounds a reader accepts, so a hostile envelope cannot make it spend
// unbounded memory or time.
const (
	maxArgon2Memory = 4 << 20 // KiB: 4 GiB
	maxArgon2Time   = 64
)

// Passphrase wraps data keys under a passphrase stretched with Argon2id.
// One Passphrase draws one salt for everything it wraps and caches each
// stretched key, so a process stretches once per salt.
type Passphrase struct {
	pass   []byte
	source string
	params Argon2Params

	mu   sync.Mutex
	keks map[string]*DataKey
}

// NewPassphrase returns a wrapper for pass; source says where it came from
// ("environment variable X") for messages, never the passphrase.
func NewPassphrase(pass []byte, source string) (*Passphrase, error) {
	if len(pass) == 0 {
		return nil, errcode.New(errcode.KeyRequired, "the passphrase in %s is empty", source)
	}
	p := &Passphrase{pass: append([]byte(nil), pass...), source: source, params: DefaultArgon2, keks: map[string]*DataKey{}}
	p.params.Salt = make([]byte, 16)
	if _, err := rand.Read(p.params.Salt); err != nil {
		return nil, fmt.Errorf("draw a salt: %w", err)
	}
	return p, nil
}

// Kind is KindPassphrase.
func (p *Passphrase) Kind() string { return KindPassphrase }

// String names where the passphrase came from.
func (p *Passphrase) String() string { return "the passphrase from " + p.source }

// kek returns the wrapping key for params, stretching the passphrase on
// first use.
func (p *Passphrase) kek(params Argon2Params) (*DataKey, error) {
	if params.Time == 0 || params.Time > maxArgon2Time || params.MemoryKiB < 8*uint32(params.Threads) ||
		params.MemoryKiB > maxArgon2Memory || params.Threads == 0 || len(params.Salt) < 8 {
		return nil, errcode.New(errcode.ManifestInvalid, "passphrase wrapping has Argon2id parameters out of range (time %d, memory %d KiB, threads %d, salt %d bytes)",
			params.Time, params.MemoryKiB, params.Threads, len(params.Salt))
	}
	cacheKey := fmt.Sprintf("%d/%d/%d/%x", params.Time, params.MemoryKiB, params.Threads, params.Salt)
	p.mu.Lock()
	defer p.mu.Unlock()
	if k, ok := p.keks[cacheKey]; ok {
		return k, nil
	}
	raw := argon2.IDKey(p.pass, params.Salt, params.Time, params.MemoryKiB, params.Threads, DataKeySize)
	k, err := dataKeyFrom("passphrase", raw)
	if err != nil {
		return nil, err
	}
	p.keks[cacheKey] = k
	return k, nil
}

// Wrap seals dataKey under the stretched passphrase, bound to keyID.
func (p *Passphrase) Wrap(_ context.Context, keyID string, dataKey []byte) (Wrapping, error) {
	kek, err := p.kek(p.params)
	if err != nil {
		return Wrapping{}, err
	}
	wrapped, err := kek.Seal(nil, dataKey, AAD("sluice key wrap", keyID))
	if err != nil {
		return Wrapping{}, err
	}
	params := p.params
	params.Salt = append([]byte(nil), p.params.Salt...)
	return Wrapping{Kind: KindPassphrase, Argon2id: &params, Wrapped: wrapped}, nil
}

// Unwrap opens a passphrase wrapping; a wrong passphrase is
// errcode.KeyWrong.
func (p *Passphrase) Unwrap(_ context.Context, keyID string, w Wrapping) ([]byte, error) {
	if w.Argon2id == nil {
		return nil, errcode.New(errcode.ManifestInvalid, "passphrase wrapping of data key %s records no Argon2id parameters", keyID)
	}
	kek, err := p.kek(*w.Argon2id)
	if err != nil {
		return nil, err
	}
	raw, err := kek.Open(nil, w.Wrapped, AAD("sluice key wrap", keyID))
	if err != nil {
		return nil, errcode.New(errcode.KeyWrong, "%s does not open data key %s (a wrong passphrase, or the envelope was changed)", p, keyID)
	}
	return raw, nil
}
