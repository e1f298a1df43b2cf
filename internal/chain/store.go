package chain

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/errcode"
)

// Key layout under a chain's root (see docs/chain-format.md).
const (
	// CatalogPrefix holds the catalog generations and the HEAD hint.
	CatalogPrefix = "catalog/"
	// CatalogHeadKey held the latest generation number as a hint in chains
	// of catalog format 1 and 2; it is read, never written, by this version.
	CatalogHeadKey = "catalog/HEAD"
	// ManifestPrefix holds one object per manifest, named by its ID.
	ManifestPrefix = "manifests/"
	// DataPrefix holds chunks, one folder per writing attempt.
	DataPrefix = "data/"
	// ControlPrefix holds stop markers.
	ControlPrefix = "control/"
)

const (
	generationPrefix = CatalogPrefix + "gen-"
	generationSuffix = ".json"
)

// CatalogKey returns the key of catalog generation gen.
func CatalogKey(gen int64) string {
	return fmt.Sprintf("%s%020d%s", generationPrefix, gen, generationSuffix)
}

// ManifestKey returns the key of the manifest with the given ID.
func ManifestKey(id string) string { return ManifestPrefix + id + ".json" }

// DataKey returns the key of a chunk named name written by attempt. Attempt
// IDs are chosen by the writer and must be unique per attempt.
func DataKey(attempt, name string) string { return DataPrefix + attempt + "/" + name }

// Chain reads and writes one chain in a backup store. It holds no state of
// its own beyond the store, so it is safe for concurrent use.
type Chain struct {
	store  blobstore.Store
	policy *CheckpointPolicy
	// trust, when set, seals, opens, signs and verifies (trust.go).
	trust *Keyring
}

// Open returns the chain rooted at the store's root. It does no I/O.
func Open(s blobstore.Store) *Chain { return &Chain{store: s} }

// Store returns the backup store the chain lives in.
func (c *Chain) Store() blobstore.Store { return c.store }

// unreachable wraps a store failure other than a missing object.
func (c *Chain) unreachable(err error, op, key string) error {
	return errcode.Wrap(errcode.StoreUnreachable, err, "%s %s in %s", op, key, c.store)
}

// putOnce writes data at key create-only. An object already there is a
// retry of the same write when same says so of its bytes; otherwise it is a
// coded errcode.ManifestInvalid error naming what (the object, for the
// message).
func (c *Chain) putOnce(ctx context.Context, key string, data []byte, what string, same func(existing []byte) bool) error {
	err := c.store.PutIfAbsent(ctx, key, data)
	if err == nil {
		return nil
	}
	if !errors.Is(err, blobstore.ErrExists) {
		return c.unreachable(err, "write", key)
	}
	existing, err := blobstore.ReadAll(ctx, c.store, key)
	if err != nil {
		return c.unreachable(err, "read", key)
	}
	if !same(existing) {
		return errcode.New(errcode.ManifestInvalid, "%s already exists in %s with different content", what, c.store)
	}
	return nil
}

// sameBytes is putOnce's test for objects whose retries write identical
// bytes.
func sameBytes(data []byte) func([]byte) bool {
	return func(existing []byte) bool { return bytes.Equal(existing, data) }
}

// PutManifest seals m and writes it to its key, create-only. When the key
// already holds identical bytes (a retried write) that is success; different
// bytes are a coded errcode.ManifestInvalid error. m must pass
// ValidateManifest.
func (c *Chain) PutManifest(ctx context.Context, m *Manifest) error {
	if err := m.Seal(); err != nil {
		return err
	}
	if err := ValidateManifest(m); err != nil {
		return fmt.Errorf("put manifest: %w", err)
	}
	data, err := encodeManifest(m)
	if err != nil {
		return err
	}
	if c.Sealing() {
		return c.putSealedManifest(ctx, m, bytes.TrimSuffix(data, []byte("\n")))
	}
	return c.putOnce(ctx, ManifestKey(m.ID), data, "manifest "+m.ID, sameBytes(data))
}

// GetManifest reads the manifest with the given ID and checks that its
// content hashes to it. A missing, unparseable or altered manifest is a
// coded errcode.ManifestInvalid error naming the ID; an unknown format
// version is errcode.FormatUnsupported.
func (c *Chain) GetManifest(ctx context.Context, id string) (*Manifest, error) {
	data, err := c.readManifestBytes(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.decodeStoredManifest(ctx, id, data)
}

// readManifestBytes reads the stored bytes of manifest id.
func (c *Chain) readManifestBytes(ctx context.Context, id string) ([]byte, error) {
	if !ValidID(id) {
		return nil, errcode.New(errcode.ManifestInvalid, "manifest ID %q is not 40 lowercase hex characters", id)
	}
	key := ManifestKey(id)
	data, err := blobstore.ReadAll(ctx, c.store, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "manifest %s is missing from %s", id, c.store)
	}
	if err != nil {
		return nil, c.unreachable(err, "read", key)
	}
	return data, nil
}

