package azblob

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/blobstore/storetest"
)

// azuriteKey is the development account key Azurite documents for its
// built-in account devstoreaccount1 (public, not a secret).
const azuriteKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// testAzureEndpoint returns the Azure blob service tests use (Azurite, from
// deploy/dev/services.sh), skipping the test when none is configured and
// failing it instead when services are required (CI).
func testAzureEndpoint(t *testing.T) string {
	t.Helper()
	required := os.Getenv("CI") != "" || os.Getenv("SLUICE_REQUIRE_SERVICES") == "1"
	endpoint := os.Getenv("SLUICE_TEST_AZURE_ENDPOINT")
	if endpoint == "" {
		msg := "SLUICE_TEST_AZURE_ENDPOINT is not set; start Azurite with deploy/dev/services.sh and source its services.env"
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg + " (set SLUICE_REQUIRE_SERVICES=1 to fail instead of skipping)")
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		t.Fatalf("SLUICE_TEST_AZURE_ENDPOINT=%q is not a URL", endpoint)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		msg := fmt.Sprintf("Azure blob service not reachable at %s (%v); start it with deploy/dev/services.sh", endpoint, err)
		if required {
			t.Fatal(msg)
		}
		t.Skip(msg + " (set SLUICE_REQUIRE_SERVICES=1 to fail instead of skipping)")
	}
	conn.Close()
	return endpoint
}

// testAzureOptions are the store options for the test service: the account
// key is read from AZURITE_ACCOUNT_KEY (Azurite's well-known key if unset).
func testAzureOptions(t *testing.T, endpoint string) blobstore.Options {
	t.Helper()
	if os.Getenv("AZURITE_ACCOUNT_KEY") == "" {
		t.Setenv("AZURITE_ACCOUNT_KEY", azuriteKey)
	}
	opts := blobstore.Options{blobstore.OptEndpoint: endpoint, OptAccountKeyEnv: "AZURITE_ACCOUNT_KEY"}
	if a := os.Getenv("SLUICE_TEST_AZURE_ACCOUNT"); a != "" {
		opts[OptAccount] = a
	}
	return opts
}

var azContainerSeq atomic.Int32

// newTestAzureStore opens a store in a container of its own, created for
// the test and deleted with everything in it when the test ends.
func newTestAzureStore(t *testing.T) blobstore.Store {
	t.Helper()
	endpoint := testAzureEndpoint(t)
	ctx := context.Background()
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	name := fmt.Sprintf("sluice-%s-%08x-%d", strings.ToLower(strings.ReplaceAll(storetest.RunID, ".", "")), h.Sum32(), azContainerSeq.Add(1))
	st, err := blobstore.Open(ctx, "azblob://"+name+"/some/prefix", testAzureOptions(t, endpoint))
	if err != nil {
		t.Fatal(err)
	}
	az := st.(*azStore)
	if err := az.createContainer(ctx); err != nil {
		t.Fatalf("create container %s at %s: %v", name, endpoint, err)
	}
	t.Cleanup(func() {
		if _, err := az.client.DeleteContainer(ctx, name, nil); err != nil {
			t.Logf("cleanup: delete container %s: %v", name, err)
		}
	})
	return st
}

func TestAzureConformance(t *testing.T) {
	testAzureEndpoint(t)
	storetest.Run(t, newTestAzureStore)
}

