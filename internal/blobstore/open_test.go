package blobstore

import (
	"context"
	"strings"
	"testing"
)

func TestOpenRejects(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		url      string
		mentions string
	}{
		{"ftp://user:hunter2@host/x", "ftp://host/x"},
		{"gopher://host/x?token=hunter2", "token=redacted"},
		{"relative/dir", "absolute path"},
		{"file://otherhost/x", "no host"},
		{"file:relative", "absolute"},
		{"::not a url hunter2", "cannot parse"},
	}
	for _, c := range cases {
		s, err := Open(ctx, c.url, Options{})
		if err == nil {
			t.Errorf("Open(%q) = %v, want an error", c.url, s)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "hunter2") {
			t.Errorf("Open(%q) error leaks a credential: %s", c.url, msg)
		}
		if !strings.Contains(msg, c.mentions) {
			t.Errorf("Open(%q) error %q does not mention %q", c.url, msg, c.mentions)
		}
	}
	// The remote stores' rejections are tested in their packages (s3, gcs,
	// azblob), which register them.
	_, err := Open(ctx, "ftp://host/x", Options{})
	if err == nil || !strings.Contains(err.Error(), "file://") {
		t.Errorf("unknown scheme error should list the accepted schemes: %v", err)
	}
}

func TestValidateKey(t *testing.T) {
	for _, ok := range []string{"a", "a/b", "lineage.json", "seg-1/inc-2/chunk-000003.zst", "a..b", ".hidden"} {
		if err := ValidateKey(ok); err != nil {
			t.Errorf("ValidateKey(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "a//b", "..", "a/..", "./a", "a\\b", "x/" + tempPrefix + "1"} {
		if err := ValidateKey(bad); err == nil {
			t.Errorf("ValidateKey(%q) accepted", bad)
		}
	}
}
