package blobstore

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// One retry policy and one set of network bounds for every remote store
// (S3, GCS, Azure): transient failures are retried with exponential
// backoff, and what still fails after the last attempt is ErrUnreachable.
// Each store package applies them through its own SDK.
const (
	// RetryAttempts is how many times a request is tried in all.
	RetryAttempts = 5
	// RetryBaseBackoff is the wait before the first retry; it doubles up to
	// RetryMaxBackoff.
	RetryBaseBackoff = 100 * time.Millisecond
	RetryMaxBackoff  = 2 * time.Second
	// DialTimeout and HeaderTimeout bound how long a dead server can hold
	// one attempt: dialing, and waiting for a response's headers.
	DialTimeout   = 10 * time.Second
	HeaderTimeout = 60 * time.Second
)

// BoundedTransport is Go's default transport with bounded dials
// (DialTimeout) and waits for response headers (headerTimeout), for a
// store's SDK to send its requests through.
func BoundedTransport(headerTimeout time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.ResponseHeaderTimeout = headerTimeout
	return t
}

// NetworkFailure reports an error of the network under a request (refused
// or reset connections, timeouts, a body cut short), as opposed to an
// answer of the server or the caller's own cancellation. Stores classify
// the server's answers themselves and call it for the rest.
func NetworkFailure(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}
