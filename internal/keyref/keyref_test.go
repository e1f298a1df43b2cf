package keyref

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

// An X25519 recipient and its identity (age-keygen), for tests only.
const (
	testRecipient = "age1rnqakvsfgr4xje5vpcwzdq824pxps7gqy732fr99dvx9yrhxh4vqatxz8n"
	testIdentity  = "AGE-SECRET-KEY-1NTM8XXG9YWRASAEVJJ057NFQF88N54K0WTFGZ37A4279WETTM75SXA2HET"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		ref  Ref
		code errcode.Code // "" accepts
		says string
	}{
		{"zero", Ref{}, "", ""},
		{"passphrase env", Ref{PassphraseEnv: "SLUICE_PASS"}, "", ""},
		{"encrypt with a passphrase file", Ref{PassphraseFile: "/run/pw", Encrypt: true}, "", ""},
		{"encrypt to recipients", Ref{AgeRecipients: []string{testRecipient}, Encrypt: true}, "", ""},
		{"kms with region and endpoint", Ref{KMSKey: "alias/sluice", KMSRegion: "eu-west-1", KMSEndpoint: "http://127.0.0.1:4599", Encrypt: true}, "", ""},
		{"sign and verify", Ref{SignKeyEnv: "SIGN_PEM", VerifyKeyFile: "/k.pub", RequireSignature: true}, "", ""},
		{"two wrapping keys", Ref{PassphraseEnv: "P", KMSKey: "k"}, errcode.Usage, "--key-passphrase-env, --kms-key"},
		{"passphrase env and file", Ref{PassphraseEnv: "P", PassphraseFile: "/p"}, errcode.Usage, "give one"},
		{"a public-key writer with its own identity", Ref{AgeIdentityFile: "/id", AgeRecipients: []string{testRecipient}, Encrypt: true}, "", ""},
		{"identity, recipients and a passphrase", Ref{PassphraseEnv: "P", AgeIdentityFile: "/id", AgeRecipients: []string{testRecipient}, Encrypt: true}, errcode.Usage, "--key-passphrase-env, --key-identity-file, --encrypt-to"},
		{"identity and a kms key", Ref{KMSKey: "k", AgeIdentityFile: "/id"}, errcode.Usage, "--key-identity-file, --kms-key"},
		{"encrypt without a key", Ref{Encrypt: true}, errcode.KeyRequired, "--encrypt needs a key"},
		{"encrypt with only a signing key", Ref{Encrypt: true, SignKeyFile: "/s"}, errcode.KeyRequired, "--encrypt"},
		{"recipients without encrypt", Ref{AgeRecipients: []string{testRecipient}}, errcode.Usage, "need --encrypt"},
		{"a malformed recipient", Ref{AgeRecipients: []string{"age1nope"}, Encrypt: true}, errcode.Usage, "--encrypt-to \"age1nope\""},
		{"an identity given as a recipient", Ref{AgeRecipients: []string{testIdentity}, Encrypt: true}, errcode.Usage, "age identity (a secret key)"},
		{"kms region without a key", Ref{KMSRegion: "eu-west-1"}, errcode.Usage, "need --kms-key"},
		{"kms endpoint not a URL", Ref{KMSKey: "k", KMSEndpoint: "localhost:4599"}, errcode.Usage, "--kms-endpoint"},
		{"kms endpoint with a password", Ref{KMSKey: "k", KMSEndpoint: "http://u:hunter2@127.0.0.1:4599"}, errcode.Usage, "credentials in the URL"},
		{"require without a verify key", Ref{RequireSignature: true}, errcode.Usage, "--require-signature needs --verify-key-file"},
		{"two signing keys", Ref{SignKeyFile: "/s", SignKeyEnv: "S"}, errcode.Usage, "--sign-key-file and --sign-key-env"},
		{"a passphrase given as a variable name", Ref{PassphraseEnv: "correct horse battery"}, errcode.Usage, "never the secret itself"},
		{"a path with a line break", Ref{VerifyKeyFile: "/k.pub\n"}, errcode.Usage, "--verify-key-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ref.Validate()
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errcode.Is(err, tc.code) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want %s saying %q", err, tc.code, tc.says)
			}
			if strings.Contains(err.Error(), "correct horse") || strings.Contains(err.Error(), testIdentity) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the message echoes a secret: %v", err)
			}
		})
	}
	if err := (Ref{PassphraseEnv: "P", KMSKey: "k"}).ValidateNamed("new-"); err == nil || !strings.Contains(err.Error(), "--new-key-passphrase-env, --new-kms-key") {
		t.Fatalf("named with a prefix: %v", err)
	}
}

