package main

import (
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// Store options reach the store reference by name; a malformed or doubled
// one is a usage error.
func TestBackupOptions(t *testing.T) {
	s := storeFlags{endpoint: "http://127.0.0.1:7070", options: []string{"account_key_env=AZURE_KEY", "x="}}
	ref, err := s.ref("--backup-target", "file:///tmp/chain")
	if err != nil {
		t.Fatal(err)
	}
	want := blobstore.Options{blobstore.OptEndpoint: "http://127.0.0.1:7070", "account_key_env": "AZURE_KEY", "x": ""}
	if !reflect.DeepEqual(ref.Options, want) {
		t.Fatalf("options %v, want %v", ref.Options, want)
	}
	for _, bad := range [][]string{{"novalue"}, {"=v"}, {"endpoint=http://other"}, {"a=1", "a=2"}} {
		s := storeFlags{endpoint: "http://127.0.0.1:7070", options: bad}
		if _, err := s.ref("--backup-target", "file:///tmp/chain"); err == nil {
			t.Errorf("--backup-option %q accepted", bad)
		}
	}
}
