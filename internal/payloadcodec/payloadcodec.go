// Package payloadcodec encrypts Temporal payloads with AES-256-GCM, so that
// workflow inputs, results and heartbeats (DSNs, table names, positions) are
// stored in Temporal's history as ciphertext.
//
// An encrypted payload is the whole original payload (metadata and data),
// serialized and sealed with a fresh random nonce. Its metadata says only
// that it is encrypted (Encoding) and with which key (MetadataKeyID, a
// fingerprint of the key, never the key), so a later version can hold several
// keys and pick the right one. Payloads with any other encoding are left as
// they are on decode: histories written before encryption was turned on still
// read.
package payloadcodec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Encoding is the "encoding" metadata of an encrypted payload.
const Encoding = "binary/sluice-aes256gcm"

// MetadataKeyID is the metadata key that names the key a payload was
// encrypted with.
const MetadataKeyID = "sluice-key-id"

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

// Codec is a converter.PayloadCodec that encrypts with one key.
type Codec struct {
	keyID string
	aead  cipher.AEAD
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New returns a codec for a 32-byte key.
func New(key []byte) (*Codec, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("a payload key is %d bytes, this one is %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Codec{keyID: KeyID(key), aead: aead}, nil
}

// KeyID returns the public fingerprint of key: 16 hex digits of a SHA-256
// over a fixed label and the key. It identifies the key without revealing it.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("sluice payload key id\x00"))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// FromEnv builds a codec from the base64 key held by the environment variable
// name; getenv is os.Getenv outside tests. The error names the variable and
// flag, never the value.
func FromEnv(name, flag string, getenv func(string) string) (*Codec, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return nil, errcode.New(errcode.PayloadKeyInvalid, "%s %s: the environment variable %s is unset or empty", flag, name, name)
	}
	var key []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err = enc.DecodeString(v); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errcode.New(errcode.PayloadKeyInvalid, "%s %s: the value is not base64", flag, name)
	}
	if len(key) != KeySize {
		return nil, errcode.New(errcode.PayloadKeyInvalid, "%s %s: the value decodes to %d bytes, a payload key is %d (generate one with `openssl rand -base64 32`)", flag, name, len(key), KeySize)
	}
	return New(key)
}

// KeyID returns the fingerprint of the codec's key.
func (c *Codec) KeyID() string { return c.keyID }

// additionalData binds the ciphertext to its encoding and key ID, so metadata
// rewritten in place fails authentication.
func additionalData(keyID string) []byte { return []byte(Encoding + "\x00" + keyID) }

// Encode encrypts every payload.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("payloadcodec: serialize payload: %w", err)
		}
		nonce := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(plain)+c.aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("payloadcodec: nonce: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				converter.MetadataEncoding: []byte(Encoding),
				MetadataKeyID:              []byte(c.keyID),
			},
			Data: c.aead.Seal(nonce, nonce, plain, additionalData(c.keyID)),
		}
	}
	return out, nil
}

// Decode decrypts the payloads this codec's format encrypted and passes every
// other payload through unchanged. A payload encrypted with another key, or
// altered after encryption, is an error naming the key IDs involved.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		if id != c.keyID {
			return nil, errcode.New(errcode.PayloadUndecryptable,
				"payload was encrypted with key ID %q, but this process holds key ID %q: give it the same key (--payload-key-env) as the process that wrote it", id, c.keyID)
		}
		data := p.GetData()
		ns := c.aead.NonceSize()
		if len(data) < ns+c.aead.Overhead() {
			return nil, errcode.New(errcode.PayloadUndecryptable, "encrypted payload (key ID %q) is truncated", id)
		}
		plain, err := c.aead.Open(nil, data[:ns], data[ns:], additionalData(id))
		if err != nil {
			return nil, errcode.New(errcode.PayloadUndecryptable, "encrypted payload (key ID %q) failed authentication: it was altered or corrupted", id)
		}
		var orig commonpb.Payload
		if err := proto.Unmarshal(plain, &orig); err != nil {
			return nil, fmt.Errorf("payloadcodec: decrypted payload (key ID %q) does not parse: %w", id, err)
		}
		out[i] = &orig
	}
	return out, nil
}
