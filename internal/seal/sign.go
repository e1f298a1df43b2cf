package seal

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"

	"github.com/sluicehq/sluice/internal/errcode"
)

// SigningKey signs a chain's catalog generations (Ed25519).
type SigningKey struct {
	priv ed25519.PrivateKey
	// ID names the key pair: the first 16 hex characters of the SHA-256 of
	// the public key. A signature records it so a reader can say which key
	// signed.
	ID string
}

// VerifyKey checks signatures made by one SigningKey.
type VerifyKey struct {
	pub ed25519.PublicKey
	// ID is the SigningKey's ID.
	ID string
}

func keyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// GenerateSigningKey draws a new key pair and returns it as PEM: the
// private key as PKCS #8 ("PRIVATE KEY"), the public key as PKIX
// ("PUBLIC KEY"), the forms openssl reads.
func GenerateSigningKey() (private, public []byte, id string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, "", fmt.Errorf("generate an Ed25519 key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, "", fmt.Errorf("encode the private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, "", fmt.Errorf("encode the public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), keyID(pub), nil
}

// ParseSigningKey reads a PEM private key written by GenerateSigningKey;
// source names where it came from for messages.
func ParseSigningKey(data []byte, source string) (*SigningKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errcode.New(errcode.ConfigInvalid, "%s holds no PEM PRIVATE KEY block (write one with `sluice backup keygen`)", source)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "%s: the private key does not parse", source)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errcode.New(errcode.ConfigInvalid, "%s holds a %T, not an Ed25519 private key", source, k)
	}
	return &SigningKey{priv: priv, ID: keyID(priv.Public().(ed25519.PublicKey))}, nil
}

// ParseVerifyKey reads a PEM public key written by GenerateSigningKey.
func ParseVerifyKey(data []byte, source string) (*VerifyKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errcode.New(errcode.ConfigInvalid, "%s holds no PEM PUBLIC KEY block (the .pub file `sluice backup keygen` wrote)", source)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "%s: the public key does not parse", source)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errcode.New(errcode.ConfigInvalid, "%s holds a %T, not an Ed25519 public key", source, k)
	}
	return &VerifyKey{pub: pub, ID: keyID(pub)}, nil
}

// signedMessage is what a signature covers: a domain naming what is
// signed, then the message.
func signedMessage(domain string, msg []byte) []byte {
	return append(AAD("sluice signature v1", domain), msg...)
}

// Sign signs msg under domain (what kind of object it is).
func (k *SigningKey) Sign(domain string, msg []byte) []byte {
	return ed25519.Sign(k.priv, signedMessage(domain, msg))
}

// Verify reports whether sig is k's signature of msg under domain.
func (k *VerifyKey) Verify(domain string, msg, sig []byte) bool {
	return len(sig) == ed25519.SignatureSize && ed25519.Verify(k.pub, signedMessage(domain, msg), sig)
}
