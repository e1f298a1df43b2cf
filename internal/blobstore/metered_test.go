package blobstore

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

type recordingMeter struct {
	mu      sync.Mutex
	wrote   map[string]int64
	fetched map[string]int64
	fetches int
}

func (m *recordingMeter) Wrote(key string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wrote[key] += n
}

func (m *recordingMeter) Fetched(key string, n int64, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d < 0 {
		panic("negative fetch time")
	}
	m.fetched[key] += n
	m.fetches++
}

func TestMeteredStoreCountsWhatMoves(t *testing.T) {
	ctx := context.Background()
	base, err := Open(ctx, "file://"+t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := &recordingMeter{wrote: map[string]int64{}, fetched: map[string]int64{}}
	s := Metered(base, m)
	if err := s.Put(ctx, "a/one", make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "a/two", make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "a/two", make([]byte, 99)); !errors.Is(err, ErrExists) {
		t.Fatalf("want ErrExists through the meter, got %v", err)
	}
	rc, err := s.Get(ctx, "a/one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatal(err)
	}
	_ = rc.Close()
	_ = rc.Close() // a second close is not a second fetch
	if _, err := s.Get(ctx, "a/missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("want ErrNotFound through the meter, got %v", err)
	}
	if m.wrote["a/one"] != 1000 || m.wrote["a/two"] != 10 {
		t.Fatalf("writes counted wrong (a refused write counts nothing): %v", m.wrote)
	}
	if m.fetched["a/one"] != 1000 || m.fetches != 1 {
		t.Fatalf("reads counted wrong: %v in %d fetches", m.fetched, m.fetches)
	}
	if Metered(base, nil) != base {
		t.Fatal("a nil meter leaves the store as it is")
	}
}
