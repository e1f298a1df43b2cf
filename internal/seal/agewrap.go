package seal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Age wraps data keys to age recipients and unwraps them with age
// identities. A site holding only recipients (the source's) writes a chain
// it cannot read; the site holding an identity (the target's) reads it.
type Age struct {
	recipients []age.Recipient
	identities []age.Identity
	source     string
}

// NewAgeRecipients returns a write-only wrapper for the recipients listed
// in text (age1… lines; blank lines and # comments are skipped).
func NewAgeRecipients(text, source string) (*Age, error) {
	rs, err := age.ParseRecipients(strings.NewReader(text))
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "age recipients in %s", source)
	}
	return &Age{recipients: rs, source: source}, nil
}

// NewAgeIdentities returns a wrapper that unwraps with the identities in
// text (an age identity file). It also wraps, to the identities' own
// recipients when they have one (X25519 identities do).
func NewAgeIdentities(text, source string) (*Age, error) {
	ids, err := age.ParseIdentities(strings.NewReader(text))
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "age identities in %s", source)
	}
	a := &Age{identities: ids, source: source}
	for _, id := range ids {
		if x, ok := id.(*age.X25519Identity); ok {
			a.recipients = append(a.recipients, x.Recipient())
		}
	}
	return a, nil
}

// Kind is KindAge.
func (a *Age) Kind() string { return KindAge }

// String names where the recipients or identities came from.
func (a *Age) String() string { return "the age key in " + a.source }

// Wrap encrypts the key ID and dataKey to every recipient.
func (a *Age) Wrap(_ context.Context, keyID string, dataKey []byte) (Wrapping, error) {
	if len(a.recipients) == 0 {
		return Wrapping{}, errcode.New(errcode.KeyRequired, "%s names no recipient to wrap a data key to", a)
	}
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, a.recipients...)
	if err != nil {
		return Wrapping{}, fmt.Errorf("wrap data key %s with age: %w", keyID, err)
	}
	if _, err := w.Write(append([]byte(keyID), dataKey...)); err != nil {
		return Wrapping{}, fmt.Errorf("wrap data key %s with age: %w", keyID, err)
	}
	if err := w.Close(); err != nil {
		return Wrapping{}, fmt.Errorf("wrap data key %s with age: %w", keyID, err)
	}
	return Wrapping{Kind: KindAge, Wrapped: buf.Bytes()}, nil
}

// Unwrap decrypts an age wrapping with the identities: errcode.KeyRequired
// when the wrapper holds recipients only, errcode.KeyWrong when no
// identity matches or the wrapping names another key.
func (a *Age) Unwrap(_ context.Context, keyID string, w Wrapping) ([]byte, error) {
	if len(a.identities) == 0 {
		return nil, errcode.New(errcode.KeyRequired, "%s holds age recipients only: this site writes the chain but cannot read it; pass --key-identity-file with the identity of one of the recipients", a)
	}
	r, err := age.Decrypt(bytes.NewReader(w.Wrapped), a.identities...)
	if err != nil {
		var none *age.NoIdentityMatchError
		if errors.As(err, &none) {
			return nil, errcode.New(errcode.KeyWrong, "no identity in %s is a recipient of data key %s", a.source, keyID)
		}
		return nil, errcode.Wrap(errcode.KeyWrong, err, "data key %s does not open with %s", keyID, a)
	}
	plain, err := io.ReadAll(io.LimitReader(r, int64(len(keyID)+DataKeySize+1)))
	if err != nil {
		return nil, errcode.Wrap(errcode.KeyWrong, err, "data key %s does not open with %s", keyID, a)
	}
	if len(plain) != len(keyID)+DataKeySize || string(plain[:len(keyID)]) != keyID {
		return nil, errcode.New(errcode.KeyWrong, "the age wrapping stored as data key %s holds another key", keyID)
	}
	return plain[len(keyID):], nil
}

// NewAgeWriter returns the wrappers of a writer that seals to recipients
// (the target site's) and keeps an age identity of its own (own, read with
// NewAgeIdentities): chunks wraps data keys to the recipients only, so the
// writer cannot read the rows it wrote; manifests wraps them to the
// recipients and the writer's own recipient, so it reads back the schema
// it recorded. Both unwrap with the writer's identity.
func NewAgeWriter(recipients, own *Age) (chunks, manifests *Age) {
	chunks = &Age{recipients: recipients.recipients, identities: own.identities, source: recipients.source}
	all := append(append([]age.Recipient(nil), recipients.recipients...), own.recipients...)
	manifests = &Age{recipients: all, identities: own.identities, source: recipients.source + " and " + own.source}
	return chunks, manifests
}
