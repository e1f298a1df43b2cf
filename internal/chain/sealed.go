package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

// SealedManifestFormatVersion is the manifest format version of a sealed
// manifest: the canonical manifest sealed whole, with in the clear only
// what a reader without the key needs to delete the link (§11).
const SealedManifestFormatVersion = 3

// sealedManifest is the stored form of a sealed manifest.
type sealedManifest struct {
	FormatVersion int    `json:"format_version"`
	ID            string `json:"id"`
	// KeyID names the data key the manifest is sealed with.
	KeyID string `json:"key_id"`
	// ChunkKeyID names the data key its chunks are sealed with, when that
	// is another (a write-only writer's); omitted when it is KeyID.
	ChunkKeyID string `json:"chunk_key_id,omitempty"`
	// Chunks are the keys and sizes of every chunk the manifest names, so
	// retention deletes them without the key.
	Chunks []SealedChunk `json:"chunks"`
	// Sealed is the canonical manifest (its ID's preimage with the ID
	// filled in), sealed under KeyID (base64 in JSON).
	Sealed []byte `json:"sealed"`
}

// SealedChunk is a chunk a sealed manifest names, as a reader without the
// key sees it.
type SealedChunk struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

// chunkSeal is how a chunk reference read from a sealed manifest or layout
// opens: its data key (unwrapped when the chunk is first read) and the
// associated data binding it to its place.
type chunkSeal struct {
	keyID string
	aad   []byte
}

// ChunkPlace is where a chunk belongs: its key, and for a full's chunk its
// table and index in the table's list, for a change chunk its index in the
// link's (or layout's) list. A sealed chunk opens only at its place.
type ChunkPlace struct {
	Key     string
	Table   string
	Ordinal int
}

func (p ChunkPlace) aad() []byte {
	return seal.AAD("sluice chunk", p.Key, p.Table, strconv.Itoa(p.Ordinal))
}

func manifestAAD(id string) []byte { return seal.AAD("sluice manifest", id) }

// putSealedManifest seals the canonical manifest data under the handle's
// data key and writes it create-only. A sealed manifest already there that
// opens to the same canonical manifest is a successful retry.
func (c *Chain) putSealedManifest(ctx context.Context, m *Manifest, canonical []byte) error {
	dk, err := c.manifestKey(ctx)
	if err != nil {
		return err
	}
	chunkKey, err := c.writeKey(ctx)
	if err != nil {
		return err
	}
	sealed, err := dk.Seal(nil, canonical, manifestAAD(m.ID))
	if err != nil {
		return err
	}
	sm := sealedManifest{FormatVersion: SealedManifestFormatVersion, ID: m.ID, KeyID: dk.ID, Sealed: sealed, Chunks: []SealedChunk{}}
	if chunkKey.ID != dk.ID {
		sm.ChunkKeyID = chunkKey.ID
	}
	for _, ref := range m.AllChunks() {
		sm.Chunks = append(sm.Chunks, SealedChunk{Key: ref.Key, Size: ref.Size})
	}
	data, err := json.Marshal(&sm)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	// A retry seals again with another nonce: it is the same write when
	// the stored manifest opens to the same canonical manifest.
	return c.putOnce(ctx, ManifestKey(m.ID), data, "manifest "+m.ID, func(existing []byte) bool {
		_, plain, err := c.openSealedManifest(ctx, m.ID, existing)
		return err == nil && bytes.Equal(plain, canonical)
	})
}

// isSealedManifest reports whether stored manifest bytes are of the sealed
// form.
func isSealedManifest(data []byte) bool {
	var v struct {
		FormatVersion int `json:"format_version"`
	}
	return json.Unmarshal(data, &v) == nil && v.FormatVersion == SealedManifestFormatVersion
}

func decodeSealedManifest(id string, data []byte) (*sealedManifest, error) {
	var sm sealedManifest
	if err := strictUnmarshal(data, &sm); err != nil {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "sealed manifest %s does not parse", id)
	}
	if sm.ID != id {
		return nil, errcode.New(errcode.ManifestInvalid, "manifest stored as %s carries ID %s", id, sm.ID)
	}
	return &sm, nil
}

// openSealedManifest opens a sealed manifest's stored bytes: the data key
// and the canonical manifest.
func (c *Chain) openSealedManifest(ctx context.Context, id string, data []byte) (*seal.DataKey, []byte, error) {
	sm, err := decodeSealedManifest(id, data)
	if err != nil {
		return nil, nil, err
	}
	dk, err := c.dataKey(ctx, sm.KeyID, "manifest "+id)
	if err != nil {
		return nil, nil, err
	}
	plain, err := dk.Open(nil, sm.Sealed, manifestAAD(id))
	if err != nil {
		return nil, nil, annotate(err, "manifest "+id)
	}
	return dk, bytes.TrimSuffix(plain, []byte("\n")), nil
}

