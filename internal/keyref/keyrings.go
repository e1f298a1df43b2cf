package keyref

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/seal"
)

// Keyrings is a process's cache of what references resolve to, so one
// worker stretches a passphrase (or asks a KMS) once per data key, and a
// writer draws one data key per process per chain, however many
// activities open the chain. Wrappers are shared by every chain whose
// reference resolves to the same secret; keyrings (which hold the data
// keys) are per store URL and reference.
//
// The secrets are read again on every call (an environment lookup, a small
// file read) and the cache is keyed by a digest of what was read, so a
// passphrase file or signing key replaced on disk is picked up by the next
// activity, not after a restart. The zero value is ready to use.
type Keyrings struct {
	mu       sync.Mutex
	wrappers map[[32]byte]wrappers
	rings    map[[32]byte]*ring
}

// ring is one cached keyring and, for one that seals, the record of the
// data keys it wrapped (its chunks' and, when they differ, its
// manifests').
type ring struct {
	kr   *chain.Keyring
	recs []*recording
}

// For returns the keyring of the chain at storeURL read and written with
// r, resolving r's references here; nil for the zero Ref (plaintext,
// unsigned).
func (k *Keyrings) For(ctx context.Context, storeURL string, r Ref) (*chain.Keyring, error) {
	if r.IsZero() {
		return nil, nil
	}
	rg, _, err := k.ring(ctx, storeURL, r)
	if err != nil {
		return nil, err
	}
	return rg.kr, nil
}

// Open returns ch (the chain at storeURL, opened without a key) with the
// keyring For returns. For a sealing keyring that already drew its data
// key, it first checks that the key's envelope is still in the store: a
// chain deleted and begun again at the same URL while this process ran
// would otherwise get manifests sealed under a key whose envelope it never
// stored. Such a keyring is dropped, and a fresh one draws a new key.
func (k *Keyrings) Open(ctx context.Context, ch *chain.Chain, storeURL string, r Ref) (*chain.Chain, error) {
	if r.IsZero() {
		return ch, nil
	}
	rg, key, err := k.ring(ctx, storeURL, r)
	if err != nil {
		return nil, err
	}
	for _, rec := range rg.recs {
		id := rec.last()
		if id == "" {
			continue
		}
		_, err := ch.ReadEnvelope(ctx, id)
		if err == nil {
			continue
		}
		if !errors.Is(err, blobstore.ErrNotFound) {
			return nil, err
		}
		k.mu.Lock()
		if k.rings[key] == rg {
			delete(k.rings, key)
		}
		k.mu.Unlock()
		if rg, _, err = k.ring(ctx, storeURL, r); err != nil {
			return nil, err
		}
		break
	}
	return ch.WithKeyring(rg.kr), nil
}

// ring returns the cached keyring of storeURL and r, making it (and its
// wrapper) on first use, and its cache key.
func (k *Keyrings) ring(ctx context.Context, storeURL string, r Ref) (*ring, [32]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, [32]byte{}, err
	}
	m, err := r.resolve()
	if err != nil {
		return nil, [32]byte{}, err
	}
	wkey := m.wrapperKey()
	rkey := sha256.Sum256(seal.AAD("keyring", storeURL, string(wkey[:]), m.signSource, digest(m.signPEM),
		m.verifySource, digest(m.verifyPEM), strconv.FormatBool(r.Encrypt), strconv.FormatBool(r.RequireSignature)))
	k.mu.Lock()
	if rg, ok := k.rings[rkey]; ok {
		k.mu.Unlock()
		return rg, rkey, nil
	}
	ws, ok := k.wrappers[wkey]
	k.mu.Unlock()
	if !ok {
		// Built outside the lock: a KMS client may take a while.
		if ws, err = m.wrappers(ctx); err != nil {
			return nil, rkey, err
		}
	}
	t, err := m.trust(r, ws)
	if err != nil {
		return nil, rkey, err
	}
	rg := &ring{}
	if r.Encrypt {
		for _, w := range []*seal.Wrapper{&t.Wrapper, &t.ManifestWrapper} {
			if *w != nil {
				rec := &recording{Wrapper: *w}
				rg.recs = append(rg.recs, rec)
				*w = rec
			}
		}
	}
	rg.kr = chain.NewKeyring(t)

	k.mu.Lock()
	defer k.mu.Unlock()
	if k.wrappers == nil {
		k.wrappers, k.rings = map[[32]byte]wrappers{}, map[[32]byte]*ring{}
	}
	if _, ok := k.wrappers[wkey]; !ok && ws.w != nil {
		k.wrappers[wkey] = ws
	}
	if cached, ok := k.rings[rkey]; ok {
		return cached, rkey, nil
	}
	k.rings[rkey] = rg
	return rg, rkey, nil
}

// wrapperKey names the wrapper m's wrapping reference resolves to: the
// kind, where it came from and a digest of the secret read.
func (m *material) wrapperKey() [32]byte {
	switch {
	case m.passphrase != nil:
		return sha256.Sum256(seal.AAD("passphrase", m.passSource, string(m.passphrase)))
	case m.idSource != "" || m.recSource != "":
		return sha256.Sum256(seal.AAD("age", m.idSource, m.identities, m.recSource, m.recipients))
	case m.kms:
		return sha256.Sum256(seal.AAD("aws kms", m.kmsKey, m.kmsReg, m.kmsEndpoint))
	}
	return [32]byte{}
}

func digest(b []byte) string {
	if b == nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return string(sum[:])
}

// recording is a sealing keyring's wrapper: it remembers the last data key
// it wrapped, which is the key the keyring writes with once its envelope
// is stored (a keyring draws each of its keys once).
type recording struct {
	seal.Wrapper

	mu sync.Mutex
	id string
}

// Wrap wraps with the underlying wrapper and records keyID.
func (w *recording) Wrap(ctx context.Context, keyID string, dataKey []byte) (seal.Wrapping, error) {
	out, err := w.Wrapper.Wrap(ctx, keyID, dataKey)
	if err == nil {
		w.mu.Lock()
		w.id = keyID
		w.mu.Unlock()
	}
	return out, err
}

// last returns the last data key wrapped; "" when none was (or w is nil).
func (w *recording) last() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id
}
