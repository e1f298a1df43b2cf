package seal

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/sluicehq/sluice/internal/errcode"
)

func mustKey(t *testing.T) *DataKey {
	t.Helper()
	k, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func wantCode(t *testing.T, err error, code errcode.Code) {
	t.Helper()
	if !errcode.Is(err, code) {
		t.Fatalf("got %v, want %s", err, code)
	}
}

// A sealed object opens only with its key and associated data: changed
// bytes, another place and another key are all refused with the same code.
func TestSealBindsKeyAndPlace(t *testing.T) {
	k := mustKey(t)
	plain := []byte("row data that must not leak")
	aad := AAD("sluice chunk", "data/a/0000-000000.chunk", "public.t", "0")
	sealed, err := k.Seal(nil, plain, aad)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, plain) || !IsSealed(sealed) || len(sealed) != len(plain)+Overhead {
		t.Fatalf("sealed object is not what it should be: %q", sealed)
	}
	got, err := k.Open(nil, sealed, aad)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open: %q, %v", got, err)
	}
	flipped := append([]byte(nil), sealed...)
	flipped[len(flipped)-20] ^= 1
	_, err = k.Open(nil, flipped, aad)
	wantCode(t, err, errcode.ChunkSealBroken)
	for _, other := range [][]byte{
		AAD("sluice chunk", "data/a/0000-000001.chunk", "public.t", "0"), // moved
		AAD("sluice chunk", "data/a/0000-000000.chunk", "public.u", "0"), // another table
		AAD("sluice chunk", "data/a/0000-000000.chunk", "public.t", "1"), // swapped order
	} {
		_, err = k.Open(nil, sealed, other)
		wantCode(t, err, errcode.ChunkSealBroken)
	}
	_, err = mustKey(t).Open(nil, sealed, aad) // another chain's key
	wantCode(t, err, errcode.ChunkSealBroken)
	// In place: the same plaintext, in the sealed object's own bytes; a
	// changed byte or another place is refused alike.
	inPlace := append([]byte(nil), sealed...)
	got, err = k.OpenInPlace(inPlace, aad)
	if err != nil || !bytes.Equal(got, plain) || &got[0] != &inPlace[prefixLen] {
		t.Fatalf("open in place: %q, %v", got, err)
	}
	flipped = append([]byte(nil), sealed...)
	flipped[len(flipped)-20] ^= 1
	_, err = k.OpenInPlace(flipped, aad)
	wantCode(t, err, errcode.ChunkSealBroken)
	_, err = k.OpenInPlace(append([]byte(nil), sealed...), AAD("sluice chunk", "elsewhere"))
	wantCode(t, err, errcode.ChunkSealBroken)
	_, err = k.OpenInPlace([]byte("short"), aad)
	wantCode(t, err, errcode.ChunkSealBroken)
	// Length-prefixed fields: no two lists encode alike.
	if bytes.Equal(AAD("ab", "c"), AAD("a", "bc")) {
		t.Fatal("AAD fields run together")
	}
}

func TestPassphraseEnvelope(t *testing.T) {
	ctx := context.Background()
	p, err := NewPassphrase([]byte("correct horse"), "environment variable P")
	if err != nil {
		t.Fatal(err)
	}
	k, env, err := NewEnvelope(ctx, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	data, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, k.raw) || strings.Contains(string(data), "correct horse") {
		t.Fatal("the envelope holds the key or the passphrase")
	}
	back, err := DecodeEnvelope(k.ID, data)
	if err != nil {
		t.Fatal(err)
	}
	// Another process with the same passphrase opens it.
	p2, _ := NewPassphrase([]byte("correct horse"), "file /p")
	got, err := back.Open(ctx, p2)
	if err != nil || !bytes.Equal(got.raw, k.raw) {
		t.Fatalf("open: %v", err)
	}
	wrong, _ := NewPassphrase([]byte("wrong horse"), "environment variable P")
	_, err = back.Open(ctx, wrong)
	wantCode(t, err, errcode.KeyWrong)
	// The wrapping is bound to its key ID.
	if _, err := p2.Unwrap(ctx, strings.Repeat("0", 32), back.Wrap); !errcode.Is(err, errcode.KeyWrong) {
		t.Fatalf("a wrapping moved to another key ID opened: %v", err)
	}
	// Rekey: the same data key under a new passphrase; the old one no
	// longer opens it.
	p3, _ := NewPassphrase([]byte("new passphrase"), "environment variable Q")
	re, err := back.Rewrap(ctx, p2, p3)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := re.Open(ctx, p3); err != nil || !bytes.Equal(got.raw, k.raw) {
		t.Fatalf("rewrapped: %v", err)
	}
	_, err = re.Open(ctx, p2)
	wantCode(t, err, errcode.KeyWrong)
	// A hostile envelope cannot make a reader spend unbounded memory.
	huge := *re
	params := *huge.Wrap.Argon2id
	params.MemoryKiB = 1 << 30
	huge.Wrap.Argon2id = &params
	huge.Wrap.Kind = KindPassphrase
	if _, err := huge.Open(ctx, p3); !errcode.Is(err, errcode.ManifestInvalid) {
		t.Fatalf("huge Argon2id memory accepted: %v", err)
	}
	if _, err := NewPassphrase(nil, "environment variable E"); !errcode.Is(err, errcode.KeyRequired) {
		t.Fatalf("empty passphrase: %v", err)
	}
}

