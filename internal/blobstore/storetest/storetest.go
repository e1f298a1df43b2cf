// Package storetest is the conformance suite every backup store passes,
// and what the stores' tests share: each store package runs Run against
// its own server or emulator.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// Run checks the behaviour every Store must share. newStore returns an
// empty store that no other test uses.
func Run(t *testing.T, newStore func(t *testing.T) blobstore.Store) {
	ctx := context.Background()

	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore(t)
		for _, size := range []int{0, 1, 13, 64 << 10, 20 << 20} {
			key := fmt.Sprintf("round/%d.bin", size)
			want := randomBytes(size, uint64(size))
			if err := s.Put(ctx, key, want); err != nil {
				t.Fatalf("Put %d bytes: %v", size, err)
			}
			got := MustRead(t, s, key)
			if !bytes.Equal(got, want) {
				t.Fatalf("Get %d bytes: got %d bytes, content differs: %v", size, len(got), len(got) == len(want))
			}
		}
		infos, err := s.List(ctx, "round/")
		if err != nil {
			t.Fatal(err)
		}
		sizes := map[string]int64{}
		for _, info := range infos {
			sizes[info.Key] = info.Size
			if info.Modified.IsZero() {
				t.Errorf("List %s: zero modification time", info.Key)
			}
		}
		if sizes["round/0.bin"] != 0 || sizes["round/20971520.bin"] != 20<<20 || len(sizes) != 5 {
			t.Errorf("List sizes = %v", sizes)
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		s := newStore(t)
		MustPut(t, s, "k", []byte("first version, longer"))
		MustPut(t, s, "k", []byte("second"))
		if got := MustRead(t, s, "k"); string(got) != "second" {
			t.Fatalf("after overwrite got %q", got)
		}
	})

	t.Run("PutIfAbsentConflict", func(t *testing.T) {
		s := newStore(t)
		if err := s.PutIfAbsent(ctx, "gen/000001", []byte("mine")); err != nil {
			t.Fatalf("first PutIfAbsent: %v", err)
		}
		err := s.PutIfAbsent(ctx, "gen/000001", []byte("theirs"))
		if !errors.Is(err, blobstore.ErrExists) {
			t.Fatalf("second PutIfAbsent = %v, want ErrExists", err)
		}
		if got := MustRead(t, s, "gen/000001"); string(got) != "mine" {
			t.Fatalf("content after conflict = %q, want first write", got)
		}
		// An object written with Put also blocks PutIfAbsent.
		MustPut(t, s, "plain", []byte("x"))
		if err := s.PutIfAbsent(ctx, "plain", []byte("y")); !errors.Is(err, blobstore.ErrExists) {
			t.Fatalf("PutIfAbsent over Put = %v, want ErrExists", err)
		}
	})

	t.Run("PutIfAbsentRace", func(t *testing.T) {
		s := newStore(t)
		const writers = 8
		for round := 0; round < 3; round++ {
			key := fmt.Sprintf("race/%d", round)
			errs := make([]error, writers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i] = s.PutIfAbsent(ctx, key, fmt.Appendf(nil, "writer %d", i))
				}()
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil:
					if winner >= 0 {
						t.Fatalf("round %d: writers %d and %d both won", round, winner, i)
					}
					winner = i
				case !errors.Is(err, blobstore.ErrExists):
					t.Fatalf("round %d: writer %d: %v, want nil or ErrExists", round, i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("round %d: no writer won", round)
			}
			if got, want := string(MustRead(t, s, key)), fmt.Sprintf("writer %d", winner); got != want {
				t.Fatalf("round %d: stored %q, want the winner's %q", round, got, want)
			}
		}
	})

	t.Run("ReplaceIsAtomic", func(t *testing.T) {
		s := newStore(t)
		a := bytes.Repeat([]byte{'a'}, 1<<20)
		b := bytes.Repeat([]byte{'b'}, 1<<20+7)
		MustPut(t, s, "swap", a)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if err := s.Put(ctx, "swap", [][]byte{a, b}[i%2]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for range 20 {
			got := MustRead(t, s, "swap")
			if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
				t.Fatalf("reader saw a mixed or partial object of %d bytes", len(got))
			}
		}
		wg.Wait()
	})

	t.Run("GetMissing", func(t *testing.T) {
		s := newStore(t)
		MustPut(t, s, "dir/present", []byte("x"))
		for _, key := range []string{"absent", "dir/absent", "dir", "nodir/absent", "dir/present/below"} {
			rc, err := s.Get(ctx, key)
			if err == nil {
				rc.Close()
			}
			if !errors.Is(err, blobstore.ErrNotFound) {
				t.Errorf("Get %q = %v, want ErrNotFound", key, err)
			}
		}
	})

	t.Run("List", func(t *testing.T) {
		s := newStore(t)
		if got := Keys(t, s, ""); len(got) != 0 {
			t.Fatalf("List on empty store = %v", got)
		}
		for _, k := range []string{"b/x", "a/2", "ab", "a/b/3", "a/1", "a/b/c/4"} {
			MustPut(t, s, k, []byte(k))
		}
		cases := map[string][]string{
			"":      {"a/1", "a/2", "a/b/3", "a/b/c/4", "ab", "b/x"},
			"a/":    {"a/1", "a/2", "a/b/3", "a/b/c/4"},
			"a":     {"a/1", "a/2", "a/b/3", "a/b/c/4", "ab"},
			"a/b/":  {"a/b/3", "a/b/c/4"},
			"a/b/c": {"a/b/c/4"},
			"b/x":   {"b/x"},
			"zz":    nil,
			"zz/":   nil,
		}
		for prefix, want := range cases {
			if got := Keys(t, s, prefix); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("List(%q) = %v, want %v", prefix, got, want)
			}
		}
	})

	t.Run("DeleteIdempotent", func(t *testing.T) {
		s := newStore(t)
		MustPut(t, s, "d/x", []byte("x"))
		MustPut(t, s, "d/y", []byte("y"))
		for range 2 {
			if err := s.Delete(ctx, "d/x"); err != nil {
				t.Fatalf("Delete: %v", err)
			}
		}
		if err := s.Delete(ctx, "never/written"); err != nil {
			t.Fatalf("Delete missing: %v", err)
		}
		if _, err := s.Get(ctx, "d/x"); !errors.Is(err, blobstore.ErrNotFound) {
			t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
		}
		if got := Keys(t, s, ""); fmt.Sprint(got) != "[d/y]" {
			t.Fatalf("List after Delete = %v", got)
		}
		// A deleted key can be created again, also create-only.
		if err := s.PutIfAbsent(ctx, "d/x", []byte("again")); err != nil {
			t.Fatalf("PutIfAbsent after Delete: %v", err)
		}
	})

	t.Run("InvalidKeys", func(t *testing.T) {
		s := newStore(t)
		for _, key := range []string{"", "/abs", "../up", "a/../b", "a//b", "a/./b", "trailing/", "a/.sluice-tmp-1"} {
			if err := s.Put(ctx, key, []byte("x")); err == nil {
				t.Errorf("Put %q succeeded", key)
			}
			if err := s.PutIfAbsent(ctx, key, []byte("x")); err == nil {
				t.Errorf("PutIfAbsent %q succeeded", key)
			}
			if _, err := s.Get(ctx, key); err == nil || errors.Is(err, blobstore.ErrNotFound) {
				t.Errorf("Get %q = %v, want a key error", key, err)
			}
			if err := s.Delete(ctx, key); err == nil {
				t.Errorf("Delete %q succeeded", key)
			}
		}
		if _, err := s.List(ctx, "../"); err == nil {
			t.Errorf("List(\"../\") succeeded")
		}
	})
}

// MustPut writes data at key, failing t if the store refuses.
func MustPut(t *testing.T, s blobstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, data); err != nil {
		t.Fatalf("Put %s: %v", key, err)
	}
}

// MustRead reads the whole object at key, failing t if it cannot.
func MustRead(t *testing.T, s blobstore.Store, key string) []byte {
	t.Helper()
	data, err := blobstore.ReadAll(context.Background(), s, key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return data
}

// Keys lists the keys under prefix, failing t if the store cannot.
func Keys(t *testing.T, s blobstore.Store, prefix string) []string {
	t.Helper()
	infos, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	var out []string
	for _, info := range infos {
		out = append(out, info.Key)
	}
	return out
}

// RunID tells this test process's objects from other runs' in a shared
// bucket or account.
var RunID = time.Now().UTC().Format("20060102T150405.000000000")

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Prefix returns a key prefix no other test, of this run or another, uses:
// run-<RunID>/<t's name, made safe for a key>.
func Prefix(t *testing.T) string {
	return "run-" + RunID + "/" + strings.Trim(unsafeName.ReplaceAllString(t.Name(), "-"), "-")
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5111ce))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
