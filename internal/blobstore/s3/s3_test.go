package s3

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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/blobstore/storetest"
)

// Defaults match deploy/dev/services.sh, so `go test` works right after it
// without sourcing its env file.
const (
	defaultTestS3Endpoint = "http://127.0.0.1:7070"
	defaultTestAccessKey  = "sluice"
	defaultTestSecretKey  = "sluice-dev-secret"
	testBucket            = "sluice-test"
)

func TestMain(m *testing.M) {
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_SECRET_ACCESS_KEY") == "" {
		os.Setenv("AWS_ACCESS_KEY_ID", defaultTestAccessKey)
		os.Setenv("AWS_SECRET_ACCESS_KEY", defaultTestSecretKey)
	}
	// No instance metadata service here: don't wait for one.
	if os.Getenv("AWS_EC2_METADATA_DISABLED") == "" {
		os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	}
	os.Exit(m.Run())
}

var (
	bucketOnce sync.Once
	bucketErr  error
)

// testS3Endpoint returns the S3 server tests use, failing the test when it
// is unreachable and services are required (CI), skipping it otherwise.
func testS3Endpoint(t *testing.T) string {
	t.Helper()
	endpoint := os.Getenv("SLUICE_TEST_S3_ENDPOINT")
	if endpoint == "" {
		endpoint = defaultTestS3Endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("SLUICE_TEST_S3_ENDPOINT=%q is not a URL", endpoint)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		msg := fmt.Sprintf("S3 server not reachable at %s (%v); start it with deploy/dev/services.sh", endpoint, err)
		if os.Getenv("CI") != "" || os.Getenv("SLUICE_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (set SLUICE_REQUIRE_SERVICES=1 to fail instead of skipping)")
	}
	conn.Close()
	return endpoint
}