func TestAgeEnvelope(t *testing.T) {
	ctx := context.Background()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := age.GenerateX25519Identity()
	writer, err := NewAgeRecipients("# the target site\n"+id.Recipient().String()+"\n", "--encrypt-to")
	if err != nil {
		t.Fatal(err)
	}
	k, env, err := NewEnvelope(ctx, writer, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The writing site cannot read what it wrote.
	_, err = env.Open(ctx, writer)
	wantCode(t, err, errcode.KeyRequired)
	reader, err := NewAgeIdentities(id.String()+"\n", "file id.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.Open(ctx, reader)
	if err != nil || !bytes.Equal(got.raw, k.raw) {
		t.Fatalf("open: %v", err)
	}
	stranger, _ := NewAgeIdentities(other.String(), "file other.txt")
	_, err = env.Open(ctx, stranger)
	wantCode(t, err, errcode.KeyWrong)
	// A wrapping copied from another envelope names another key.
	if _, err := reader.Unwrap(ctx, strings.Repeat("a", 32), env.Wrap); !errcode.Is(err, errcode.KeyWrong) {
		t.Fatalf("copied wrapping opened: %v", err)
	}
	// Another kind of key is refused by name.
	p, _ := NewPassphrase([]byte("x"), "environment variable P")
	_, err = env.Open(ctx, p)
	wantCode(t, err, errcode.KeyWrong)
	if _, err := NewAgeRecipients("not-a-recipient", "--encrypt-to"); !errcode.Is(err, errcode.ConfigInvalid) {
		t.Fatalf("bad recipient: %v", err)
	}
}

func TestSigningKeys(t *testing.T) {
	priv, pub, id, err := GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	sk, err := ParseSigningKey(priv, "key")
	if err != nil {
		t.Fatal(err)
	}
	vk, err := ParseVerifyKey(pub, "key.pub")
	if err != nil {
		t.Fatal(err)
	}
	if sk.ID != id || vk.ID != id {
		t.Fatalf("key IDs %s %s %s", sk.ID, vk.ID, id)
	}
	sig := sk.Sign("catalog commit", []byte("generation 7"))
	if !vk.Verify("catalog commit", []byte("generation 7"), sig) {
		t.Fatal("signature does not verify")
	}
	if vk.Verify("catalog checkpoint", []byte("generation 7"), sig) || vk.Verify("catalog commit", []byte("generation 8"), sig) {
		t.Fatal("signature verifies for another domain or message")
	}
	_, pub2, _, _ := GenerateSigningKey()
	vk2, _ := ParseVerifyKey(pub2, "other.pub")
	if vk2.Verify("catalog commit", []byte("generation 7"), sig) {
		t.Fatal("another key verifies the signature")
	}
	if _, err := ParseSigningKey(pub, "key.pub"); !errcode.Is(err, errcode.ConfigInvalid) {
		t.Fatalf("a public key parsed as private: %v", err)
	}
	if _, err := ParseVerifyKey(priv, "key"); !errcode.Is(err, errcode.ConfigInvalid) {
		t.Fatalf("a private key parsed as public: %v", err)
	}
}
