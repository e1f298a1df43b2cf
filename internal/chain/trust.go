package chain

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

// Trust says how a chain handle seals, opens, signs and verifies what it
// writes and reads (docs/chain-format.md §11, docs/security.md). The zero
// Trust reads and writes plaintext, unsigned chains, and refuses a sealed
// one with errcode.KeyRequired.
type Trust struct {
	// Wrapper wraps and unwraps the chain's data keys. A reader with one
	// refuses links that are not sealed (errcode.ChainNotSealed).
	Wrapper seal.Wrapper
	// ManifestWrapper, when set, wraps the data key a writer seals its
	// manifests with, which is then another key than its chunks'. A writer
	// that holds only the target's age recipients sets it to those plus a
	// recipient of its own, whose identity its Wrapper holds: it reads back
	// what it recorded (the schema at the tip, after a restart) and never
	// the rows (docs/security.md).
	ManifestWrapper seal.Wrapper
	// Encrypt makes writers seal what they write, under a data key this
	// handle draws and wraps with Wrapper on its first write.
	Encrypt bool
	// Signer signs every catalog generation (commit and checkpoint) the
	// handle writes.
	Signer *seal.SigningKey
	// Verifier checks the signature of every generation the handle reads
	// that carries one; with RequireSignature, a generation without one is
	// refused (errcode.SignatureMissing).
	Verifier         *seal.VerifyKey
	RequireSignature bool
}

// Keyring holds what a Trust resolves to at run time: the data keys
// unwrapped or drawn so far. One Keyring serves every handle of one chain
// and trust in a process, so a passphrase is stretched and a KMS asked once
// per data key, and a writer draws one data key per process.
type Keyring struct {
	t Trust

	mu    sync.Mutex
	keys  map[string]*seal.DataKey
	write *seal.DataKey
	// writeManifest is the writer's manifest key when ManifestWrapper is
	// set; write otherwise.
	writeManifest *seal.DataKey
}

// NewKeyring returns an empty keyring for t.
func NewKeyring(t Trust) *Keyring {
	return &Keyring{t: t, keys: map[string]*seal.DataKey{}}
}

// StartNewKeys makes the writer draw new data keys at its next sealed
// write: a rotation starts its segment under keys of its own, so no data
// key seals more than one segment of a long-lived producer.
func (k *Keyring) StartNewKeys() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.write, k.writeManifest = nil, nil
}

// Trust returns what the keyring was made for.
func (k *Keyring) Trust() Trust { return k.t }

// WithKeyring returns a handle on the same chain that seals, opens, signs
// and verifies with k (nil: plaintext and unsigned).
func (c *Chain) WithKeyring(k *Keyring) *Chain {
	return &Chain{store: c.store, policy: c.policy, trust: k}
}

// StoredHash returns the SHA-256 of the stored bytes of the catalog's
// generation (its commit), empty for a catalog not read from or committed
// to a store. A reader that records a generation with it can later tell a
// rolled-back or rewritten catalog from the one it verified.
func (cat *Catalog) StoredHash() string {
	if cat == nil || cat.stored == nil {
		return ""
	}
	return cat.stored.hash
}

// Signed reports whether the catalog's generation carries a signature
// (verified, when the handle that read it has a verify key).
func (cat *Catalog) Signed() bool { return cat != nil && cat.stored != nil && cat.stored.signed }

// Keyring returns the handle's keyring; nil for a plaintext, unsigned
// handle.
func (c *Chain) Keyring() *Keyring { return c.trust }

// Sealing reports whether the handle seals what it writes.
func (c *Chain) Sealing() bool { return c.trust != nil && c.trust.t.Encrypt }

// KeysPrefix holds the chain's key envelopes, one per data key.
const KeysPrefix = "keys/"

// KeyEnvelopeKey returns the key of the envelope of data key id.
func KeyEnvelopeKey(id string) string { return KeysPrefix + id + ".json" }

