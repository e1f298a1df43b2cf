package blobstore

import (
	"context"
	"net/url"
	"strings"
	"testing"
)

// A store registered by scheme opens through Open, is listed in the forms
// every message offers, and a second registration of its scheme panics.
func TestRegisteredSchemeOpensThroughOpen(t *testing.T) {
	var got *url.URL
	Register("registrytest", "registrytest://name", func(_ context.Context, u *url.URL, _ Options) (Store, error) {
		got = u
		return openFile(t.TempDir())
	})
	if !Registered("registrytest") || Registered("nosuchscheme") {
		t.Fatal("Registered disagrees with Register")
	}
	if _, err := Open(context.Background(), "registrytest://name/prefix", Options{}); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Host != "name" || got.Path != "/prefix" {
		t.Fatalf("the opener got %v", got)
	}
	forms := Forms()
	for _, want := range []string{"file:///absolute/path", "registrytest://name"} {
		if !strings.Contains(forms, want) {
			t.Errorf("Forms() = %q lacks %q", forms, want)
		}
	}
	_, err := Open(context.Background(), "nosuchscheme://x", Options{})
	if err == nil || !strings.Contains(err.Error(), `unsupported scheme "nosuchscheme"`) || !strings.Contains(err.Error(), "registrytest://name") {
		t.Fatalf("an unknown scheme is refused with the accepted forms: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a scheme twice must panic")
		}
	}()
	Register("registrytest", "again", nil)
}