// decodeStoredManifest turns stored manifest bytes into a manifest: a
// plaintext one as ever (refused when the handle reads with a key), a
// sealed one opened, checked against its clear chunk list, and its chunk
// references bound to their places.
func (c *Chain) decodeStoredManifest(ctx context.Context, id string, data []byte) (*Manifest, error) {
	if !isSealedManifest(data) {
		if c.trust != nil && c.trust.t.Wrapper != nil {
			return nil, errcode.New(errcode.ChainNotSealed, "manifest %s is not sealed, and the chain is read with %s", id, c.trust.t.Wrapper)
		}
		return decodeManifest(id, data)
	}
	_, plain, err := c.openSealedManifest(ctx, id, data)
	if err != nil {
		return nil, err
	}
	m, err := decodeManifest(id, plain)
	if err != nil {
		return nil, err
	}
	sm, _ := decodeSealedManifest(id, data)
	chunkKey := sm.KeyID
	if sm.ChunkKeyID != "" {
		chunkKey = sm.ChunkKeyID
	}
	refs := m.AllChunks()
	if len(refs) != len(sm.Chunks) {
		return nil, errcode.New(errcode.ChunkSealBroken, "manifest %s lists %d chunks in the clear and %d sealed", id, len(sm.Chunks), len(refs))
	}
	for i, ref := range refs {
		if sm.Chunks[i] != (SealedChunk{Key: ref.Key, Size: ref.Size}) {
			return nil, errcode.New(errcode.ChunkSealBroken, "manifest %s: chunk %d is %s in the clear and %s sealed", id, i, sm.Chunks[i].Key, ref.Key)
		}
	}
	for t := range m.Tables {
		td := &m.Tables[t]
		for j := range td.Chunks {
			td.Chunks[j].seal = &chunkSeal{keyID: chunkKey, aad: ChunkPlace{Key: td.Chunks[j].Key, Table: td.Table, Ordinal: j}.aad()}
		}
	}
	for j := range m.Chunks {
		m.Chunks[j].seal = &chunkSeal{keyID: chunkKey, aad: ChunkPlace{Key: m.Chunks[j].Key, Ordinal: j}.aad()}
	}
	m.keyID = sm.KeyID
	return m, nil
}

// ManifestChunks returns the keys and sizes of the chunks manifest id
// names, read without a key for a sealed manifest: what retention deletes.
func (c *Chain) ManifestChunks(ctx context.Context, id string) ([]SealedChunk, error) {
	data, err := c.readManifestBytes(ctx, id)
	if err != nil {
		return nil, err
	}
	if isSealedManifest(data) {
		sm, err := decodeSealedManifest(id, data)
		if err != nil {
			return nil, err
		}
		return sm.Chunks, nil
	}
	m, err := decodeManifest(id, data)
	if err != nil {
		return nil, err
	}
	var out []SealedChunk
	for _, ref := range m.AllChunks() {
		out = append(out, SealedChunk{Key: ref.Key, Size: ref.Size})
	}
	return out, nil
}

// sealChunk seals an encoded chunk for its place when the handle seals.
func (c *Chain) sealChunk(ctx context.Context, at ChunkPlace, data []byte) ([]byte, error) {
	dk, err := c.writeKey(ctx)
	if err != nil || dk == nil {
		return data, err
	}
	return dk.Seal(nil, data, at.aad())
}

// openChunk authenticates and decrypts a stored chunk when its reference
// came from a sealed manifest or layout. A sealed chunk under a reference
// that is not is refused: its reader has no key for it.
func (c *Chain) openChunk(ctx context.Context, ref ChunkRef, data []byte) ([]byte, error) {
	if ref.seal == nil {
		if seal.IsSealed(data) {
			return nil, errcode.New(errcode.KeyRequired, "chunk %s is encrypted and no key was given to read it", ref.Key)
		}
		return data, nil
	}
	dk, err := c.dataKey(ctx, ref.seal.keyID, "chunk "+ref.Key)
	if err != nil {
		return nil, err
	}
	// The stored bytes were read for this call alone: open them in place.
	plain, err := dk.OpenInPlace(data, ref.seal.aad)
	if err != nil {
		return nil, annotate(err, "chunk "+ref.Key)
	}
	return plain, nil
}

// annotate prefixes a coded error's message with what it is about.
func annotate(err error, what string) error {
	if e, ok := errcode.As(err); ok {
		return &errcode.Error{Code: e.Code, Message: what + ": " + e.Message, Hint: e.Hint, Err: e.Err}
	}
	return err
}
