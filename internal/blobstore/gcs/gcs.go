// Package gcs is the gs:// backup store: objects in one Google Cloud Storage
// bucket under an optional prefix, through Google's client library. Linking
// the package registers the scheme with blobstore (internal/engines links it
// into the binaries); nothing else imports it.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// gcsChunkRetryDeadline bounds how long one upload chunk is retried. Every
// request is retried on transient failures by the stores' common policy
// (blobstore.RetryAttempts; see gcsRetry for why writes are safe to repeat).
const gcsChunkRetryDeadline = 30 * time.Second

// gcsStore keeps objects in one Google Cloud Storage bucket under an
// optional name prefix.
type gcsStore struct {
	bucket   string
	prefix   string // "" or ending in "/"
	endpoint string // JSON API endpoint override, or ""

	once      sync.Once
	clientVal *storage.Client
	clientErr error
}

func init() {
	blobstore.Register("gs", "gs://bucket[/prefix]", func(ctx context.Context, u *url.URL, opts blobstore.Options) (blobstore.Store, error) {
		return openGCS(ctx, u, opts)
	})
}

// openGCS opens gs://bucket/prefix. Credentials come from Google's
// application default credentials; when STORAGE_EMULATOR_HOST is set the
// client library talks to that emulator without authentication. The client
// is built on the first request, so opening does no I/O.
func openGCS(_ context.Context, u *url.URL, opts blobstore.Options) (*gcsStore, error) {
	if u.User != nil {
		return nil, fmt.Errorf("open store %s: credentials in the URL are not accepted; use application default credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login, the metadata server)", blobstore.Redact(u))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("open store %s: gs URLs take no query or fragment", blobstore.Redact(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("open store %s: missing bucket (write gs://bucket/prefix)", blobstore.Redact(u))
	}
	if u.Port() != "" {
		return nil, fmt.Errorf("open store %s: a bucket name takes no port (set the endpoint option for a private endpoint or an emulator)", blobstore.Redact(u))
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := blobstore.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("open store %s: bad prefix: %w", blobstore.Redact(u), err)
		}
		prefix += "/"
	}
	if err := opts.Check("gs", blobstore.OptEndpoint); err != nil {
		return nil, fmt.Errorf("open store %s: %w", blobstore.Redact(u), err)
	}
	endpoint := opts[blobstore.OptEndpoint]
	if endpoint != "" {
		eu, err := url.Parse(endpoint)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" || eu.User != nil {
			return nil, fmt.Errorf("open store %s: endpoint must be an http:// or https:// URL without credentials", blobstore.Redact(u))
		}
		// A bare host means the JSON API at its usual path.
		if eu.Path == "" || eu.Path == "/" {
			eu.Path = "/storage/v1/"
		}
		endpoint = eu.String()
	}
	return &gcsStore{bucket: u.Host, prefix: prefix, endpoint: endpoint}, nil
}

// client returns the storage client, building it on first use.
func (s *gcsStore) client(ctx context.Context) (*storage.Client, error) {
	s.once.Do(func() { s.clientVal, s.clientErr = s.open(ctx) })
	if s.clientErr != nil {
		return nil, fmt.Errorf("gs store %s: %w", s, s.clientErr)
	}
	return s.clientVal, nil
}

// gcsHeaderTimeout bounds the wait for a response's headers, as for S3: a
// server that takes the connection and never answers is unreachable, not a
// request that hangs until the activity gives up. A variable for tests.
var gcsHeaderTimeout = blobstore.HeaderTimeout

