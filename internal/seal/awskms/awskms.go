// Package awskms wraps chain data keys with an AWS KMS key (envelope
// encryption): the data key is sent to KMS Encrypt, and the store keeps the
// ciphertext KMS returns, never the data key. A reader sends that ciphertext
// to KMS Decrypt with its own AWS credentials, so who may read a chain is
// whoever the key policy lets decrypt.
//
// Each wrapping is bound to its envelope by the encryption context
// {"sluice-data-key": <data key ID>}: a ciphertext moved to another
// envelope does not decrypt. Decrypt names the KMS key the envelope
// records, so a ciphertext of one key put beside another key's ID is
// refused too.
//
// Credentials and the region come from the standard AWS configuration chain
// (environment, shared files, SSO, web identity, instance roles). The
// endpoint is the SDK's for KMS unless Options.Endpoint or the environment
// (AWS_ENDPOINT_URL_KMS, AWS_ENDPOINT_URL) names another, such as a KMS
// emulator.
package awskms

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/smithy-go"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

// DefaultRegion is the region used when neither Options nor the AWS
// configuration chain names one.
const DefaultRegion = "us-east-1"

// ContextKey is the encryption context key under which a wrapping records
// the ID of the data key it wraps.
const ContextKey = "sluice-data-key"

// Bounds on one Wrap or Unwrap, so a KMS that does not answer surfaces as
// errcode.KeyUnavailable within seconds and the caller's own retries (a
// broker's, an activity's) take over.
const (
	// callTimeout bounds one Wrap or Unwrap, retries included.
	callTimeout = 20 * time.Second
	// maxAttempts is how many times one call is sent, the first included.
	maxAttempts = 3
	// maxBackoff caps the pause between two attempts.
	maxBackoff = 2 * time.Second
	// dialTimeout bounds connecting to the endpoint.
	dialTimeout = 5 * time.Second
	// headerTimeout bounds waiting for the answer's headers.
	headerTimeout = 10 * time.Second
)

// Options say which KMS key wraps the data keys and where to reach it.
type Options struct {
	// KeyID names the KMS key: a key ID, a key ARN, an alias name
	// ("alias/…") or an alias ARN. Required.
	KeyID string
	// Region is the key's region; empty takes the AWS configuration
	// chain's (AWS_REGION, the profile), else DefaultRegion.
	Region string
	// Endpoint, when set, is the KMS endpoint's http:// or https:// URL
	// (a KMS emulator, a VPC endpoint). Empty leaves it to the SDK, which
	// honours AWS_ENDPOINT_URL_KMS and AWS_ENDPOINT_URL.
	Endpoint string
}

// Wrapper is a seal.Wrapper that wraps data keys with one AWS KMS key and
// unwraps them with the KMS key each wrapping names. It holds no secret of
// its own: what it may do is what its AWS credentials may do.
type Wrapper struct {
	client   *kms.Client
	keyID    string
	region   string
	endpoint string
}

var _ seal.Wrapper = (*Wrapper)(nil)

// New returns a Wrapper for o. It loads the AWS configuration but does not
// contact KMS: a key that does not exist or may not be used shows at the
// first Wrap or Unwrap.
func New(ctx context.Context, o Options) (*Wrapper, error) {
	if o.KeyID == "" {
		return nil, errcode.New(errcode.KeyRequired, "no AWS KMS key was given (--kms-key)")
	}
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		switch {
		case err != nil:
			// Not echoed: it could hold a password.
			return nil, errcode.New(errcode.ConfigInvalid, "the KMS endpoint does not parse as a URL: give an http:// or https:// URL")
		case u.User != nil:
			return nil, errcode.New(errcode.ConfigInvalid, "KMS endpoint %s: credentials in the URL are not accepted; use the AWS credential chain", u.Redacted())
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return nil, errcode.New(errcode.ConfigInvalid, "KMS endpoint %q: give an http:// or https:// URL", o.Endpoint)
		}
	}
	load := []func(*config.LoadOptions) error{
		config.WithRetryer(newRetryer),
		config.WithHTTPClient(newHTTPClient()),
	}
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "load the AWS configuration for KMS key %s", o.KeyID)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	client := kms.NewFromConfig(cfg, func(ko *kms.Options) {
		if o.Endpoint != "" {
			ko.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	return &Wrapper{client: client, keyID: o.KeyID, region: cfg.Region, endpoint: o.Endpoint}, nil
}

// newRetryer is the SDK's standard retryer, bounded: a few attempts, short
// pauses, and no shared retry quota (which, once drained by an outage,
// would turn later calls' errors into quota errors).
func newRetryer() aws.Retryer {
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = maxAttempts
		so.MaxBackoff = maxBackoff
		so.RateLimiter = ratelimit.None
	})
}

