// Package blobstore is the backup store: a flat key space of immutable objects
// addressed by slash-separated keys under a root URL. It holds the Store
// interface, the registry of stores by URL scheme (Register, Open), the
// file:// store and what the remote stores share (key rules, checked
// bodies, the retry policy); it links no cloud SDK. The remote stores live
// in packages of their own (s3, gcs, azblob below this one) that register
// their schemes when linked, which internal/engines does for the binaries.
package blobstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned (wrapped) when a key does not exist.
var ErrNotFound = errors.New("object not found")

// ErrExists is returned (wrapped) by PutIfAbsent when the key already exists.
var ErrExists = errors.New("object already exists")

// ErrUnreachable is returned (wrapped) when the store could not be reached or
// kept failing on its side (network errors, timeouts, throttling, 5xx answers)
// after the store's own retries were exhausted. Callers may retry later.
var ErrUnreachable = errors.New("store unreachable")

// ErrShortRead is returned (wrapped) by a reader from Get when the object ends
// before the length the store announced for it.
var ErrShortRead = errors.New("object shorter than announced")

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	// Key is the object's key relative to the store root.
	Key string
	// Size is the object's length in bytes.
	Size int64
	// Modified is when the store last wrote the object.
	Modified time.Time
}

// Store is a backup store rooted at one URL. Keys are relative to that root and
// use '/' as separator. Implementations are safe for concurrent use.
type Store interface {
	// Put writes the object whole, replacing any previous one. A reader never
	// observes a partially written object.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent writes the object only if no object exists at key; otherwise
	// it returns an error wrapping ErrExists and changes nothing.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Get opens the object for streaming. The reader fails with ErrShortRead
	// rather than io.EOF if the object ends early.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// List returns every object whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// String returns the store's root URL with any credentials removed.
	String() string
}

// ReadAll reads a whole object into memory.
func ReadAll(ctx context.Context, s Store, key string) ([]byte, error) {
	rc, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
