package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testenv"
)

const testToken = "s3cret-admin-token-for-tests-0123456789"

// fakeProbe stands in for Temporal in /readyz.
type fakeProbe struct{ err error }

func (f fakeProbe) ready(context.Context) error { return f.err }

func newTelemetry(t *testing.T) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.New(telemetry.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

func defaults(addr string) adminConfig {
	return adminConfig{Addr: addr, Rate: defaultAdminRate, Burst: defaultAdminBurst}
}

func TestNonLoopbackBindNeedsTokenAndTLS(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath, _ := testenv.SelfSignedCert(t, dir)
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withToken := func(c adminConfig) adminConfig { c.TokenFile = tokenPath; return c }
	withTLS := func(c adminConfig) adminConfig { c.TLSCert, c.TLSKey = certPath, keyPath; return c }

	for _, tc := range []struct {
		name    string
		cfg     adminConfig
		missing []string // substrings the refusal must name
		absent  []string // substrings it must not name
	}{
		{"all interfaces, nothing", defaults("0.0.0.0:9464"), []string{"token", "TLS"}, nil},
		{"empty host, nothing", defaults(":9464"), []string{"token", "TLS"}, nil},
		{"IPv6 any, nothing", defaults("[::]:9464"), []string{"token", "TLS"}, nil},
		{"host name, nothing", defaults("worker.example:9464"), []string{"token", "TLS"}, nil},
		{"token only", withToken(defaults("0.0.0.0:9464")), []string{"TLS"}, []string{"token"}},
		{"TLS only", withTLS(defaults("10.1.2.3:9464")), []string{"token"}, []string{"TLS ("}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.resolve()
			if !errcode.Is(err, errcode.AdminUnprotected) {
				t.Fatalf("resolve() = %v, want %s", err, errcode.AdminUnprotected)
			}
			if got := errcode.ExitStatus(err); got != errcode.ExitUsage {
				t.Fatalf("exit status %d, want %d", got, errcode.ExitUsage)
			}
			for _, s := range tc.missing {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("refusal %q does not name %q", err, s)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(err.Error(), s) {
					t.Errorf("refusal %q names %q, which was given", err, s)
				}
			}
		})
	}

	t.Run("token and TLS", func(t *testing.T) {
		s, err := withTLS(withToken(defaults("0.0.0.0:9464"))).resolve()
		if err != nil {
			t.Fatal(err)
		}
		if string(s.token) != testToken || s.tls == nil {
			t.Fatalf("token or TLS not resolved: token=%v tls=%v", s.token != nil, s.tls != nil)
		}
	})
	for _, addr := range []string{"127.0.0.1:9464", "localhost:9464", "[::1]:9464", "127.0.0.2:0", ""} {
		if _, err := defaults(addr).resolve(); err != nil {
			t.Errorf("loopback %q refused: %v", addr, err)
		}
	}
}

func TestAdminConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_TEST_ADMIN_TOKEN", testToken)
	for _, tc := range []struct {
		name string
		cfg  adminConfig
		code errcode.Code
	}{
		{"bad address", defaults("9464"), errcode.Usage},
		{"both references", adminConfig{Addr: "127.0.0.1:0", TokenEnv: "SLUICE_TEST_ADMIN_TOKEN", TokenFile: short, Rate: 1, Burst: 1}, errcode.Usage},
		{"cert without key", adminConfig{Addr: "127.0.0.1:0", TLSCert: "x.crt", Rate: 1, Burst: 1}, errcode.Usage},
		{"zero rate", adminConfig{Addr: "127.0.0.1:0", Burst: 1}, errcode.Usage},
		{"unset variable", adminConfig{Addr: "127.0.0.1:0", TokenEnv: "SLUICE_TEST_ADMIN_TOKEN_UNSET", Rate: 1, Burst: 1}, errcode.SecretUnresolved},
		{"missing file", adminConfig{Addr: "127.0.0.1:0", TokenFile: filepath.Join(dir, "nope"), Rate: 1, Burst: 1}, errcode.SecretUnresolved},
		{"short token", adminConfig{Addr: "127.0.0.1:0", TokenFile: short, Rate: 1, Burst: 1}, errcode.AdminTokenWeak},
		{"unreadable certificate", adminConfig{Addr: "127.0.0.1:0", TLSCert: short, TLSKey: short, Rate: 1, Burst: 1}, errcode.ConfigInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.resolve()
			if !errcode.Is(err, tc.code) {
				t.Fatalf("resolve() = %v, want %s", err, tc.code)
			}
			if err != nil && strings.Contains(err.Error(), testToken) {
				t.Fatalf("the error carries the token: %v", err)
			}
		})
	}
	s, err := adminConfig{Addr: "127.0.0.1:0", TokenEnv: "SLUICE_TEST_ADMIN_TOKEN", Rate: 1, Burst: 1}.resolve()
	if err != nil || string(s.token) != testToken {
		t.Fatalf("token from the environment not resolved: %v", err)
	}
}

