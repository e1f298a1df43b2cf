package blobstore

import (
	"fmt"
	"strings"
)

// tempPrefix starts the name of every temporary file the file store writes;
// keys whose last element starts with it are reserved.
const tempPrefix = ".sluice-tmp-"

// ValidateKey reports whether key is a usable object key: non-empty, relative,
// '/'-separated, without empty, "." or ".." elements and not naming a
// temporary file. Every store applies the same rule so that a chain written to
// one store can be copied to any other.
//
// Stores backed by a filesystem (the file store, versitygw's posix backend)
// also cannot hold both "a" and "a/b": a key must not be the directory part of
// another key. Writes that break this fail with an error that is neither
// ErrExists nor ErrNotFound.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("invalid key %q: empty", key)
	}
	if strings.HasPrefix(key, "/") {
		return fmt.Errorf("invalid key %q: absolute", key)
	}
	if strings.ContainsRune(key, 0) || strings.ContainsRune(key, '\\') {
		return fmt.Errorf("invalid key %q: contains NUL or backslash", key)
	}
	for _, elem := range strings.Split(key, "/") {
		switch {
		case elem == "":
			return fmt.Errorf("invalid key %q: empty path element", key)
		case elem == "." || elem == "..":
			return fmt.Errorf("invalid key %q: contains %q", key, elem)
		}
	}
	if strings.HasPrefix(key[strings.LastIndexByte(key, '/')+1:], tempPrefix) {
		return fmt.Errorf("invalid key %q: %q names are reserved", key, tempPrefix)
	}
	return nil
}

// ValidatePrefix checks a List prefix: empty, or a string that could start a
// valid key (so it may end with '/').
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidateKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("invalid list prefix %q: %w", prefix, err)
	}
	return nil
}
