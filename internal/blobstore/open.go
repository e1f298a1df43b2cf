package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Options configure how a store URL is opened: named settings each store
// defines for itself (none of them secret), so a new store never changes a
// workflow's input. A missing option takes its default.
type Options map[string]string

// Options of the s3 store.
const (
	// OptEndpoint overrides the S3 endpoint URL (for S3-compatible servers).
	OptEndpoint = "endpoint"
	// OptRegion is the S3 region; "auto" and "" fall back to us-east-1
	// unless the AWS configuration chain names one.
	OptRegion = "region"
	// OptPathStyle "true" selects path-style S3 addressing (bucket in the path).
	OptPathStyle = "path_style"
)

// check refuses an option the store does not define.
func (o Options) check(scheme string, known ...string) error {
	for k := range o {
		ok := false
		for _, n := range known {
			ok = ok || k == n
		}
		if !ok {
			return fmt.Errorf("%s stores take no option %q (they take: %s)", scheme, k, strings.Join(known, ", "))
		}
	}
	return nil
}

func init() {
	Register("file", "file:///absolute/path (or a plain absolute path)", func(_ context.Context, u *url.URL, _ Options) (Store, error) {
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("open store %s: file URLs take no host (write file:///abs/path)", Redact(u))
		}
		if u.User != nil || u.RawQuery != "" {
			return nil, fmt.Errorf("open store %s: file URLs take no credentials or query", Redact(u))
		}
		return openFile(u.Path)
	})
}

// Open opens the store rooted at rawURL: a plain absolute path is a local
// folder, any other URL opens with the store registered for its scheme
// (Register; Forms lists them). Opening does no network I/O; the first
// request reports whether the store is reachable.
func Open(ctx context.Context, rawURL string, opts Options) (Store, error) {
	if strings.HasPrefix(rawURL, "/") {
		return openFile(rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the whole URL, credentials included: keep only
		// the reason.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("open store: cannot parse URL: %v (accepted: %s)", err, Forms())
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("open store %s: not a URL or an absolute path (accepted: %s)", Redact(u), Forms())
	}
	open, err := opener(u.Scheme)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %v (accepted: %s)", Redact(u), err, Forms())
	}
	return open(ctx, u, opts)
}

// Redact returns u as a string without user information, and with the value
// of every query parameter replaced, so it can be logged.
func Redact(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			q[k] = []string{"redacted"}
		}
		c.RawQuery = q.Encode()
	}
	return c.String()
}
