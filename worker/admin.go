package main

import (
	"container/list"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// Defaults of the admin endpoint.
const (
	defaultAdminAddr  = "127.0.0.1:9464"
	defaultAdminRate  = 20 // requests per second per client
	defaultAdminBurst = 40
	// minAdminTokenLen is the shortest bearer token the worker accepts.
	minAdminTokenLen = 16
	// maxAdminClients bounds the clients the rate limiter remembers, so a
	// flood from ever-new addresses costs a bounded amount of memory.
	maxAdminClients = 4096
)

// adminConfig is the admin endpoint's part of the command line. Secrets are
// references only: the name of an environment variable or a file path.
type adminConfig struct {
	Addr      string
	TokenEnv  string
	TokenFile string
	TLSCert   string
	TLSKey    string
	Rate      float64
	Burst     int
}

// bind registers the --admin-* flags on fs, each with an environment fallback.
func (c *adminConfig) bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.Addr, "admin-addr", envOr("SLUICE_ADMIN_ADDR", defaultAdminAddr), "address of the /livez, /readyz and /metrics endpoint; empty disables it; a non-loopback address needs a token and TLS (env SLUICE_ADMIN_ADDR)")
	fs.StringVar(&c.TokenEnv, "admin-token-env", envOr("SLUICE_ADMIN_TOKEN_ENV", ""), "name of the environment variable holding the bearer token /metrics requires (env SLUICE_ADMIN_TOKEN_ENV)")
	fs.StringVar(&c.TokenFile, "admin-token-file", envOr("SLUICE_ADMIN_TOKEN_FILE", ""), "file holding the bearer token /metrics requires (env SLUICE_ADMIN_TOKEN_FILE)")
	fs.StringVar(&c.TLSCert, "admin-tls-cert", envOr("SLUICE_ADMIN_TLS_CERT", ""), "PEM certificate (chain) the admin endpoint serves TLS with (env SLUICE_ADMIN_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "admin-tls-key", envOr("SLUICE_ADMIN_TLS_KEY", ""), "PEM private key of --admin-tls-cert (env SLUICE_ADMIN_TLS_KEY)")
	fs.Float64Var(&c.Rate, "admin-rate-limit", defaultAdminRate, "admin requests per second allowed to each client address")
	fs.IntVar(&c.Burst, "admin-rate-burst", defaultAdminBurst, "admin requests a client address may make at once before --admin-rate-limit applies")
}

// adminSettings is an adminConfig checked and with its references resolved.
type adminSettings struct {
	addr  string
	token []byte      // nil: no route asks for a token
	tls   *tls.Config // nil: plain HTTP
	rate  rate.Limit
	burst int
	// pprof serves /debug/pprof/profile and /debug/pprof/heap (protected
	// like /metrics); off unless SLUICE_ADMIN_PPROF=1.
	pprof bool
}

// resolve checks the configuration and reads the token and the certificate.
// A non-loopback address without a token reference and TLS is refused with
// SLUICE-E-ADMIN-UNPROTECTED naming what is missing. An empty address
// disables the endpoint and is not checked further.
func (c adminConfig) resolve() (adminSettings, error) {
	s := adminSettings{addr: c.Addr, rate: rate.Limit(c.Rate), burst: c.Burst, pprof: os.Getenv("SLUICE_ADMIN_PPROF") == "1"}
	if c.Addr == "" {
		return s, nil
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return s, errcode.Wrap(errcode.Usage, err, "--admin-addr %q is not host:port", c.Addr)
	}
	if c.TokenEnv != "" && c.TokenFile != "" {
		return s, errcode.New(errcode.Usage, "give --admin-token-env or --admin-token-file, not both")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return s, errcode.New(errcode.Usage, "--admin-tls-cert and --admin-tls-key go together")
	}
	if !(c.Rate > 0) || math.IsInf(c.Rate, 0) || c.Burst < 1 {
		return s, errcode.New(errcode.Usage, "--admin-rate-limit must be a positive number and --admin-rate-burst at least 1")
	}
	if !isLoopbackHost(host) {
		var missing []string
		if c.TokenEnv == "" && c.TokenFile == "" {
			missing = append(missing, "a bearer token reference (--admin-token-env VAR or --admin-token-file PATH)")
		}
		if c.TLSCert == "" {
			missing = append(missing, "TLS (--admin-tls-cert and --admin-tls-key)")
		}
		if len(missing) > 0 {
			return s, errcode.New(errcode.AdminUnprotected, "--admin-addr %s is not a loopback address and lacks %s", c.Addr, strings.Join(missing, " and "))
		}
	}
	if s.token, err = c.readToken(); err != nil {
		return s, err
	}
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return s, errcode.Wrap(errcode.ConfigInvalid, err, "admin TLS certificate %s / key %s", c.TLSCert, c.TLSKey)
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return s, nil
}

