package chain

import (
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Signature domains: what kind of catalog object a signature is over.
const (
	signCommit     = "catalog commit"
	signCheckpoint = "catalog checkpoint"
)

// CatalogSignature is a producer's Ed25519 signature over a catalog commit
// or checkpoint: over its compact JSON encoding without the signature
// (docs/chain-format.md §11.3).
type CatalogSignature struct {
	// KeyID names the signing key (seal.SigningKey.ID).
	KeyID string `json:"key_id"`
	// Sig is the signature (base64 in JSON).
	Sig []byte `json:"sig"`
}

// sign returns the signature of v's encoding under domain when the handle
// signs; nil otherwise. v must have its signature unset.
func (c *Chain) sign(domain string, v any) (*CatalogSignature, error) {
	if c.trust == nil || c.trust.t.Signer == nil {
		return nil, nil
	}
	msg, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s to sign: %w", domain, err)
	}
	k := c.trust.t.Signer
	return &CatalogSignature{KeyID: k.ID, Sig: k.Sign(domain, msg)}, nil
}

// verify checks the signature sig of v (whose own signature field the
// caller has cleared) stored at key. An unsigned object is refused when
// the handle requires signatures; a signature is checked when the handle
// has a verify key. It reports whether the object was signed.
func (c *Chain) verify(domain, key string, v any, sig *CatalogSignature) (bool, error) {
	var t Trust
	if c.trust != nil {
		t = c.trust.t
	}
	if sig == nil {
		if t.RequireSignature {
			return false, errcode.New(errcode.SignatureMissing, "%s %s carries no signature, and signatures are required", domain, key)
		}
		return false, nil
	}
	if t.Verifier == nil {
		return true, nil
	}
	msg, err := json.Marshal(v)
	if err != nil {
		return false, fmt.Errorf("encode %s %s to verify: %w", domain, key, err)
	}
	if sig.KeyID != t.Verifier.ID {
		return false, errcode.New(errcode.SignatureInvalid, "%s %s is signed by key %s, and the verify key given is %s", domain, key, sig.KeyID, t.Verifier.ID)
	}
	if !t.Verifier.Verify(domain, msg, sig.Sig) {
		return false, errcode.New(errcode.SignatureInvalid, "the signature of %s %s does not verify with key %s: the object was changed after it was signed", domain, key, t.Verifier.ID)
	}
	return true, nil
}

// requireLegacySigned refuses a generation of catalog format 1 or 2 (which
// cannot carry a signature) when signatures are required.
func (c *Chain) requireLegacySigned(key string) error {
	if c.trust != nil && c.trust.t.RequireSignature {
		return errcode.New(errcode.SignatureMissing, "catalog generation %s is of an older format that carries no signature, and signatures are required", key)
	}
	return nil
}

// refuseUnsignedOnto refuses to commit an unsigned generation onto a
// signed one: readers requiring signatures would stop there.
func (c *Chain) refuseUnsignedOnto(base *Catalog, gen int64) error {
	if base == nil || base.stored == nil || !base.stored.signed || (c.trust != nil && c.trust.t.Signer != nil) {
		return nil
	}
	return errcode.New(errcode.KeyRequired,
		"the chain's generation %d is signed, and this writer has no signing key to sign generation %d: pass --sign-key-file or --sign-key-env", base.Generation, gen)
}