// newHTTPClient bounds how long a dead endpoint can hold one attempt.
func newHTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = dialTimeout }).
		WithTransportOptions(func(t *http.Transport) { t.ResponseHeaderTimeout = headerTimeout })
}

// Kind is seal.KindAWSKMS.
func (w *Wrapper) Kind() string { return seal.KindAWSKMS }

// String names the KMS key by the reference it was given (an ID, ARN or
// alias; none is a secret).
func (w *Wrapper) String() string { return "AWS KMS key " + w.keyID }

// where says which region or endpoint was asked, for errcode.KeyUnavailable
// messages.
func (w *Wrapper) where() string {
	if w.endpoint != "" {
		return "KMS at " + w.endpoint
	}
	return "KMS in " + w.region
}

// encryptionContext binds a wrapping to the data key ID of its envelope.
func encryptionContext(keyID string) map[string]string {
	return map[string]string{ContextKey: keyID}
}

// Wrap encrypts dataKey under the wrapper's KMS key with the envelope's
// keyID as encryption context. The Wrapping records the key's ARN as KMS
// returned it, so Unwrap does not depend on an alias that may move.
func (w *Wrapper) Wrap(ctx context.Context, keyID string, dataKey []byte) (seal.Wrapping, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := w.client.Encrypt(ctx, &kms.EncryptInput{
		KeyId:             aws.String(w.keyID),
		Plaintext:         dataKey,
		EncryptionContext: encryptionContext(keyID),
	})
	if err != nil {
		return seal.Wrapping{}, w.classify(err, "wrap data key %s with %s", keyID, w)
	}
	arn := aws.ToString(out.KeyId)
	if arn == "" || len(out.CiphertextBlob) == 0 {
		return seal.Wrapping{}, errcode.New(errcode.KeyUnavailable, "wrap data key %s with %s: %s answered without a key ID or ciphertext", keyID, w, w.where())
	}
	return seal.Wrapping{Kind: seal.KindAWSKMS, KMSKeyID: arn, Wrapped: out.CiphertextBlob}, nil
}