// open builds the client. Reads use the JSON API so that one endpoint
// serves every request. Retries are set per request (retry). Requests go
// through a boundedTransport: under the credentials of the application default
// chain, or, with STORAGE_EMULATOR_HOST set, without any (emulator mode).
func (s *gcsStore) open(_ context.Context) (*storage.Client, error) {
	// The client keeps the context for its lifetime (credential refresh),
	// so it must not be a request's context.
	ctx := context.Background()
	opts := []option.ClientOption{storage.WithJSONReads(), storage.WithDisabledClientMetrics()}
	if s.endpoint != "" {
		opts = append(opts, option.WithEndpoint(s.endpoint))
	}
	var rt http.RoundTripper = blobstore.BoundedTransport(gcsHeaderTimeout)
	if os.Getenv("STORAGE_EMULATOR_HOST") == "" {
		auth := []option.ClientOption{option.WithScopes(storage.ScopeFullControl, "https://www.googleapis.com/auth/cloud-platform")}
		if s.endpoint != "" {
			auth = append(auth, option.WithEndpoint(s.endpoint))
		}
		tr, err := htransport.NewTransport(ctx, rt, auth...)
		if err != nil {
			return nil, fmt.Errorf("application default credentials: %w", err)
		}
		rt = tr
	}
	opts = append(opts, option.WithHTTPClient(&http.Client{Transport: rt}))
	return storage.NewClient(ctx, opts...)
}

// retry returns the retry options of one request.
//
// The library retries only idempotent requests by default, and a write
// without a precondition does not count as one. Here every request is
// retried (RetryAlways), which is safe for this store's callers:
//   - PutIfAbsent carries ifGenerationMatch=0. If a first attempt landed and
//     its answer was lost, the retry gets 412 and reports ErrExists; the
//     chain then reads the object back and treats identical bytes as its
//     own write (chain.PutManifest, chain.CommitCatalog).
//   - Put is used for content-addressed chunks (same key, same bytes) and
//     for hints whose last value wins, so writing one twice changes nothing.
//   - Delete of an object a lost first attempt removed gets 404: success.
//
// Uploads do not honour the attempt limit (the library retries them until
// the context ends), so the error function counts attempts itself; it is
// per request, which is why the options are built afresh each time (a
// handle's Retryer changes a configuration it shares with its client).
func gcsRetry() []storage.RetryOption {
	var retries atomic.Int32
	return []storage.RetryOption{
		storage.WithPolicy(storage.RetryAlways),
		storage.WithMaxAttempts(blobstore.RetryAttempts),
		storage.WithBackoff(gax.Backoff{Initial: blobstore.RetryBaseBackoff, Max: blobstore.RetryMaxBackoff, Multiplier: 2}),
		storage.WithErrorFunc(func(err error) bool {
			return storage.ShouldRetry(err) && retries.Add(1) < blobstore.RetryAttempts
		}),
	}
}

// String returns gs://bucket/prefix (gs://bucket without a prefix).
func (s *gcsStore) String() string {
	if s.prefix == "" {
		return "gs://" + s.bucket
	}
	return "gs://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// name is the object's full URL, for error messages.
func (s *gcsStore) name(key string) string {
	return "gs://" + s.bucket + "/" + s.prefix + key
}

// object returns the handle of key's object.
func (s *gcsStore) object(ctx context.Context, key string) (*storage.ObjectHandle, error) {
	c, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.Bucket(s.bucket).Object(s.prefix + key).Retryer(gcsRetry()...), nil
}

// Put implements Store with an unconditional upload; GCS makes the new
// generation visible only once it is complete.
func (s *gcsStore) Put(ctx context.Context, key string, data []byte) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("gs put: %w", err)
	}
	o, err := s.object(ctx, key)
	if err != nil {
		return err
	}
	if err := s.write(ctx, o, data); err != nil {
		return s.fail(ctx, "put", key, err)
	}
	return nil
}

// PutIfAbsent implements Store with an upload conditioned on
// ifGenerationMatch=0, which GCS answers with 412 when any live generation
// of the object exists.
func (s *gcsStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("gs put-if-absent: %w", err)
	}
	o, err := s.object(ctx, key)
	if err != nil {
		return err
	}
	if err := s.write(ctx, o.If(storage.Conditions{DoesNotExist: true}), data); err != nil {
		if gcsStatus(err) == http.StatusPreconditionFailed {
			return fmt.Errorf("gs put-if-absent %s: %w", s.name(key), blobstore.ErrExists)
		}
		return s.fail(ctx, "put-if-absent", key, err)
	}
	return nil
}

