package blobstore

import (
	"net"
	"net/http"
	"time"
)

// One retry policy and one set of network bounds for every remote store
// (S3, GCS, Azure): transient failures are retried with exponential
// backoff, and what still fails after the last attempt is ErrUnreachable.
const (
	storeMaxAttempts = 5
	storeBaseBackoff = 100 * time.Millisecond
	storeMaxBackoff  = 2 * time.Second
	// storeDialTimeout and storeHeaderTimeout bound how long a dead server
	// can hold one attempt: dialing, and waiting for a response's headers.
	storeDialTimeout   = 10 * time.Second
	storeHeaderTimeout = 60 * time.Second
)

// boundedTransport is Go's default transport with bounded dials and waits
// for response headers (headerTimeout), under a store's SDK.
func boundedTransport(headerTimeout time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: storeDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.ResponseHeaderTimeout = headerTimeout
	return t
}
