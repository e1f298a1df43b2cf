package seal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/errcode"
)

// EnvelopeFormatVersion is the version of the envelope object this sluice
// writes and reads.
const EnvelopeFormatVersion = 1

// Wrapping kinds: which kind of Wrapper made a Wrapping.
const (
	KindPassphrase = "passphrase"
	KindAge        = "age"
	KindAWSKMS     = "aws-kms"
)

// Envelope is a data key as the store holds it: its ID and algorithm, and
// the key wrapped by one Wrapper. It is stored at keys/<id>.json; `sluice
// backup rekey` replaces the wrapping, never the key.
type Envelope struct {
	FormatVersion int       `json:"format_version"`
	KeyID         string    `json:"key_id"`
	Algorithm     string    `json:"algorithm"`
	CreatedAt     time.Time `json:"created_at"`
	Wrap          Wrapping  `json:"wrap"`
}

// Wrapping is a data key wrapped by one Wrapper, with the non-secret
// parameters needed to unwrap it.
type Wrapping struct {
	// Kind is KindPassphrase, KindAge or KindAWSKMS.
	Kind string `json:"kind"`
	// Argon2id holds the passphrase stretching's parameters and salt.
	Argon2id *Argon2Params `json:"argon2id,omitempty"`
	// KMSKeyID is the KMS key that wrapped the data key (an ARN).
	KMSKeyID string `json:"kms_key_id,omitempty"`
	// Wrapped is the wrapped data key (base64 in JSON).
	Wrapped []byte `json:"wrapped"`
}

// Wrapper wraps data keys for the store and unwraps them for a reader. A
// Wrapper holds a secret (a passphrase's stretching, an age identity, KMS
// credentials) or only what writes (age recipients, which cannot unwrap).
type Wrapper interface {
	// Kind is the Wrapping kind the wrapper makes and opens.
	Kind() string
	// Wrap wraps dataKey for the envelope keyID, binding the wrapping to it.
	Wrap(ctx context.Context, keyID string, dataKey []byte) (Wrapping, error)
	// Unwrap returns the data key of envelope keyID: errcode.KeyWrong when
	// the wrapper's secret does not open w, errcode.KeyRequired when it
	// holds no secret that could, errcode.KeyUnavailable when a key
	// service did not answer.
	Unwrap(ctx context.Context, keyID string, w Wrapping) ([]byte, error)
	// String describes the wrapper by reference, never its secret.
	String() string
}

// NewEnvelope draws a fresh data key and wraps it with w.
func NewEnvelope(ctx context.Context, w Wrapper, now time.Time) (*DataKey, *Envelope, error) {
	k, err := NewDataKey()
	if err != nil {
		return nil, nil, err
	}
	wr, err := w.Wrap(ctx, k.ID, k.raw)
	if err != nil {
		return nil, nil, err
	}
	env := &Envelope{FormatVersion: EnvelopeFormatVersion, KeyID: k.ID, Algorithm: Algorithm,
		CreatedAt: now.UTC().Truncate(time.Microsecond), Wrap: wr}
	return k, env, nil
}

// Open unwraps the envelope's data key with w.
func (e *Envelope) Open(ctx context.Context, w Wrapper) (*DataKey, error) {
	if e.Wrap.Kind != w.Kind() {
		return nil, errcode.New(errcode.KeyWrong, "data key %s is wrapped by %s, and the key given is %s", e.KeyID, e.Wrap.Kind, w)
	}
	raw, err := w.Unwrap(ctx, e.KeyID, e.Wrap)
	if err != nil {
		return nil, err
	}
	return dataKeyFrom(e.KeyID, raw)
}

// Rewrap returns the envelope with its data key wrapped by to instead,
// after unwrapping it with from.
func (e *Envelope) Rewrap(ctx context.Context, from, to Wrapper) (*Envelope, error) {
	k, err := e.Open(ctx, from)
	if err != nil {
		return nil, err
	}
	wr, err := to.Wrap(ctx, e.KeyID, k.raw)
	if err != nil {
		return nil, err
	}
	out := *e
	out.Wrap = wr
	return &out, nil
}

// Encode returns the envelope's stored bytes.
func (e *Envelope) Encode() ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode envelope %s: %w", e.KeyID, err)
	}
	return append(b, '\n'), nil
}

// DecodeEnvelope parses stored envelope bytes and checks them against the
// ID they were read under.
func DecodeEnvelope(id string, data []byte) (*Envelope, error) {
	var e Envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, errcode.Wrap(errcode.ManifestInvalid, err, "key envelope %s does not parse", id)
	}
	switch {
	case e.FormatVersion != EnvelopeFormatVersion:
		return nil, errcode.New(errcode.FormatUnsupported, "key envelope %s has format version %d; this sluice reads %d", id, e.FormatVersion, EnvelopeFormatVersion)
	case e.KeyID != id:
		return nil, errcode.New(errcode.ManifestInvalid, "key envelope stored as %s names key %q", id, e.KeyID)
	case e.Algorithm != Algorithm:
		return nil, errcode.New(errcode.FormatUnsupported, "key envelope %s uses algorithm %q; this sluice reads %s", id, e.Algorithm, Algorithm)
	case len(e.Wrap.Wrapped) == 0:
		return nil, errcode.New(errcode.ManifestInvalid, "key envelope %s holds no wrapped key", id)
	}
	return &e, nil
}