// TestRunRefusesUnprotectedBind checks the whole command: refused before it
// ever dials Temporal, with exit status 2.
func TestRunRefusesUnprotectedBind(t *testing.T) {
	if got := run([]string{"--admin-addr", "0.0.0.0:0", "--temporal-address", "127.0.0.1:1"}); got != errcode.ExitUsage {
		t.Fatalf("run exit status %d, want %d", got, errcode.ExitUsage)
	}
}

// protectedServer serves a token- and TLS-protected admin endpoint, resolved
// from a non-loopback configuration but listening on 127.0.0.1.
func protectedServer(t *testing.T, cfg adminConfig, probe readinessProbe) (base string, client *http.Client, tel *telemetry.Telemetry) {
	t.Helper()
	dir := t.TempDir()
	certPath, keyPath, pool := testenv.SelfSignedCert(t, dir)
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Addr, cfg.TokenFile, cfg.TLSCert, cfg.TLSKey = "0.0.0.0:9464", tokenPath, certPath, keyPath
	s, err := cfg.resolve()
	if err != nil {
		t.Fatal(err)
	}
	s.addr = "127.0.0.1:0"
	tel = newTelemetry(t)
	srv, addr, err := serveAdmin(s, probe, tel, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(client.CloseIdleConnections)
	return "https://" + addr.String(), client, tel
}

func get(t *testing.T, c *http.Client, url, token string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func TestProtectedMetrics(t *testing.T) {
	base, c, tel := protectedServer(t, defaults(""), fakeProbe{})
	// What the Temporal SDK records through the client's handler.
	tel.TemporalMetricsHandler().WithTags(map[string]string{"namespace": "default"}).Counter("temporal_request").Inc(1)

	if code, h, _ := get(t, c, base+"/metrics", ""); code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("/metrics without a token: %d (WWW-Authenticate %q), want 401", code, h.Get("WWW-Authenticate"))
	}
	if code, _, _ := get(t, c, base+"/metrics", testToken+"x"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong token: %d, want 401", code)
	}
	if code, _, _ := get(t, c, base+"/metrics", testToken[:len(testToken)-1]); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a truncated token: %d, want 401", code)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.SetBasicAuth("admin", testToken)
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics with basic auth: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	code, _, body := get(t, c, base+"/metrics", testToken)
	if code != http.StatusOK {
		t.Fatalf("/metrics with the token: %d, want 200", code)
	}
	for _, want := range []string{
		`sluice_worker_info{go_version="`,
		`temporal_request_total{namespace="default"} 1`,
		`sluice_admin_requests_total{code="401",path="/metrics"} 4`,
		telemetry.MetricAdminRateLimitClients + " 1",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, testToken) {
		t.Error("/metrics carries the token")
	}

	for _, path := range []string{"/livez", "/readyz"} {
		if code, _, _ := get(t, c, base+path, ""); code != http.StatusOK {
			t.Errorf("%s without a token: %d, want 200", path, code)
		}
	}
	if code, _, _ := get(t, c, base+"/nope", testToken); code != http.StatusNotFound {
		t.Errorf("unknown path: %d, want 404", code)
	}

	// Plain HTTP to the TLS port is not served.
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + strings.TrimPrefix(base, "https://") + "/livez"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served on the TLS endpoint")
		}
	}
}

