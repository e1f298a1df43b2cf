package blobstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/blobstore/storetest"
)

func TestFileConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) blobstore.Store {
		s, err := blobstore.Open(context.Background(), "file://"+filepath.Join(t.TempDir(), "store"), blobstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestFileLayout(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := blobstore.Open(ctx, root, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), "file://"+root; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	storetest.MustPut(t, s, "seg/0001/chunk", []byte("data"))
	if b, err := os.ReadFile(filepath.Join(root, "seg", "0001", "chunk")); err != nil || string(b) != "data" {
		t.Fatalf("object file = %q, %v", b, err)
	}

	// A leftover temporary file (a crashed writer) is not an object.
	if err := os.WriteFile(filepath.Join(root, "seg", "0001", blobstore.TempPrefix+"123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Keys(t, s, ""); strings.Join(got, ",") != "seg/0001/chunk" {
		t.Fatalf("List = %v, want only the object", got)
	}

	// A lost PutIfAbsent leaves no temporary file behind.
	if err := s.PutIfAbsent(ctx, "seg/0001/chunk", []byte("other")); !errors.Is(err, blobstore.ErrExists) {
		t.Fatalf("PutIfAbsent = %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "seg", "0001"))
	if len(entries) != 2 { // the object and the planted leftover
		t.Fatalf("directory holds %d entries after a lost PutIfAbsent", len(entries))
	}
	os.Remove(filepath.Join(root, "seg", "0001", blobstore.TempPrefix+"123"))

	// Deleting the last object prunes the directories it leaves empty.
	if err := s.Delete(ctx, "seg/0001/chunk"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "seg")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty directories left after Delete: %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("root removed: %v", err)
	}
}

func TestFileMissingRoot(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "not", "yet")
	s, err := blobstore.Open(ctx, "file://"+root, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := storetest.Keys(t, s, ""); len(got) != 0 {
		t.Fatalf("List on missing root = %v", got)
	}
	if _, err := s.Get(ctx, "x"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get on missing root = %v", err)
	}
	if err := s.PutIfAbsent(ctx, "x", nil); err != nil {
		t.Fatalf("first write creates the root: %v", err)
	}
}

func TestFileShortRead(t *testing.T) {
	// The file store announces the size it saw when opening; a file cut
	// short under an open reader must not pass for a whole object.
	ctx := context.Background()
	root := t.TempDir()
	s, _ := blobstore.Open(ctx, root, blobstore.Options{})
	storetest.MustPut(t, s, "obj", []byte("0123456789"))
	rc, err := s.Get(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := os.Truncate(filepath.Join(root, "obj"), 4); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	var readErr error
	for readErr == nil {
		_, readErr = rc.Read(buf)
	}
	if !errors.Is(readErr, blobstore.ErrShortRead) {
		t.Fatalf("read of truncated file ended with %v, want ErrShortRead", readErr)
	}
}
