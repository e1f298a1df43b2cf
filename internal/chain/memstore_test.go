package chain

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// memStore is a test-only in-memory blobstore.Store. failGet, when set,
// makes Get of matching keys fail as an unreachable store would.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	failGet func(key string) error
}

func newMemStore() *memStore { return &memStore{objects: map[string][]byte{}} }

func (s *memStore) Put(ctx context.Context, key string, data []byte) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = bytes.Clone(data)
	return nil
}

func (s *memStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[key]; ok {
		return fmt.Errorf("put %s: %w", key, blobstore.ErrExists)
	}
	s.objects[key] = bytes.Clone(data)
	return nil
}

func (s *memStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failGet != nil {
		if err := s.failGet(key); err != nil {
			return nil, err
		}
	}
	b, ok := s.objects[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, blobstore.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(bytes.Clone(b))), nil
}

func (s *memStore) List(ctx context.Context, prefix string) ([]blobstore.ObjectInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []blobstore.ObjectInfo
	for k, v := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, blobstore.ObjectInfo{Key: k, Size: int64(len(v)), Modified: time.Now()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *memStore) Delete(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
	return nil
}

func (s *memStore) String() string { return "mem://test" }

// raw returns the stored bytes of key for tampering in tests.
func (s *memStore) raw(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[key]
}

func (s *memStore) set(key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = data
}