func TestReadyzReportsProbe(t *testing.T) {
	base, c, _ := protectedServer(t, defaults(""), fakeProbe{err: errors.New("worker not polling yet")})
	code, _, body := get(t, c, base+"/readyz", "")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with a failing probe: %d, want 503", code)
	}
	if strings.Contains(body, "polling") {
		t.Errorf("/readyz on a token-protected endpoint tells the cause: %q", body)
	}

	h := newAdminHandler(adminSettings{rate: 100, burst: 100}, fakeProbe{err: errors.New("worker not polling yet")}, newTelemetry(t))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "polling") {
		t.Fatalf("/readyz on loopback: %d %q, want 503 with the cause", rec.Code, rec.Body.String())
	}
}

// TestFloodIsLimitedBeforeAuth floods /metrics over the real listener
// without a token: once the burst is spent the answers are 429 with
// Retry-After, not 401, and /livez from the same client is limited too.
func TestFloodIsLimitedBeforeAuth(t *testing.T) {
	base, c, _ := protectedServer(t, defaults(""), fakeProbe{})
	counts := map[int]int{}
	retryAfter := ""
	for range 3 * defaultAdminBurst {
		code, h, _ := get(t, c, base+"/metrics", "")
		counts[code]++
		if code == http.StatusTooManyRequests && retryAfter == "" {
			retryAfter = h.Get("Retry-After")
		}
	}
	if counts[http.StatusTooManyRequests] == 0 {
		t.Fatalf("no 429 in a flood: %v", counts)
	}
	if counts[http.StatusUnauthorized] < defaultAdminBurst || counts[http.StatusOK] != 0 {
		t.Fatalf("answers %v: want the burst answered 401, then 429", counts)
	}
	if n, err := strconv.Atoi(retryAfter); err != nil || n < 1 {
		t.Fatalf("Retry-After %q, want a positive number of seconds", retryAfter)
	}
	if code, _, _ := get(t, c, base+"/livez", ""); code != http.StatusTooManyRequests {
		t.Fatalf("/livez from the flooding client: %d, want 429", code)
	}
}

// TestLimiterPerClient drives the handler with a fake clock: one client's
// flood does not limit another, and buckets refill at the configured rate.
func TestLimiterPerClient(t *testing.T) {
	h := newAdminHandler(adminSettings{rate: 20, burst: 40}, fakeProbe{}, newTelemetry(t))
	now := time.Unix(1_700_000_000, 0)
	h.limiter.now = func() time.Time { return now }
	hit := func(remote string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/livez", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 40 {
		if rec := hit("192.0.2.1:1000"); rec.Code != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i, rec.Code)
		}
	}
	rec := hit("192.0.2.1:1001")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("request past the burst: %d Retry-After %q, want 429 and 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := hit("192.0.2.2:1000"); rec.Code != http.StatusOK {
		t.Fatalf("another client was limited by the first one's flood: %d", rec.Code)
	}
	now = now.Add(100 * time.Millisecond) // two tokens at 20/s
	for i, want := range []int{200, 200, 429} {
		if rec := hit("192.0.2.1:1000"); rec.Code != want {
			t.Fatalf("after 100ms, request %d: %d, want %d", i, rec.Code, want)
		}
	}
	// Addresses of one IPv6 /64 share a bucket.
	for i := range 40 {
		hit(fmt.Sprintf("[2001:db8::%x]:443", i+1))
	}
	if rec := hit("[2001:db8::ffff]:443"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a fresh address in a flooding /64: %d, want 429", rec.Code)
	}
}

// TestLimiterBoundsClients rotates through many addresses: the table never
// outgrows its bound, new addresses under pressure get a single request, and
// idle clients are forgotten.
func TestLimiterBoundsClients(t *testing.T) {
	const max = 64
	l := newClientLimiter(20, 40, max)
	now := time.Unix(1_700_000_000, 0)
	l.now = func() time.Time { return now }
	for i := range 10 * max {
		key := fmt.Sprintf("198.51.%d.%d", i/256, i%256)
		if ok, _ := l.allow(key); !ok {
			t.Fatalf("first request of %s refused", key)
		}
		if i >= max/2 {
			if ok, _ := l.allow(key); ok {
				t.Fatalf("%s, seen under pressure, got more than one request", key)
			}
		}
		if n := l.len(); n > max {
			t.Fatalf("%d clients tracked, bound is %d", n, max)
		}
	}
	now = now.Add(l.idle)
	l.allow("203.0.113.9")
	if n := l.len(); n != 1 {
		t.Fatalf("%d clients tracked after everyone went idle, want 1", n)
	}
	// Without pressure a newcomer gets the full burst again.
	for i := range 40 {
		if ok, _ := l.allow("203.0.113.10"); !ok {
			t.Fatalf("request %d of a newcomer without pressure refused", i)
		}
	}
}