// readToken resolves the token reference; nil when there is none. Messages
// name the reference, never the value.
func (c adminConfig) readToken() ([]byte, error) {
	var tok string
	switch {
	case c.TokenEnv != "":
		v, ok := os.LookupEnv(c.TokenEnv)
		if !ok {
			return nil, errcode.New(errcode.SecretUnresolved, "environment variable %s (--admin-token-env) is not set", c.TokenEnv)
		}
		tok = strings.TrimSpace(v)
	case c.TokenFile != "":
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, errcode.Wrap(errcode.SecretUnresolved, err, "admin token file %s", c.TokenFile)
		}
		tok = strings.TrimSpace(string(b))
	default:
		return nil, nil
	}
	if len(tok) < minAdminTokenLen {
		return nil, errcode.New(errcode.AdminTokenWeak, "the admin token from %s has %d characters; at least %d are required", c.tokenRef(), len(tok), minAdminTokenLen)
	}
	return []byte(tok), nil
}

func (c adminConfig) tokenRef() string {
	if c.TokenEnv != "" {
		return "$" + c.TokenEnv
	}
	return c.TokenFile
}

// isLoopbackHost reports whether a listen host stays on this machine. An
// empty host means every interface; a host name other than localhost is
// treated as reachable from the network.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readinessProbe answers /readyz.
type readinessProbe interface {
	ready(ctx context.Context) error
}

// readiness answers /readyz: the worker has started polling and Temporal answers.
type readiness struct {
	client  client.Client
	started atomic.Bool
}

func (r *readiness) ready(ctx context.Context) error {
	if !r.started.Load() {
		return errors.New("worker not polling yet")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := r.client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	return nil
}

// adminRoute is one path of the admin endpoint.
type adminRoute struct {
	handler http.Handler
	// protected routes need the bearer token when one is configured.
	protected bool
}

// adminHandler is the whole admin endpoint: rate limit first, then the
// token where a route needs it, then the route; every answer is counted in
// sluice_admin_requests_total under a path from a fixed set.
type adminHandler struct {
	routes  map[string]adminRoute
	limiter *clientLimiter
	digest  [sha256.Size]byte // of the token; meaningful only when hasToken
	hasTok  bool
	tel     *telemetry.Telemetry
}

func newAdminHandler(s adminSettings, probe readinessProbe, tel *telemetry.Telemetry) *adminHandler {
	h := &adminHandler{
		limiter: newClientLimiter(s.rate, s.burst, maxAdminClients),
		tel:     tel,
	}
	if s.token != nil {
		h.digest, h.hasTok = sha256.Sum256(s.token), true
	}
	tel.ObserveAdminClients(h.limiter.len)
	h.routes = map[string]adminRoute{
		"/livez": {handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ok\n"))
		})},
		"/readyz": {handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if err := probe.ready(req.Context()); err != nil {
				// /readyz is open even where /metrics needs a token, so the
				// cause is told only on an endpoint without a token.
				msg := "not ready"
				if !h.hasTok {
					msg += ": " + err.Error()
				}
				http.Error(w, msg, http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})},
		"/metrics": {handler: tel.Handler(), protected: true},
		"/status": {handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"runs": health.Views(tel.RunStatuses())})
		}), protected: true},
	}
	if s.pprof {
		// A CPU profile of the worker (?seconds=N) and its heap, for
		// measuring; off by default.
		h.routes["/debug/pprof/profile"] = adminRoute{handler: http.HandlerFunc(pprof.Profile), protected: true}
		h.routes["/debug/pprof/heap"] = adminRoute{handler: pprof.Handler("heap"), protected: true}
	}
	return h
}