// A Ref is a reference in JSON: only what is set, and nothing a secret.
func TestRefJSON(t *testing.T) {
	b, err := json.Marshal(Ref{})
	if err != nil || string(b) != "{}" {
		t.Fatalf("zero Ref encodes as %s, %v", b, err)
	}
	r := Ref{PassphraseEnv: "P", Encrypt: true, SignKeyFile: "/s", VerifyKeyFile: "/v", RequireSignature: true, AgeRecipients: nil}
	b, _ = json.Marshal(r)
	want := `{"passphrase_env":"P","encrypt":true,"sign_key_file":"/s","verify_key_file":"/v","require_signature":true}`
	if string(b) != want {
		t.Fatalf("encoded %s, want %s", b, want)
	}
	var back Ref
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if !(Ref{}).IsZero() || r.IsZero() || (Ref{RequireSignature: true}).IsZero() {
		t.Fatal("IsZero")
	}
}

// An unset variable or an unreadable file is SECRET-UNRESOLVED naming it;
// the value never appears.
func TestTrustUnresolved(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Setenv("KEYREF_TEST_EMPTY", "")
	for _, tc := range []struct {
		ref  Ref
		says string
	}{
		{Ref{PassphraseEnv: "KEYREF_TEST_UNSET"}, "KEYREF_TEST_UNSET"},
		{Ref{PassphraseEnv: "KEYREF_TEST_EMPTY"}, "KEYREF_TEST_EMPTY"},
		{Ref{PassphraseFile: filepath.Join(dir, "missing")}, filepath.Join(dir, "missing")},
		{Ref{AgeIdentityFile: filepath.Join(dir, "id")}, filepath.Join(dir, "id")},
		{Ref{SignKeyEnv: "KEYREF_TEST_UNSET"}, "KEYREF_TEST_UNSET"},
		{Ref{VerifyKeyFile: filepath.Join(dir, "k.pub")}, filepath.Join(dir, "k.pub")},
	} {
		_, err := tc.ref.Trust(ctx)
		if !errcode.Is(err, errcode.SecretUnresolved) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want SECRET-UNRESOLVED naming %s", tc.ref, err, tc.says)
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (Ref{PassphraseFile: empty}).Trust(ctx); !errcode.Is(err, errcode.SecretUnresolved) {
		t.Errorf("a passphrase file of a newline: %v", err)
	}
}

// A passphrase file's trailing newline is not part of the passphrase: what
// it wraps opens with the same passphrase from a variable. The signing
// and verify keys resolve to one pair.
func TestTrustResolves(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret passphrase\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KEYREF_TEST_PASS", "s3cret passphrase")
	priv, pub, id, err := seal.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "k.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KEYREF_TEST_SIGN", string(priv))

	w, err := Ref{PassphraseFile: pw, Encrypt: true, SignKeyEnv: "KEYREF_TEST_SIGN"}.Trust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Encrypt || w.Signer == nil || w.Signer.ID != id || w.Verifier != nil {
		t.Fatalf("writer's trust: %+v", w)
	}
	if strings.Contains(w.Wrapper.String(), "s3cret") {
		t.Fatalf("the wrapper names its secret: %s", w.Wrapper)
	}
	_, env, err := seal.NewEnvelope(ctx, w.Wrapper, testNow)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Ref{PassphraseEnv: "KEYREF_TEST_PASS", VerifyKeyFile: filepath.Join(dir, "k.pub"), RequireSignature: true}.Trust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Encrypt || r.Verifier == nil || r.Verifier.ID != id || !r.RequireSignature {
		t.Fatalf("reader's trust: %+v", r)
	}
	if _, err := env.Open(ctx, r.Wrapper); err != nil {
		t.Fatalf("the passphrase from the variable does not open what the file's wrapped: %v", err)
	}

	// Age: recipients write, the identity reads.
	idFile := filepath.Join(dir, "id.txt")
	if err := os.WriteFile(idFile, []byte("# test\n"+testIdentity+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	aw, err := Ref{AgeRecipients: []string{testRecipient}, Encrypt: true}.Wrapper(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, env, err = seal.NewEnvelope(ctx, aw, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Open(ctx, aw); !errcode.Is(err, errcode.KeyRequired) {
		t.Fatalf("recipients alone opened a data key: %v", err)
	}
	ar, err := Ref{AgeIdentityFile: idFile}.Wrapper(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Open(ctx, ar); err != nil {
		t.Fatalf("the identity does not open what its recipient wrapped: %v", err)
	}

	// A public-key writer with an identity of its own: its manifests' keys
	// open with its identity, its chunks' only with the target's.
	own, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	ownFile := filepath.Join(dir, "own.txt")
	if err := os.WriteFile(ownFile, []byte(own.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wt, err := Ref{AgeRecipients: []string{testRecipient}, AgeIdentityFile: ownFile, Encrypt: true}.Trust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wt.ManifestWrapper == nil || !wt.Encrypt {
		t.Fatalf("the writer's trust: %+v", wt)
	}
	_, chunkEnv, err := seal.NewEnvelope(ctx, wt.Wrapper, testNow)
	if err != nil {
		t.Fatal(err)
	}
	_, manifestEnv, err := seal.NewEnvelope(ctx, wt.ManifestWrapper, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := manifestEnv.Open(ctx, wt.Wrapper); err != nil {
		t.Fatalf("the writer does not read back its manifests' key: %v", err)
	}
	if _, err := chunkEnv.Open(ctx, wt.Wrapper); !errcode.Is(err, errcode.KeyWrong) {
		t.Fatalf("the writer opened its chunks' key: %v", err)
	}
	for _, e := range []*seal.Envelope{chunkEnv, manifestEnv} {
		if _, err := e.Open(ctx, ar); err != nil {
			t.Fatalf("the target's identity does not open %s: %v", e.KeyID, err)
		}
	}
}

// The process's keyrings: one per chain and reference, so a writer draws
// one data key however many handles it opens; a replaced passphrase file
// is a new keyring; a chain begun anew at the same URL gets a new key
// rather than one whose envelope it lacks.
func TestKeyrings(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var krs Keyrings
	if kr, err := krs.For(ctx, "file:///a", Ref{}); kr != nil || err != nil {
		t.Fatalf("zero Ref: %v, %v", kr, err)
	}
	w := Ref{PassphraseFile: pw, Encrypt: true}
	a1, err := krs.For(ctx, "file:///a", w)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := krs.For(ctx, "file:///a", w)
	b, _ := krs.For(ctx, "file:///b", w)
	rd, _ := krs.For(ctx, "file:///a", Ref{PassphraseFile: pw})
	if a1 != a2 || a1 == b || a1 == rd {
		t.Fatalf("keyrings: same %v, other chain %v, reader %v", a1 == a2, a1 == b, a1 == rd)
	}
	if _, err := krs.For(ctx, "file:///a", Ref{Encrypt: true}); !errcode.Is(err, errcode.KeyRequired) {
		t.Fatalf("an invalid Ref: %v", err)
	}

	// One data key for every handle of the writer.
	store := chaintest.Store(t)
	const url = "file:///chain"
	for i := range 3 {
		ch, err := krs.Open(ctx, store, url, w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey("a", "c"+string(rune('0'+i))), Ordinal: i}, []byte("rows"), 1, 4); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := store.ListEnvelopes(ctx)
	if err != nil || len(ids) != 1 {
		t.Fatalf("three handles drew %d data keys (%v)", len(ids), err)
	}

	// The chain deleted and begun again at the same URL: a new key, stored.
	fresh := chaintest.Store(t)
	ch, err := krs.Open(ctx, fresh, url, w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey("b", "c0")}, []byte("rows"), 1, 4); err != nil {
		t.Fatal(err)
	}
	again, err := fresh.ListEnvelopes(ctx)
	if err != nil || len(again) != 1 || again[0] == ids[0] {
		t.Fatalf("the chain begun anew holds envelopes %v (the old key %s), %v", again, ids[0], err)
	}
	if _, err := fresh.ReadEnvelope(ctx, again[0]); err != nil {
		t.Fatal(err)
	}

	// A public-key writer draws two keys (its chunks', its manifests'),
	// once; in a chain begun anew, two new ones.
	own, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	ownFile := filepath.Join(dir, "own.txt")
	if err := os.WriteFile(ownFile, []byte(own.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	aw := Ref{AgeRecipients: []string{testRecipient}, AgeIdentityFile: ownFile, Encrypt: true}
	const ageURL = "file:///age-chain"
	var first []string
	for _, st := range []*chain.Chain{chaintest.Store(t), chaintest.Store(t)} {
		ch, err := krs.Open(ctx, st, ageURL, aw)
		if err != nil {
			t.Fatal(err)
		}
		b := chaintest.NewBuilder(t, ch, testNow)
		if b.Ch, err = krs.Open(ctx, st, ageURL, aw); err != nil {
			t.Fatal(err)
		}
		b.Incremental(b.Txn(chaintest.Insert(2, "two")))
		ids, err := st.ListEnvelopes(ctx)
		if err != nil || len(ids) != 2 {
			t.Fatalf("the age writer drew %d keys (%v)", len(ids), err)
		}
		for _, id := range ids {
			for _, f := range first {
				if id == f {
					t.Fatalf("the chain begun anew reuses key %s", id)
				}
			}
		}
		first = ids
	}

	// A replaced passphrase file: a new keyring, drawing a new key.
	if err := os.WriteFile(pw, []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a3, err := krs.For(ctx, "file:///a", w)
	if err != nil || a3 == a1 {
		t.Fatalf("the replaced passphrase kept its keyring (%v)", err)
	}
}
