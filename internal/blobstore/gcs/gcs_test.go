package gcs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/blobstore/storetest"
)

const (
	testGCSBucket  = "sluice-test-gcs"
	testGCSProject = "sluice-test"
)

var (
	gcsBucketOnce sync.Once
	gcsBucketErr  error
)

// testGCSEndpoint returns the GCS emulator tests use (SLUICE_TEST_GCS_ENDPOINT,
// fake-gcs-server from deploy/dev/services.sh). Without it, or when it does
// not answer, the test is skipped, or fails when services are required.
func testGCSEndpoint(t *testing.T) string {
	t.Helper()
	required := os.Getenv("CI") != "" || os.Getenv("SLUICE_REQUIRE_SERVICES") == "1"
	endpoint := os.Getenv("SLUICE_TEST_GCS_ENDPOINT")
	if endpoint == "" {
		msg := "SLUICE_TEST_GCS_ENDPOINT is not set; start fake-gcs-server with deploy/dev/services.sh and source its services.env"
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg + " (set SLUICE_REQUIRE_SERVICES=1 to fail instead of skipping)")
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("SLUICE_TEST_GCS_ENDPOINT=%q is not a URL", endpoint)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		msg := fmt.Sprintf("GCS emulator not reachable at %s (%v); start it with deploy/dev/services.sh", endpoint, err)
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg + " (set SLUICE_REQUIRE_SERVICES=1 to fail instead of skipping)")
	}
	conn.Close()
	// The emulator takes no credentials: the client library's emulator mode.
	if os.Getenv("STORAGE_EMULATOR_HOST") == "" {
		t.Setenv("STORAGE_EMULATOR_HOST", u.Host)
	}
	return endpoint
}

// newTestGCSStore opens a store under a prefix no other test uses, creating
// the test bucket once, and deletes what the test wrote when it ends.
func newTestGCSStore(t *testing.T) blobstore.Store {
	t.Helper()
	endpoint := testGCSEndpoint(t)
	ctx := context.Background()
	prefix := storetest.Prefix(t)
	st, err := blobstore.Open(ctx, "gs://"+testGCSBucket+"/"+prefix, blobstore.Options{blobstore.OptEndpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	client, err := st.(*gcsStore).client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gcsBucketOnce.Do(func() {
		err := client.Bucket(testGCSBucket).Create(ctx, testGCSProject, nil)
		if err != nil && gcsStatus(err) != http.StatusConflict {
			gcsBucketErr = err
		}
	})
	if gcsBucketErr != nil {
		t.Fatalf("create bucket %s at %s: %v", testGCSBucket, endpoint, gcsBucketErr)
	}
	t.Cleanup(func() {
		infos, err := st.List(ctx, "")
		if err != nil {
			t.Logf("cleanup list: %v", err)
			return
		}
		for _, info := range infos {
			if err := st.Delete(ctx, info.Key); err != nil {
				t.Logf("cleanup: %v", err)
			}
		}
	})
	return st
}

func TestGCSConformance(t *testing.T) {
	testGCSEndpoint(t)
	storetest.Run(t, newTestGCSStore)
}

func TestGCSOpen(t *testing.T) {
	ctx := context.Background()
	st, err := blobstore.Open(ctx, "gs://bucket/a/b/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.String(); got != "gs://bucket/a/b" {
		t.Errorf("String() = %q", got)
	}
	if st, err := blobstore.Open(ctx, "gs://bucket", blobstore.Options{blobstore.OptEndpoint: "http://127.0.0.1:1"}); err != nil {
		t.Error(err)
	} else if got := st.(*gcsStore).endpoint; got != "http://127.0.0.1:1/storage/v1/" {
		t.Errorf("bare endpoint became %q", got)
	}
	for _, c := range []struct {
		url  string
		opts blobstore.Options
		want string
	}{
		{"gs://", nil, "missing bucket"},
		{"gs://user:secret@bucket/p", nil, "credentials in the URL"},
		{"gs://bucket/p?x=1", nil, "no query"},
		{"gs://bucket:99/p", nil, "no port"},
		{"gs://bucket/a/../b", nil, "bad prefix"},
		{"gs://bucket/p", blobstore.Options{blobstore.OptRegion: "us"}, `gs stores take no option "region"`},
		{"gs://bucket/p", blobstore.Options{blobstore.OptEndpoint: "ftp://x"}, "endpoint must be"},
	} {
		_, err := blobstore.Open(ctx, c.url, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q, %v) = %v, want an error containing %q", c.url, c.opts, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) leaks the password: %v", c.url, err)
		}
	}
}