// writeKey returns the data key the handle seals with, drawing it and
// storing its envelope (create-only) on first use; nil when the handle
// does not seal.
func (c *Chain) writeKey(ctx context.Context) (*seal.DataKey, error) {
	if !c.Sealing() {
		return nil, nil
	}
	k := c.trust
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.write != nil {
		return k.write, nil
	}
	dk, err := c.drawKey(ctx, k.t.Wrapper)
	if err != nil {
		return nil, err
	}
	k.write = dk
	return dk, nil
}

// manifestKey returns the data key the handle seals manifests with: its
// chunk key, or one of its own when the trust names a ManifestWrapper.
func (c *Chain) manifestKey(ctx context.Context) (*seal.DataKey, error) {
	if c.trust == nil || c.trust.t.ManifestWrapper == nil {
		return c.writeKey(ctx)
	}
	k := c.trust
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.writeManifest != nil {
		return k.writeManifest, nil
	}
	dk, err := c.drawKey(ctx, k.t.ManifestWrapper)
	if err != nil {
		return nil, err
	}
	k.writeManifest = dk
	return dk, nil
}

// drawKey draws a data key, stores its envelope wrapped by w (create-only)
// and keeps it. The caller holds the keyring's lock.
func (c *Chain) drawKey(ctx context.Context, w seal.Wrapper) (*seal.DataKey, error) {
	if w == nil {
		return nil, errcode.New(errcode.KeyRequired, "--encrypt needs a key to wrap the chain's data keys")
	}
	dk, env, err := seal.NewEnvelope(ctx, w, time.Now())
	if err != nil {
		return nil, err
	}
	data, err := env.Encode()
	if err != nil {
		return nil, err
	}
	key := KeyEnvelopeKey(dk.ID)
	if err := c.store.PutIfAbsent(ctx, key, data); err != nil {
		return nil, c.unreachable(err, "write", key)
	}
	c.trust.keys[dk.ID] = dk
	return dk, nil
}

// dataKey returns data key id, unwrapping its envelope on first use.
func (c *Chain) dataKey(ctx context.Context, id, what string) (*seal.DataKey, error) {
	if c.trust == nil || c.trust.t.Wrapper == nil {
		return nil, errcode.New(errcode.KeyRequired, "%s is encrypted (data key %s) and no key was given to read it", what, id)
	}
	if !seal.ValidKeyID(id) {
		return nil, errcode.New(errcode.ManifestInvalid, "%s names data key %q, which is not 32 lowercase hex characters", what, id)
	}
	k := c.trust
	k.mu.Lock()
	defer k.mu.Unlock()
	if dk, ok := k.keys[id]; ok {
		return dk, nil
	}
	env, err := c.ReadEnvelope(ctx, id)
	if err != nil {
		return nil, err
	}
	dk, err := env.Open(ctx, k.t.Wrapper)
	if err != nil {
		return nil, err
	}
	k.keys[id] = dk
	return dk, nil
}

// ReadEnvelope reads the envelope of data key id.
func (c *Chain) ReadEnvelope(ctx context.Context, id string) (*seal.Envelope, error) {
	key := KeyEnvelopeKey(id)
	data, err := blobstore.ReadAll(ctx, c.store, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "the envelope of data key %s is missing from %s", id, c.store)
	}
	if err != nil {
		return nil, c.unreachable(err, "read", key)
	}
	return seal.DecodeEnvelope(id, data)
}

// ListEnvelopes returns the IDs of the chain's data keys, in key order.
func (c *Chain) ListEnvelopes(ctx context.Context) ([]string, error) {
	infos, err := c.store.List(ctx, KeysPrefix)
	if err != nil {
		return nil, c.unreachable(err, "list", KeysPrefix)
	}
	var ids []string
	for _, o := range infos {
		id, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, KeysPrefix), ".json")
		if ok && seal.ValidKeyID(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// ReplaceEnvelope stores env in place of the envelope of its key (a
// rekey). The data key is unchanged, so readers holding it go on.
func (c *Chain) ReplaceEnvelope(ctx context.Context, env *seal.Envelope) error {
	data, err := env.Encode()
	if err != nil {
		return err
	}
	key := KeyEnvelopeKey(env.KeyID)
	if err := c.store.Put(ctx, key, data); err != nil {
		return c.unreachable(err, "write", key)
	}
	return nil
}