func TestLimiterConcurrent(t *testing.T) {
	l := newClientLimiter(1000, 10, 128)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				l.allow(fmt.Sprintf("10.%d.%d.%d", g, i/256, i%256))
			}
		}()
	}
	wg.Wait()
	if n := l.len(); n > 128 {
		t.Fatalf("%d clients tracked, bound is 128", n)
	}
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:5555":            "192.0.2.7",
		"[::ffff:192.0.2.7]:5555":   "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:80": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::]:81":  "2001:db8:1:2::/64",
		"not-an-address":            "not-an-address",
	} {
		if got := clientKey(in); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStatusAndRunHealth: /status needs the token like /metrics, lists every
// run with its verdict, and /metrics carries the one-hot health series and
// the stall cause only while a run is stalled.
func TestStatusAndRunHealth(t *testing.T) {
	base, c, tel := protectedServer(t, defaults(""), fakeProbe{})
	tr := health.NewTracker(nil, nil)
	if err := tel.TrackRuns(tr); err != nil {
		t.Fatal(err)
	}
	tr.Polled(health.Key{Role: "broker", Name: "quiet"}, false)
	tr.Delivered(health.Key{Role: "producer", Name: "file:///chain"})
	tr.Failed(health.Key{Role: "broker", Name: "refused"}, health.CauseTargetRefusing, "permission denied")
	tr.Polled(health.Key{Role: "broker", Name: "refused"}, true)

	if code, _, _ := get(t, c, base+"/status", ""); code != http.StatusUnauthorized {
		t.Fatalf("/status without a token: %d, want 401", code)
	}
	code, _, body := get(t, c, base+"/status", testToken)
	if code != http.StatusOK {
		t.Fatalf("/status: %d", code)
	}
	var st struct {
		Runs []health.StatusView `json:"runs"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/status is not JSON: %v\n%s", err, body)
	}
	got := map[string]string{}
	for _, r := range st.Runs {
		got[r.Role+"/"+r.Name] = r.Verdict + "/" + r.Cause
		// Durations are in seconds, and the keys say so.
		want := health.ThresholdsView{PollStallSeconds: 120, DeliveryStallSeconds: 600, NotRunningSeconds: 600}
		if r.Thresholds != want {
			t.Errorf("/status %s/%s thresholds = %+v, want the defaults in seconds %+v\n%s", r.Role, r.Name, r.Thresholds, want, body)
		}
	}
	if !strings.Contains(body, `"thresholds":{"poll_stall_seconds":120,"delivery_stall_seconds":600,"not_running_seconds":600}`) {
		t.Errorf("/status does not give the thresholds in seconds:\n%s", body)
	}
	want := map[string]string{"broker/quiet": "idle/", "producer/file:///chain": "healthy/", "broker/refused": "stalled/target_refusing_apply"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("/status %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}

	_, _, metrics := get(t, c, base+"/metrics", testToken)
	for _, line := range []string{
		`sluice_run_health{name="quiet",role="broker",verdict="idle"} 1`,
		`sluice_run_health{name="quiet",role="broker",verdict="stalled"} 0`,
		`sluice_run_stall_cause{cause="target_refusing_apply",name="refused",role="broker"} 1`,
	} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if strings.Contains(metrics, `sluice_run_stall_cause{cause="target_refusing_apply",name="quiet"`) {
		t.Error("a run that is not stalled has a stall-cause series")
	}
}

// TestConfigFileReachesTheWorker: a [worker] table in --config takes effect
// (here an unprotected non-loopback bind, refused before anything starts).
func TestConfigFileReachesTheWorker(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sluice.toml")
	if err := os.WriteFile(p, []byte("[worker]\nadmin_addr = \"0.0.0.0:0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_ADMIN_ADDR", "")
	if code := run([]string{"--config", p}); code != errcode.ExitUsage {
		t.Fatalf("want exit 2 for the unprotected bind the file asks for, got %d", code)
	}
}