// write uploads data as o. The writer's context is cancelled on failure so
// that an upload never completes after an error.
func (s *gcsStore) write(ctx context.Context, o *storage.ObjectHandle, data []byte) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := o.NewWriter(wctx)
	w.ChunkRetryDeadline = gcsChunkRetryDeadline
	if _, err := w.Write(data); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// Get implements Store. The body is checked against the object's size so a
// truncated transfer surfaces as ErrShortRead.
func (s *gcsStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("gs get: %w", err)
	}
	o, err := s.object(ctx, key)
	if err != nil {
		return nil, err
	}
	r, err := o.NewReader(ctx)
	if err != nil {
		return nil, s.fail(ctx, "get", key, err)
	}
	want := r.Attrs.Size
	if r.Attrs.ContentEncoding == "gzip" {
		want = -1 // served decompressed: the stored size does not apply
	}
	return blobstore.CheckLength(r, s.name(key), want, func(err error) error {
		if ctx.Err() != nil {
			return err
		}
		// The library resumes a broken body with a range request; when
		// that fails too, the object ended early as far as we can read.
		if r.Remain() > 0 {
			err = fmt.Errorf("%w: %w", blobstore.ErrShortRead, err)
		}
		if gcsUnreachable(err) {
			return fmt.Errorf("%w: %w", blobstore.ErrUnreachable, err)
		}
		return err
	}), nil
}

// List implements Store, page by page.
func (s *gcsStore) List(ctx context.Context, prefix string) ([]blobstore.ObjectInfo, error) {
	if err := blobstore.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("gs list: %w", err)
	}
	c, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	q := &storage.Query{Prefix: s.prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return nil, fmt.Errorf("gs list: %w", err)
	}
	var out []blobstore.ObjectInfo
	it := c.Bucket(s.bucket).Retryer(gcsRetry()...).Objects(ctx, q)
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, s.fail(ctx, "list", prefix, err)
		}
		key := strings.TrimPrefix(a.Name, s.prefix)
		if key == "" || strings.HasSuffix(key, "/") {
			continue // folder placeholder, not an object
		}
		out = append(out, blobstore.ObjectInfo{Key: key, Size: a.Size, Modified: a.Updated})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements Store.
func (s *gcsStore) Delete(ctx context.Context, key string) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return fmt.Errorf("gs delete: %w", err)
	}
	o, err := s.object(ctx, key)
	if err != nil {
		return err
	}
	if err := o.Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return s.fail(ctx, "delete", key, err)
	}
	return nil
}

// fail wraps a client error with the operation, the object and, where it
// applies, ErrNotFound or ErrUnreachable.
func (s *gcsStore) fail(ctx context.Context, op, key string, err error) error {
	name := s.name(key)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("gs %s %s: %w", op, name, err)
	case errors.Is(err, storage.ErrObjectNotExist):
		return fmt.Errorf("gs %s %s: %w: %w", op, name, blobstore.ErrNotFound, err)
	case gcsUnreachable(err):
		return fmt.Errorf("gs %s %s: %w: %w", op, name, blobstore.ErrUnreachable, err)
	default:
		return fmt.Errorf("gs %s %s: %w", op, name, err)
	}
}

// gcsStatus returns the HTTP status of a client error, or 0 if the request
// got no answer.
func gcsStatus(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// gcsUnreachable reports failures of the network or of the server itself,
// as opposed to answers about the request (not found, denied, conflict).
func gcsUnreachable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if code := gcsStatus(err); code != 0 {
		return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests ||
			(code >= 500 && code != http.StatusNotImplemented)
	}
	return blobstore.NetworkFailure(err)
}