func (h *adminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route, known := h.routes[r.URL.Path]
	label := r.URL.Path
	if !known {
		label = "other"
	}
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	defer func() { h.tel.AdminRequest(label, rec.code) }()

	if ok, wait := h.limiter.allow(clientKey(r.RemoteAddr)); !ok {
		rec.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		http.Error(rec, "too many requests", http.StatusTooManyRequests)
		return
	}
	switch {
	case !known:
		http.NotFound(rec, r)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		rec.Header().Set("Allow", "GET, HEAD")
		http.Error(rec, "method not allowed", http.StatusMethodNotAllowed)
	case route.protected && h.hasTok && !h.authorized(r):
		rec.Header().Set("WWW-Authenticate", `Bearer realm="sluice-worker"`)
		http.Error(rec, "unauthorized", http.StatusUnauthorized)
	default:
		route.handler.ServeHTTP(rec, r)
	}
}

// authorized checks the request's bearer token in constant time: both sides
// are hashed first, so neither the content nor the length of the expected
// token shows in the time taken.
func (h *adminHandler) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(got[:], h.digest[:]) == 1
}

// statusRecorder remembers the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wroteHeader {
		s.code, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// clientKey is the rate limiter's key for a remote address: the IPv4
// address, or the /64 an IPv6 address lies in (one host usually owns a whole
// /64, so keying on the full address would let it rotate at will).
// X-Forwarded-For is not trusted.
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// clientLimiter keeps one token bucket per client, at most max of them.
// A bucket left alone for burst/rate seconds is full again, so forgetting it
// changes nothing: idle clients are dropped as requests come in. When the
// table is at least half full, a client seen for the first time starts with
// one token instead of a full burst, so ever-new addresses buy one request
// each; when it is full, the least recently seen client is forgotten.
type clientLimiter struct {
	rate  rate.Limit
	burst int
	max   int
	idle  time.Duration
	now   func() time.Time

	mu      sync.Mutex
	clients map[string]*list.Element // of *limitedClient
	order   *list.List               // most recently seen first
}

type limitedClient struct {
	key  string
	lim  *rate.Limiter
	seen time.Time
}

func newClientLimiter(r rate.Limit, burst, max int) *clientLimiter {
	return &clientLimiter{
		rate:    r,
		burst:   burst,
		max:     max,
		idle:    time.Duration(float64(burst) / float64(r) * float64(time.Second)),
		now:     time.Now,
		clients: make(map[string]*list.Element),
		order:   list.New(),
	}
}

// allow takes a token from key's bucket, or says how long until one is there.
func (l *clientLimiter) allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for back := l.order.Back(); back != nil && now.Sub(back.Value.(*limitedClient).seen) >= l.idle; back = l.order.Back() {
		l.forget(back)
	}
	var c *limitedClient
	if el, ok := l.clients[key]; ok {
		c = el.Value.(*limitedClient)
		l.order.MoveToFront(el)
	} else {
		if len(l.clients) >= l.max {
			l.forget(l.order.Back())
		}
		c = &limitedClient{key: key, lim: rate.NewLimiter(l.rate, l.burst)}
		if 2*len(l.clients) >= l.max {
			c.lim.AllowN(now, l.burst-1)
		}
		l.clients[key] = l.order.PushFront(c)
	}
	c.seen = now
	if c.lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - c.lim.TokensAt(now)
	return false, time.Duration(missing / float64(l.rate) * float64(time.Second))
}

func (l *clientLimiter) forget(el *list.Element) {
	delete(l.clients, el.Value.(*limitedClient).key)
	l.order.Remove(el)
}

// len returns the number of clients tracked.
func (l *clientLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients)
}

// serveAdmin listens on s.addr and serves the admin endpoint until the
// returned server is closed.
func serveAdmin(s adminSettings, probe readinessProbe, tel *telemetry.Telemetry, logger *slog.Logger) (*http.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, nil, errcode.Wrap(errcode.ConfigInvalid, err, "--admin-addr %s: cannot listen", s.addr)
	}
	// A name that looked local may still have resolved elsewhere.
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && (s.token == nil || s.tls == nil) {
		_ = ln.Close()
		return nil, nil, errcode.New(errcode.AdminUnprotected, "--admin-addr %s is bound to %s, which is not a loopback address, without a token and TLS", s.addr, tcp)
	}
	srv := &http.Server{
		Handler:           newAdminHandler(s, probe, tel),
		TLSConfig:         s.tls,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	go func() {
		var err error
		if s.tls != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin endpoint stopped", "err", err)
		}
	}()
	logger.Info("admin endpoint listening", "addr", ln.Addr().String(), "tls", s.tls != nil, "token", s.token != nil)
	return srv, ln.Addr(), nil
}
