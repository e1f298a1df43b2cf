package s3

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// newRetryer returns the SDK's standard retryer with our attempt count and
// backoff, and without the client-side retry quota (a store that fails for a
// while should still get its full set of attempts on every request).
func newRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = blobstore.RetryAttempts
		o.MaxBackoff = blobstore.RetryMaxBackoff
		o.Backoff = backoff{base: blobstore.RetryBaseBackoff, max: blobstore.RetryMaxBackoff}
		o.RateLimiter = ratelimit.None
	})
}

// backoff doubles from base up to max, with "equal jitter": half the delay is
// fixed, half random, so concurrent clients spread out.
type backoff struct {
	base, max time.Duration
}

// BackoffDelay implements retry.BackoffDelayer; attempt counts from 1.
func (b backoff) BackoffDelay(attempt int, _ error) (time.Duration, error) {
	d := b.max
	if attempt >= 1 && attempt < 31 {
		if v := b.base << (attempt - 1); v > 0 && v < b.max {
			d = v
		}
	}
	half := d / 2
	return half + rand.N(half+1), nil
}

// newHTTPClient bounds how long a dead server can hold a request: dialing
// and waiting for response headers time out (and are then retried).
func newHTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = blobstore.DialTimeout }).
		WithTransportOptions(func(t *http.Transport) { t.ResponseHeaderTimeout = blobstore.HeaderTimeout })
}

// isUnreachable reports failures of the network or of the server itself, as
// opposed to answers about the request (not found, denied, bad request).
func isUnreachable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if code := httpStatus(err); code != 0 {
		return code == http.StatusTooManyRequests || (code >= 500 && code != http.StatusNotImplemented)
	}
	switch errorCode(err) {
	case "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "ServiceUnavailable", "InternalError":
		return true
	}
	return blobstore.NetworkFailure(err)
}