func TestAzureOpenOptions(t *testing.T) {
	t.Setenv("SLUICE_TEST_AZ_KEY", azuriteKey)
	os.Unsetenv("SLUICE_TEST_AZ_UNSET")
	cases := []struct {
		url  string
		opts blobstore.Options
		want string // substring of the error; "" for success
	}{
		{"azblob://cont/p", blobstore.Options{OptAccount: "acct", OptAccountKeyEnv: "SLUICE_TEST_AZ_KEY"}, ""},
		{"azblob://cont", blobstore.Options{blobstore.OptEndpoint: "http://127.0.0.1:10000/devstoreaccount1", OptAccountKeyEnv: "SLUICE_TEST_AZ_KEY"}, ""},
		{"azblob://cont", blobstore.Options{OptAccount: "acct", OptAccountKeyEnv: "SLUICE_TEST_AZ_UNSET"}, "SLUICE_TEST_AZ_UNSET"},
		{"azblob://cont", blobstore.Options{OptConnectionStringEnv: "SLUICE_TEST_AZ_UNSET"}, "SLUICE_TEST_AZ_UNSET"},
		{"azblob://cont", blobstore.Options{OptAccount: "acct", "account_key": "x"}, `no option "account_key"`},
		{"azblob://cont", blobstore.Options{OptAccountKeyEnv: "SLUICE_TEST_AZ_KEY"}, "storage account"},
		{"azblob://cont", blobstore.Options{OptConnectionStringEnv: "SLUICE_TEST_AZ_KEY", OptAccount: "a"}, "without"},
		{"azblob://cont", blobstore.Options{OptAccount: "acct", blobstore.OptEndpoint: "ftp://x"}, "endpoint"},
		{"azblob://Bad_Name", blobstore.Options{OptAccount: "acct"}, "container name"},
		{"azblob:///p", blobstore.Options{OptAccount: "acct"}, "missing container"},
		{"azblob://user:pw@cont", blobstore.Options{OptAccount: "acct"}, "credentials in the URL"},
		{"azblob://cont?sig=x", blobstore.Options{OptAccount: "acct"}, "no query"},
		{"azblob://cont/a/../b", blobstore.Options{OptAccount: "acct"}, "bad prefix"},
	}
	for _, c := range cases {
		st, err := blobstore.Open(context.Background(), c.url, c.opts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Open(%s, %v): %v", c.url, c.opts, err)
		case c.want != "" && err == nil:
			t.Errorf("Open(%s, %v) succeeded, want an error about %q", c.url, c.opts, c.want)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("Open(%s, %v) = %v, want an error about %q", c.url, c.opts, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), azuriteKey) {
			t.Errorf("Open(%s): error shows the key: %v", c.url, err)
		}
		if st != nil && strings.Contains(st.String(), "acct") {
			t.Errorf("String() = %s names the account", st)
		}
	}
	st, err := blobstore.Open(context.Background(), "azblob://cont/a/b/", blobstore.Options{OptAccount: "acct", OptAccountKeyEnv: "SLUICE_TEST_AZ_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.String(); got != "azblob://cont/a/b" {
		t.Errorf("String() = %q", got)
	}
}

// fakeAzure serves handler's answer to every request and counts requests;
// the SDK's retries are shortened for the test.
func fakeAzure(t *testing.T, handler http.HandlerFunc) (blobstore.Store, *atomic.Int32) {
	t.Helper()
	delay, maxDelay := azRetryDelay, azMaxRetryDelay
	azRetryDelay, azMaxRetryDelay = time.Millisecond, 5*time.Millisecond
	t.Cleanup(func() { azRetryDelay, azMaxRetryDelay = delay, maxDelay })
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("SLUICE_TEST_AZ_KEY", azuriteKey)
	st, err := blobstore.Open(context.Background(), "azblob://cont/prefix", blobstore.Options{
		blobstore.OptEndpoint: srv.URL + "/devstoreaccount1",
		OptAccountKeyEnv:      "SLUICE_TEST_AZ_KEY",
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, &calls
}

func azError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>test</Message></Error>`, code)
}

func TestAzureServerErrorsAreRetriedThenUnreachable(t *testing.T) {
	st, calls := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {
		azError(w, http.StatusServiceUnavailable, "ServerBusy")
	})
	err := st.Put(context.Background(), "k", []byte("x"))
	if !errors.Is(err, blobstore.ErrUnreachable) {
		t.Fatalf("Put against a failing server = %v, want ErrUnreachable", err)
	}
	if n := calls.Load(); n != azMaxRetries+1 {
		t.Fatalf("server saw %d attempts, want %d", n, azMaxRetries+1)
	}
	if !strings.Contains(err.Error(), "azblob put azblob://cont/prefix/k") {
		t.Errorf("error lacks context: %v", err)
	}
	if !strings.Contains(err.Error(), "ServerBusy") {
		t.Errorf("error lost its cause: %v", err)
	}
}

func TestAzureRecoversAfterTransientErrors(t *testing.T) {
	var n atomic.Int32
	st, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			azError(w, http.StatusInternalServerError, "InternalError")
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	if err := st.PutIfAbsent(context.Background(), "k", []byte("x")); err != nil {
		t.Fatalf("PutIfAbsent after two transient failures: %v", err)
	}
}

func TestAzurePutIfAbsentSendsIfNoneMatch(t *testing.T) {
	var got atomic.Value
	st, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("If-None-Match"))
		w.WriteHeader(http.StatusCreated)
	})
	if err := st.PutIfAbsent(context.Background(), "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if v, _ := got.Load().(string); v != "*" {
		t.Fatalf("If-None-Match = %q, want *", v)
	}
	if err := st.Put(context.Background(), "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if v, _ := got.Load().(string); v != "" {
		t.Fatalf("Put sent If-None-Match %q", v)
	}
}

func TestAzureConnectionRefusedIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	delay, maxDelay := azRetryDelay, azMaxRetryDelay
	azRetryDelay, azMaxRetryDelay = time.Millisecond, 5*time.Millisecond
	t.Cleanup(func() { azRetryDelay, azMaxRetryDelay = delay, maxDelay })
	t.Setenv("SLUICE_TEST_AZ_KEY", azuriteKey)
	st, err := blobstore.Open(context.Background(), "azblob://cont", blobstore.Options{blobstore.OptEndpoint: "http://" + addr + "/acct", OptAccountKeyEnv: "SLUICE_TEST_AZ_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Get(context.Background(), "k")
	if !errors.Is(err, blobstore.ErrUnreachable) || errors.Is(err, blobstore.ErrNotFound) {
		t.Fatalf("Get against a closed port = %v, want ErrUnreachable", err)
	}
}

func TestAzureAnswersAreNotRetried(t *testing.T) {
	cases := []struct {
		status int
		code   string
		op     string
		want   error
	}{
		{http.StatusNotFound, "BlobNotFound", "get", blobstore.ErrNotFound},
		{http.StatusConflict, "BlobAlreadyExists", "put-if-absent", blobstore.ErrExists},
		{http.StatusPreconditionFailed, "ConditionNotMet", "put-if-absent", blobstore.ErrExists},
		{http.StatusForbidden, "AuthenticationFailed", "get", nil},
		{http.StatusNotFound, "ContainerNotFound", "get", nil},
		{http.StatusNotFound, "ContainerNotFound", "put-if-absent", nil},
		{http.StatusConflict, "LeaseIdMissing", "put-if-absent", nil},
	}
	for _, c := range cases {
		st, calls := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) { azError(w, c.status, c.code) })
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

func TestAzureShortBody(t *testing.T) {
	// The server announces 100 bytes, sends 40 and drops the connection.
	st, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(strings.Repeat("x", 40)))
	})
	_, err := blobstore.ReadAll(context.Background(), st, "k")
	if !errors.Is(err, blobstore.ErrShortRead) {
		t.Fatalf("ReadAll of a truncated body = %v, want ErrShortRead", err)
	}
}

func TestAzureDeleteMissingIsFine(t *testing.T) {
	st, _ := fakeAzure(t, func(w http.ResponseWriter, r *http.Request) { azError(w, http.StatusNotFound, "BlobNotFound") })
	if err := st.Delete(context.Background(), "k"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
}
