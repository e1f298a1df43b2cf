package blobstore

import (
	"context"
	"io"
	"sync"
	"time"
)

// Meter receives what a metered store moves. Implementations must be safe
// for concurrent use.
type Meter interface {
	// Wrote is called after an object of n bytes was written at key.
	Wrote(key string, n int64)
	// Fetched is called once per object read through Get, when its reader is
	// closed: n bytes read in d, from the Get call to the close (an object
	// read to its end is one fetch).
	Fetched(key string, n int64, d time.Duration)
}

// Metered returns s reporting its writes and reads to m. A nil m returns s.
func Metered(s Store, m Meter) Store {
	if m == nil || s == nil {
		return s
	}
	return &meteredStore{Store: s, m: m}
}

type meteredStore struct {
	Store
	m Meter
}

func (s *meteredStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.Store.Put(ctx, key, data); err != nil {
		return err
	}
	s.m.Wrote(key, int64(len(data)))
	return nil
}

func (s *meteredStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := s.Store.PutIfAbsent(ctx, key, data); err != nil {
		return err
	}
	s.m.Wrote(key, int64(len(data)))
	return nil
}

func (s *meteredStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := s.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return &meteredReader{ReadCloser: rc, key: key, start: start, m: s.m}, nil
}

type meteredReader struct {
	io.ReadCloser
	key   string
	start time.Time
	m     Meter
	n     int64
	once  sync.Once
}

func (r *meteredReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n += int64(n)
	return n, err
}

func (r *meteredReader) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(func() { r.m.Fetched(r.key, r.n, time.Since(r.start)) })
	return err
}