// WriteChunk stores an encoded chunk at its place's key (replacing any
// earlier attempt's object there), sealed for that place when the handle
// seals, and returns the reference a manifest records for it. rows and raw
// are the chunk's row count and uncompressed body size.
func (c *Chain) WriteChunk(ctx context.Context, at ChunkPlace, data []byte, rows, raw int64) (ChunkRef, error) {
	key := at.Key
	data, err := c.sealChunk(ctx, at, data)
	if err != nil {
		return ChunkRef{}, err
	}
	sum := sha256.Sum256(data)
	if err := c.store.Put(ctx, key, data); err != nil {
		return ChunkRef{}, c.unreachable(err, "write", key)
	}
	return ChunkRef{Key: key, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), Rows: rows, RawSize: raw}, nil
}

// ReadChunk reads the chunk ref names, checks its size and SHA-256 against
// the reference, decodes it and checks the header's counts against the
// reference. Damage (including a missing object) is a coded
// errcode.ChunkCorrupt error naming the key; a store failure is
// errcode.StoreUnreachable.
func (c *Chain) ReadChunk(ctx context.Context, ref ChunkRef) (ChunkHeader, []byte, error) {
	data, err := c.readChunkBytes(ctx, ref)
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != ref.SHA256 {
		return ChunkHeader{}, nil, errcode.New(errcode.ChunkCorrupt,
			"chunk %s: stored bytes have SHA-256 %s, the manifest records %s", ref.Key, got, ref.SHA256)
	}
	if data, err = c.openChunk(ctx, ref, data); err != nil {
		return ChunkHeader{}, nil, err
	}
	h, body, err := DecodeChunk(data)
	if err != nil {
		return ChunkHeader{}, nil, chunkErr(err, ref.Key)
	}
	rows := ref.Rows
	if ref.Span != nil {
		rows = ref.Span.Total
	}
	if h.Rows != rows || h.RawSize != ref.RawSize {
		return ChunkHeader{}, nil, errcode.New(errcode.ChunkCorrupt,
			"chunk %s: holds %d rows in %d bytes, the manifest records %d rows in %d bytes",
			ref.Key, h.Rows, h.RawSize, rows, ref.RawSize)
	}
	return h, body, nil
}

// chunkPresize is the most readChunkBytes allocates for a chunk before its
// bytes arrive: twice the raw size at which producers and compaction cut a
// chunk (DefaultChunkBytes, 16 MiB), so a stored chunk of the default size,
// compressed or not, is read into one buffer of its size.
const chunkPresize = 32 << 20

// readChunkBytes reads at most ref.Size+1 bytes of the chunk, so a wrong
// object cannot exhaust memory, and checks the length.
func (c *Chain) readChunkBytes(ctx context.Context, ref ChunkRef) ([]byte, error) {
	if ref.Size < 0 || ref.Size > 2*MaxChunkRawSize {
		return nil, errcode.New(errcode.ChunkCorrupt, "chunk %s: recorded size %d out of range", ref.Key, ref.Size)
	}
	rc, err := c.store.Get(ctx, ref.Key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, errcode.Wrap(errcode.ChunkCorrupt, err, "chunk %s is missing from %s", ref.Key, c.store)
	}
	if err != nil {
		return nil, c.unreachable(err, "read", ref.Key)
	}
	defer rc.Close()
	// The recorded size is the store's word, read from a manifest or a
	// layout: it sizes the buffer up front only up to chunkPresize, and a
	// larger chunk grows it as its bytes arrive, so a damaged or hostile
	// reference to a small object costs no more than that.
	buf := bytes.NewBuffer(make([]byte, 0, min(ref.Size, chunkPresize)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(rc, ref.Size+1)); err != nil {
		return nil, c.unreachable(err, "read", ref.Key)
	}
	switch n := int64(buf.Len()); {
	case n < ref.Size:
		return nil, errcode.New(errcode.ChunkCorrupt, "chunk %s: stored object is %d bytes, the manifest records %d", ref.Key, n, ref.Size)
	case n > ref.Size:
		return nil, errcode.New(errcode.ChunkCorrupt, "chunk %s: stored object is longer than the %d bytes the manifest records", ref.Key, ref.Size)
	}
	return buf.Bytes(), nil
}

// chunkErr puts the chunk's key into a decoding error's message.
func chunkErr(err error, key string) error {
	if e, ok := errcode.As(err); ok {
		return &errcode.Error{Code: e.Code, Message: "chunk " + key + ": " + e.Message, Hint: e.Hint, Err: e.Err}
	}
	return errcode.Wrap(errcode.ChunkCorrupt, err, "chunk %s", key)
}
