package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// fileStore keeps each object in a file under root; the key's '/' separators
// become directories. Writes go to a temporary file in the target directory
// that is fsynced and then renamed (Put) or hard-linked (PutIfAbsent) into
// place, so readers see whole objects only.
type fileStore struct {
	root string
}

// openFile opens a file store rooted at the absolute directory dir. The
// directory is created by the first write.
func openFile(dir string) (*fileStore, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("open store %q: file store path must be absolute", dir)
	}
	root := filepath.Clean(dir)
	if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("open store %s: not a directory", root)
	}
	return &fileStore{root: root}, nil
}

// String returns the store's file:// URL.
func (s *fileStore) String() string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(s.root)}).String()
}

func (s *fileStore) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

// Put implements Store.
func (s *fileStore) Put(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("file put: %w", err)
	}
	final := s.path(key)
	tmp, err := s.writeTemp(ctx, final, data)
	if err != nil {
		return fmt.Errorf("file put %s: %w", final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("file put %s: %w", final, err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return fmt.Errorf("file put %s: %w", final, err)
	}
	return nil
}

// PutIfAbsent implements Store. The hard link fails with EEXIST when the key
// exists, which makes the create atomic even between processes.
func (s *fileStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("file put-if-absent: %w", err)
	}
	final := s.path(key)
	tmp, err := s.writeTemp(ctx, final, data)
	if err != nil {
		return fmt.Errorf("file put-if-absent %s: %w", final, err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Lstat(final); serr == nil && fi.IsDir() {
				return fmt.Errorf("file put-if-absent %s: key is a directory of other keys", final)
			}
			return fmt.Errorf("file put-if-absent %s: %w", final, ErrExists)
		}
		return fmt.Errorf("file put-if-absent %s: %w", final, err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return fmt.Errorf("file put-if-absent %s: %w", final, err)
	}
	return nil
}

// writeTemp writes data to a new fsynced temporary file in final's
// directory, creating the directory if needed, and returns its path.
func (s *fileStore) writeTemp(ctx context.Context, final string, data []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	dir := filepath.Dir(final)
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	// A concurrent Delete may prune the directory between MkdirAll and
	// CreateTemp; a few tries settle that race.
	for try := 0; try < 3 && errors.Is(err, fs.ErrNotExist); try++ {
		if err = os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		f, err = os.CreateTemp(dir, tempPrefix+"*")
	}
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// Get implements Store.
func (s *fileStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("file get: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := s.path(key)
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) || isNotDir(err) {
			return nil, fmt.Errorf("file get %s: %w", p, ErrNotFound)
		}
		return nil, fmt.Errorf("file get %s: %w", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("file get %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("file get %s: %w", p, ErrNotFound)
	}
	return newLengthReader(f, p, fi.Size()), nil
}

// List implements Store. It walks only the directory the prefix points into.
func (s *fileStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("file list: %w", err)
	}
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = s.path(prefix[:i])
	}
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
				return nil // nothing under this prefix, or pruned while walking
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), tempPrefix) || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while walking
		}
		if err != nil {
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: fi.Size(), Modified: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("file list %s prefix %q: %w", s.root, prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements Store. Directories left empty are removed up to the root.
func (s *fileStore) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return fmt.Errorf("file delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := s.path(key)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || isNotDir(err) || (err == nil && fi.IsDir()) {
		return nil // no object at key (a directory is only a key prefix)
	}
	if err == nil {
		err = os.Remove(p)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file delete %s: %w", p, err)
	}
	for dir := filepath.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty (or already gone): stop pruning
		}
	}
	return nil
}

// syncDir fsyncs a directory so a rename or link in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// isNotDir reports ENOTDIR: a key's parent path is an object, not a directory.
func isNotDir(err error) bool {
	return errors.Is(err, syscall.ENOTDIR)
}