// Unwrap decrypts w's ciphertext with the KMS key it records and the
// envelope's keyID as encryption context: errcode.KeyWrong when KMS refuses
// (another key, another envelope's ciphertext, changed bytes, a key that is
// disabled, gone or not ours to use), errcode.KeyUnavailable when KMS did
// not answer or failed for a reason retrying can fix.
func (w *Wrapper) Unwrap(ctx context.Context, keyID string, wr seal.Wrapping) ([]byte, error) {
	switch {
	case wr.Kind != seal.KindAWSKMS:
		return nil, errcode.New(errcode.KeyWrong, "data key %s is wrapped by %s, and the key given is %s", keyID, wr.Kind, w)
	case wr.KMSKeyID == "":
		return nil, errcode.New(errcode.ManifestInvalid, "the AWS KMS wrapping of data key %s names no KMS key", keyID)
	case len(wr.Wrapped) == 0:
		return nil, errcode.New(errcode.ManifestInvalid, "the AWS KMS wrapping of data key %s holds no ciphertext", keyID)
	case !keyMayBe(w.keyID, wr.KMSKeyID):
		return nil, errcode.New(errcode.KeyWrong, "data key %s is wrapped by KMS key %s, and the key given is %s", keyID, wr.KMSKeyID, w.keyID)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := w.client.Decrypt(ctx, &kms.DecryptInput{
		KeyId:             aws.String(wr.KMSKeyID),
		CiphertextBlob:    wr.Wrapped,
		EncryptionContext: encryptionContext(keyID),
	})
	if err != nil {
		return nil, w.classify(err, "unwrap data key %s with KMS key %s", keyID, wr.KMSKeyID)
	}
	return out.Plaintext, nil
}

// KMS error codes, by what they mean for the caller. Codes not listed are
// judged by their fault and HTTP status (classify).
var (
	// refusals: KMS answered, and the key or ciphertext will not do.
	refusals = map[string]bool{
		"InvalidCiphertextException": true,
		"IncorrectKeyException":      true,
		"AccessDeniedException":      true,
		"AccessDenied":               true,
		"DisabledException":          true,
		"NotFoundException":          true,
		"KMSInvalidStateException":   true,
		"InvalidKeyUsageException":   true,
		"InvalidArnException":        true,
		"InvalidGrantTokenException": true,
	}
	// transient: retrying (later, or with refreshed credentials) can fix.
	transient = map[string]bool{
		"KMSInternalException":        true,
		"KeyUnavailableException":     true,
		"DependencyTimeoutException":  true,
		"ThrottlingException":         true,
		"Throttling":                  true,
		"LimitExceededException":      true,
		"RequestLimitExceeded":        true,
		"ServiceUnavailable":          true,
		"InternalFailure":             true,
		"RequestTimeout":              true,
		"RequestExpired":              true,
		"ExpiredTokenException":       true,
		"UnrecognizedClientException": true,
		"InvalidSignatureException":   true,
		"IncompleteSignature":         true,
	}
)

// classify codes a KMS call's error: errcode.KeyWrong for KMS's refusals
// (a KMS error code of the client's fault), errcode.KeyUnavailable for
// what retrying or fixing the setup can fix without another key (the
// network, timeouts, throttling, 5xx, credentials the SDK could not get or
// KMS did not recognise, an endpoint that does not speak KMS). A cancelled
// context is returned uncoded: nobody asked for an answer any more.
func (w *Wrapper) classify(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		code := api.ErrorCode()
		switch {
		case refusals[code]:
			return errcode.Wrap(errcode.KeyWrong, err, "%s: KMS refused", what)
		case transient[code]:
			return errcode.Wrap(errcode.KeyUnavailable, err, "%s: %s failed for now", what, w.where())
		}
		if status := httpStatus(err); status == http.StatusTooManyRequests || status >= 500 || api.ErrorFault() == smithy.FaultServer {
			return errcode.Wrap(errcode.KeyUnavailable, err, "%s: %s failed for now", what, w.where())
		}
		return errcode.Wrap(errcode.KeyWrong, err, "%s: KMS refused", what)
	}
	if status := httpStatus(err); status != 0 {
		// An answer that is no KMS error (an HTML page, another service's
		// error): the endpoint is not KMS, or a proxy stands in the way.
		return errcode.Wrap(errcode.KeyUnavailable, err, "%s: %s did not answer as KMS (HTTP %d)", what, w.where(), status)
	}
	if unreachable(err) {
		return errcode.Wrap(errcode.KeyUnavailable, err, "%s: %s did not answer", what, w.where())
	}
	// Anything else (credentials the SDK could not load, an answer it
	// could not read) is about reaching KMS, not about the key.
	return errcode.Wrap(errcode.KeyUnavailable, err, "%s: cannot call %s", what, w.where())
}

// httpStatus is the HTTP status of a KMS answer, 0 when there was none.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// unreachable reports failures of the network or of time.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// keyMayBe reports whether the key the operator gave can be the key ARN a
// wrapping records: the ARN itself, or its key ID. An alias names a key
// only KMS can resolve, so it is left to KMS to judge.
func keyMayBe(given, recorded string) bool {
	switch {
	case given == "" || given == recorded || strings.Contains(given, "alias/"):
		return true
	case strings.HasPrefix(given, "arn:"):
		return false
	}
	return strings.HasSuffix(recorded, ":key/"+given)
}
