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

// Options more than one store takes, and those the CLI and recorded
// workflow inputs name on their own (--backup-endpoint, --backup-region,
// --backup-path-style). A store's other options are declared in its package.
const (
	// OptEndpoint overrides the service's endpoint URL (an S3-compatible
	// server, a private endpoint, an emulator); s3, gs and azblob take it.
	OptEndpoint = "endpoint"
	// OptRegion is the S3 region; "auto" and "" fall back to us-east-1
	// unless the AWS configuration chain names one.
	OptRegion = "region"
	// OptPathStyle "true" selects path-style S3 addressing (bucket in the path).
	OptPathStyle = "path_style"
)

// Check refuses an option the store of scheme does not define: a store's
// opener calls it with every option it knows.
func (o Options) Check(scheme string, known ...string) error {
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