// newTestS3Store opens a store under a prefix no other test uses, creating
// the test bucket once, and deletes what the test wrote when it ends.
func newTestS3Store(t *testing.T) blobstore.Store {
	t.Helper()
	endpoint := testS3Endpoint(t)
	ctx := context.Background()
	prefix := storetest.Prefix(t)
	st, err := blobstore.Open(ctx, "s3://"+testBucket+"/"+prefix, blobstore.Options{blobstore.OptEndpoint: endpoint, blobstore.OptPathStyle: "true"})
	if err != nil {
		t.Fatal(err)
	}
	client := st.(*s3Store).client
	bucketOnce.Do(func() {
		_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(testBucket)})
		if err != nil {
			switch errorCode(err) {
			case "BucketAlreadyOwnedByYou", "BucketAlreadyExists":
			default:
				bucketErr = err
			}
		}
	})
	if bucketErr != nil {
		t.Fatalf("create bucket %s at %s: %v", testBucket, endpoint, bucketErr)
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

func TestS3Conformance(t *testing.T) {
	testS3Endpoint(t)
	storetest.Run(t, newTestS3Store)
}

// fakeS3 serves one canned answer to every request and counts requests.
func fakeS3(t *testing.T, handler http.HandlerFunc) (blobstore.Store, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	st, err := blobstore.Open(context.Background(), "s3://bucket/prefix", blobstore.Options{blobstore.OptEndpoint: srv.URL, blobstore.OptPathStyle: "true"})
	if err != nil {
		t.Fatal(err)
	}
	return st, &calls
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>test</Message></Error>`, code)
}

func TestS3ServerErrorsAreRetriedThenUnreachable(t *testing.T) {
	st, calls := fakeS3(t, func(w http.ResponseWriter, r *http.Request) {
		s3Error(w, http.StatusServiceUnavailable, "SlowDown")
	})
	err := st.Put(context.Background(), "k", []byte("x"))
	if !errors.Is(err, blobstore.ErrUnreachable) {
		t.Fatalf("Put against a failing server = %v, want ErrUnreachable", err)
	}
	if n := calls.Load(); n != blobstore.RetryAttempts {
		t.Fatalf("server saw %d attempts, want %d", n, blobstore.RetryAttempts)
	}
	if !strings.Contains(err.Error(), "s3 put s3://bucket/prefix/k") {
		t.Errorf("error lacks context: %v", err)
	}
}

func TestS3RecoversAfterTransientErrors(t *testing.T) {
	var n atomic.Int32
	st, _ := fakeS3(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			s3Error(w, http.StatusInternalServerError, "InternalError")
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	if err := st.Put(context.Background(), "k", []byte("x")); err != nil {
		t.Fatalf("Put after two transient failures: %v", err)
	}
}

func TestS3ConnectionRefusedIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	st, err := blobstore.Open(context.Background(), "s3://bucket", blobstore.Options{blobstore.OptEndpoint: "http://" + addr, blobstore.OptPathStyle: "true"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = st.Get(context.Background(), "k")
	if !errors.Is(err, blobstore.ErrUnreachable) || errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get against a closed port = %v, want ErrUnreachable", err)
	}
	t.Logf("gave up after %v", time.Since(start).Round(time.Millisecond))
}

func TestS3AnswersAreNotRetried(t *testing.T) {
	cases := []struct {
		status int
		code   string
		op     string
		want   error
	}{
		{http.StatusNotFound, "NoSuchKey", "get", blobstore.ErrNotFound},
		{http.StatusPreconditionFailed, "PreconditionFailed", "put-if-absent", blobstore.ErrExists},
		{http.StatusConflict, "ConditionalRequestConflict", "put-if-absent", blobstore.ErrExists},
		{http.StatusForbidden, "AccessDenied", "get", nil},
		{http.StatusNotFound, "NoSuchBucket", "get", nil},
	}
	for _, c := range cases {
		st, calls := fakeS3(t, func(w http.ResponseWriter, r *http.Request) { s3Error(w, c.status, c.code) })
		var err error
		switch c.op {
		case "get":
			_, err = st.Get(context.Background(), "k")
		case "put-if-absent":
			err = st.PutIfAbsent(context.Background(), "k", []byte("x"))
		}
		if err == nil {
			t.Errorf("%d %s: no error", c.status, c.code)
			continue
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%d %s: %v, want %v", c.status, c.code, err, c.want)
		}
		if c.want == nil && (errors.Is(err, blobstore.ErrNotFound) || errors.Is(err, blobstore.ErrUnreachable) || errors.Is(err, blobstore.ErrExists)) {
			t.Errorf("%d %s: %v should not be classified", c.status, c.code, err)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%d %s: %d attempts, want 1", c.status, c.code, n)
		}
	}
}

func TestS3ShortBody(t *testing.T) {
	// The server announces 100 bytes, sends 40 and drops the connection.
	st, _ := fakeS3(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(strings.Repeat("x", 40)))
	})
	_, err := blobstore.ReadAll(context.Background(), st, "k")
	if !errors.Is(err, blobstore.ErrShortRead) {
		t.Fatalf("ReadAll of a truncated body = %v, want ErrShortRead", err)
	}
}

func TestS3DeleteMissingIsFine(t *testing.T) {
	st, _ := fakeS3(t, func(w http.ResponseWriter, r *http.Request) { s3Error(w, http.StatusNotFound, "NoSuchKey") })
	if err := st.Delete(context.Background(), "k"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
}

// Open refuses malformed s3 URLs without echoing their credentials, and an
// unknown scheme's error lists this store's form among the accepted ones.
func TestOpenRejects(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		url      string
		mentions string
	}{
		{"s3://AKIA:hunter2@bucket/p", "credential chain"},
		{"s3:///prefix-without-bucket", "missing bucket"},
		{"s3://bucket/a/../b", "bad prefix"},
		{"s3://bucket/p?secret=hunter2", "no query"},
	}
	for _, c := range cases {
		s, err := blobstore.Open(ctx, c.url, blobstore.Options{})
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
	_, err := blobstore.Open(ctx, "ftp://host/x", blobstore.Options{})
	if err == nil || !strings.Contains(err.Error(), "s3://") || !strings.Contains(err.Error(), "file://") {
		t.Errorf("unknown scheme error should list the accepted schemes: %v", err)
	}
	if forms := blobstore.Forms(); !strings.Contains(forms, "s3://bucket[/prefix]") {
		t.Errorf("Forms() = %q lacks s3://bucket[/prefix]", forms)
	}
}

func TestOpenS3String(t *testing.T) {
	ctx := context.Background()
	for in, want := range map[string]string{
		"s3://bucket/some/prefix/": "s3://bucket/some/prefix",
		"s3://bucket":              "s3://bucket",
	} {
		s, err := blobstore.Open(ctx, in, blobstore.Options{blobstore.OptEndpoint: "http://127.0.0.1:1", blobstore.OptPathStyle: "true"})
		if err != nil {
			t.Fatalf("Open(%q): %v", in, err)
		}
		if got := s.String(); got != want {
			t.Errorf("Open(%q).String() = %q, want %q", in, got, want)
		}
	}
}