// fakeGCS serves handler as the JSON API and counts requests.
func fakeGCS(t *testing.T, handler http.HandlerFunc) (blobstore.Store, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	// Emulator mode: no credentials (the endpoint option points elsewhere).
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	st, err := blobstore.Open(context.Background(), "gs://bucket/prefix", blobstore.Options{blobstore.OptEndpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return st, &calls
}

func gcsError(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":"test","errors":[{"message":"test","reason":"test"}]}}`, status)
}

func gcsObject(w http.ResponseWriter, size int) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":"storage#object","bucket":"bucket","name":"prefix/k","generation":"1","size":"%d"}`, size)
}

func TestGCSPreconditionFailedIsExists(t *testing.T) {
	var query atomic.Value
	st, calls := fakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
		query.Store(r.URL.RawQuery)
		gcsError(w, http.StatusPreconditionFailed)
	})
	err := st.PutIfAbsent(context.Background(), "k", []byte("x"))
	if !errors.Is(err, blobstore.ErrExists) {
		t.Fatalf("PutIfAbsent answered 412 = %v, want ErrExists", err)
	}
	if q, _ := query.Load().(string); !strings.Contains(q, "ifGenerationMatch=0") {
		t.Errorf("upload query %q lacks ifGenerationMatch=0", q)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestGCSServerErrorsAreRetriedThenUnreachable(t *testing.T) {
	for _, op := range []string{"put", "put-if-absent", "get", "list"} {
		st, calls := fakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
			gcsError(w, http.StatusServiceUnavailable)
		})
		ctx := context.Background()
		var err error
		switch op {
		case "put":
			err = st.Put(ctx, "k", []byte("x"))
		case "put-if-absent":
			err = st.PutIfAbsent(ctx, "k", []byte("x"))
		case "get":
			_, err = st.Get(ctx, "k")
		case "list":
			_, err = st.List(ctx, "")
		}
		if !errors.Is(err, blobstore.ErrUnreachable) || errors.Is(err, blobstore.ErrExists) || errors.Is(err, blobstore.ErrNotFound) {
			t.Errorf("%s against a failing server = %v, want ErrUnreachable", op, err)
		}
		if n := calls.Load(); n != blobstore.RetryAttempts {
			t.Errorf("%s: server saw %d attempts, want %d", op, n, blobstore.RetryAttempts)
		}
		if err != nil && !strings.Contains(err.Error(), "gs "+op+" gs://bucket/prefix/") {
			t.Errorf("%s: error lacks context: %v", op, err)
		}
	}
}

func TestGCSRecoversAfterTransientErrors(t *testing.T) {
	var n atomic.Int32
	st, _ := fakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			gcsError(w, http.StatusInternalServerError)
			return
		}
		gcsObject(w, 1)
	})
	if err := st.Put(context.Background(), "k", []byte("x")); err != nil {
		t.Fatalf("Put after two transient failures: %v", err)
	}
}

func TestGCSConnectionRefusedIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	t.Setenv("STORAGE_EMULATOR_HOST", addr)
	st, err := blobstore.Open(context.Background(), "gs://bucket", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Get(context.Background(), "k")
	if !errors.Is(err, blobstore.ErrUnreachable) || errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get against a closed port = %v, want ErrUnreachable", err)
	}
}

func TestGCSAnswersAreNotRetried(t *testing.T) {
	cases := []struct {
		status int
		op     string
		want   error
	}{
		{http.StatusNotFound, "get", blobstore.ErrNotFound},
		{http.StatusNotFound, "delete", nil},
		{http.StatusForbidden, "get", nil},
		{http.StatusForbidden, "put", nil},
	}
	for _, c := range cases {
		st, calls := fakeGCS(t, func(w http.ResponseWriter, r *http.Request) { gcsError(w, c.status) })
		ctx := context.Background()
		var err error
		switch c.op {
		case "get":
			_, err = st.Get(ctx, "k")
		case "put":
			err = st.Put(ctx, "k", []byte("x"))
		case "delete":
			err = st.Delete(ctx, "k")
		}
		switch {
		case c.op == "delete":
			if err != nil {
				t.Errorf("Delete of a missing key: %v", err)
			}
		case err == nil:
			t.Errorf("%d %s: no error", c.status, c.op)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%d %s: %v, want %v", c.status, c.op, err, c.want)
		case c.want == nil && (errors.Is(err, blobstore.ErrNotFound) || errors.Is(err, blobstore.ErrUnreachable) || errors.Is(err, blobstore.ErrExists)):
			t.Errorf("%d %s: %v should not be classified", c.status, c.op, err)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%d %s: %d attempts, want 1", c.status, c.op, n)
		}
	}
}

func TestGCSShortBody(t *testing.T) {
	// The server announces 100 bytes, sends 40 and ends the response.
	st, _ := fakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Header().Set("X-Goog-Generation", "1")
		w.Header().Set("X-Goog-Stored-Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(strings.Repeat("x", 40)))
	})
	_, err := blobstore.ReadAll(context.Background(), st, "k")
	if !errors.Is(err, blobstore.ErrShortRead) {
		t.Fatalf("ReadAll of a truncated body = %v, want ErrShortRead", err)
	}
}

// The retry policy is the point of PutIfAbsent's safety: check the client
// really retries a conditional write (RetryAlways) and keeps the condition.
func TestGCSConditionalWriteIsRetried(t *testing.T) {
	var n atomic.Int32
	var lost atomic.Bool
	st, _ := fakeGCS(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.RawQuery, "ifGenerationMatch=0") {
			t.Errorf("attempt without ifGenerationMatch=0: %s", r.URL.RawQuery)
		}
		if n.Add(1) == 1 {
			// The first attempt "lands" but its answer is lost.
			lost.Store(true)
			gcsError(w, http.StatusServiceUnavailable)
			return
		}
		gcsError(w, http.StatusPreconditionFailed)
	})
	err := st.PutIfAbsent(context.Background(), "k", []byte("x"))
	if !errors.Is(err, blobstore.ErrExists) {
		t.Fatalf("retried conditional write = %v, want ErrExists", err)
	}
	if n.Load() != 2 || !lost.Load() {
		t.Fatalf("%d attempts, want 2", n.Load())
	}
}

// A server that takes the connection and never answers is unreachable after
// the retries, not a request that hangs until its caller gives up.
func TestGCSSilentServerIsUnreachable(t *testing.T) {
	old := gcsHeaderTimeout
	gcsHeaderTimeout = 100 * time.Millisecond
	t.Cleanup(func() { gcsHeaderTimeout = old })
	release := make(chan struct{})
	st, calls := fakeGCS(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := st.Get(ctx, "k")
	if !errors.Is(err, blobstore.ErrUnreachable) || ctx.Err() != nil {
		t.Fatalf("want ErrUnreachable well before the caller's deadline, got %v (context: %v)", err, ctx.Err())
	}
	if calls.Load() < 2 {
		t.Errorf("%d attempts, want the request retried", calls.Load())
	}
}
