package awskms

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
	"github.com/sluicehq/sluice/internal/seal/awskms/kmstest"
)

func newWrapper(t *testing.T, ep, keyID string) *Wrapper {
	t.Helper()
	w, err := New(context.Background(), Options{KeyID: keyID, Endpoint: ep})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// dataKeyID is the form of a seal data key ID: 32 hex characters.
func dataKeyID(t *testing.T) string { return hex.EncodeToString(randomBytes(t, 16)) }

func wantCode(t *testing.T, err error, code errcode.Code, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %s", what, code)
	}
	if !errcode.Is(err, code) {
		t.Fatalf("%s: %v; want %s", what, err, code)
	}
}

// noKeyMaterial fails when s holds dataKey in any usual encoding.
func noKeyMaterial(t *testing.T, s string, dataKey []byte, what string) {
	t.Helper()
	for _, enc := range []string{string(dataKey), hex.EncodeToString(dataKey), base64.StdEncoding.EncodeToString(dataKey),
		base64.RawURLEncoding.EncodeToString(dataKey), fmt.Sprint(dataKey)} {
		if strings.Contains(s, enc) {
			t.Fatalf("%s holds the data key: %q", what, s)
		}
	}
}

func TestWrapUnwrapRoundTrip(t *testing.T) {
	ep := kmstest.Endpoint(t)
	arn := kmstest.CreateKey(t, ep)
	w := newWrapper(t, ep, arn)
	ctx := context.Background()
	id, dk := dataKeyID(t), randomBytes(t, seal.DataKeySize)

	wr, err := w.Wrap(ctx, id, dk)
	if err != nil {
		t.Fatal(err)
	}
	if wr.Kind != seal.KindAWSKMS || wr.KMSKeyID != arn || wr.Argon2id != nil {
		t.Fatalf("wrapping is %+v; want kind %s naming %s", wr, seal.KindAWSKMS, arn)
	}
	if len(wr.Wrapped) == 0 || bytes.Contains(wr.Wrapped, dk) {
		t.Fatalf("wrapped bytes are empty or hold the data key")
	}
	got, err := w.Unwrap(ctx, id, wr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, dk) {
		t.Fatal("unwrapped key differs from the wrapped one")
	}
	// A wrapper given another key (by ARN or key ID) is refused before KMS
	// is asked; one given an alias leaves the judgment to KMS, which
	// decrypts with the key the wrapping records.
	otherARN := kmstest.CreateKey(t, ep)
	for _, given := range []string{otherARN, otherARN[strings.LastIndex(otherARN, "/")+1:]} {
		if _, err := newWrapper(t, ep, given).Unwrap(ctx, id, wr); !errcode.Is(err, errcode.KeyWrong) {
			t.Fatalf("unwrap with a wrapper of another key %s: %v", given, err)
		}
	}
	if got, err := newWrapper(t, ep, arn[strings.LastIndex(arn, "/")+1:]).Unwrap(ctx, id, wr); err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("unwrap with the key's ID: %v", err)
	}
}

func TestWrapRecordsTheKeyARNOfAnAlias(t *testing.T) {
	ep := kmstest.Endpoint(t)
	arn := kmstest.CreateKey(t, ep)
	alias := "alias/sluice-test-" + hex.EncodeToString(randomBytes(t, 6))
	if _, err := kmstest.Client(ep).CreateAlias(context.Background(), &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(arn)}); err != nil {
		t.Fatalf("create alias %s: %v", alias, err)
	}
	w := newWrapper(t, ep, alias)
	id, dk := dataKeyID(t), randomBytes(t, seal.DataKeySize)
	wr, err := w.Wrap(context.Background(), id, dk)
	if err != nil {
		t.Fatal(err)
	}
	if wr.KMSKeyID != arn {
		t.Fatalf("wrapping names %q; want the key's ARN %s, not the alias", wr.KMSKeyID, arn)
	}
	if got, err := w.Unwrap(context.Background(), id, wr); err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("unwrap: %v", err)
	}
	if w.String() != "AWS KMS key "+alias {
		t.Fatalf("String() = %q", w.String())
	}
}

func TestUnwrapRefusals(t *testing.T) {
	ep := kmstest.Endpoint(t)
	ctx := context.Background()
	arn, arn2 := kmstest.CreateKey(t, ep), kmstest.CreateKey(t, ep)
	w := newWrapper(t, ep, arn)
	id, dk := dataKeyID(t), randomBytes(t, seal.DataKeySize)
	wr, err := w.Wrap(ctx, id, dk)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("another envelope's key ID", func(t *testing.T) {
		got, err := w.Unwrap(ctx, dataKeyID(t), wr)
		wantCode(t, err, errcode.KeyWrong, "unwrap under another data key ID")
		if got != nil {
			t.Fatal("a refused unwrap returned bytes")
		}
	})
	t.Run("another KMS key named", func(t *testing.T) {
		moved := wr
		moved.KMSKeyID = arn2
		_, err := w.Unwrap(ctx, id, moved)
		wantCode(t, err, errcode.KeyWrong, "unwrap naming another KMS key")
	})
	t.Run("a KMS key that does not exist", func(t *testing.T) {
		gone := wr
		gone.KMSKeyID = arn[:strings.LastIndex(arn, "/")+1] + "00000000-0000-4000-8000-000000000000"
		_, err := w.Unwrap(ctx, id, gone)
		wantCode(t, err, errcode.KeyWrong, "unwrap naming a missing KMS key")
	})
	// A changed ciphertext never opens to another key. Its sealed part (the
	// encrypted data key and its tag, at least the last 48 bytes) is
	// refused wherever a bit flips. A ciphertext blob may also carry a
	// header KMS does not need when Decrypt names the key: local-kms's
	// ([length][key ID][key version][nonce|ciphertext|tag]) is not
	// authenticated, and a flip there still opens to the same key.
	t.Run("flipped bytes", func(t *testing.T) {
		n, refused := len(wr.Wrapped), 0
		for i := range n {
			bad := wr
			bad.Wrapped = bytes.Clone(wr.Wrapped)
			bad.Wrapped[i] ^= 0x01
			got, err := w.Unwrap(ctx, id, bad)
			switch {
			case err != nil:
				wantCode(t, err, errcode.KeyWrong, fmt.Sprintf("unwrap with byte %d of %d flipped", i, n))
				refused++
			case i >= n-48:
				t.Fatalf("unwrap with byte %d of %d flipped (in the sealed data key) succeeded", i, n)
			case !bytes.Equal(got, dk):
				t.Fatalf("unwrap with byte %d of %d flipped opened to another key", i, n)
			}
		}
		t.Logf("%d of %d single-bit changes refused; the rest are in a header the emulator does not check and open to the same key", refused, n)
	})
	t.Run("truncated", func(t *testing.T) {
		bad := wr
		bad.Wrapped = wr.Wrapped[:len(wr.Wrapped)-1]
		_, err := w.Unwrap(ctx, id, bad)
		wantCode(t, err, errcode.KeyWrong, "unwrap of a truncated ciphertext")
	})
	t.Run("not a KMS wrapping", func(t *testing.T) {
		bad := wr
		bad.Kind = seal.KindAge
		_, err := w.Unwrap(ctx, id, bad)
		wantCode(t, err, errcode.KeyWrong, "unwrap of an age wrapping")
	})
	t.Run("no KMS key named", func(t *testing.T) {
		bad := wr
		bad.KMSKeyID = ""
		_, err := w.Unwrap(ctx, id, bad)
		wantCode(t, err, errcode.ManifestInvalid, "unwrap of a wrapping naming no key")
	})
	t.Run("disabled key", func(t *testing.T) {
		k := kmstest.CreateKey(t, ep)
		kw := newWrapper(t, ep, k)
		kwr, err := kw.Wrap(ctx, id, dk)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kmstest.Client(ep).DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
		_, err = kw.Unwrap(ctx, id, kwr)
		wantCode(t, err, errcode.KeyWrong, "unwrap with a disabled key")
		_, err = kw.Wrap(ctx, id, dk)
		wantCode(t, err, errcode.KeyWrong, "wrap with a disabled key")
	})
	// The original still opens: nothing above changed it.
	if got, err := w.Unwrap(ctx, id, wr); err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("unwrap of the untouched wrapping: %v", err)
	}
}

func TestWrapWithMissingKey(t *testing.T) {
	ep := kmstest.Endpoint(t)
	dk := randomBytes(t, seal.DataKeySize)
	for _, key := range []string{"alias/sluice-test-no-such-alias", "00000000-0000-4000-8000-000000000000"} {
		w := newWrapper(t, ep, key)
		_, err := w.Wrap(context.Background(), dataKeyID(t), dk)
		wantCode(t, err, errcode.KeyWrong, "wrap with "+key)
		noKeyMaterial(t, err.Error(), dk, "the error")
	}
}

func TestEndpointFromEnvironment(t *testing.T) {
	ep := kmstest.Endpoint(t)
	arn := kmstest.CreateKey(t, ep)
	t.Setenv("AWS_ENDPOINT_URL_KMS", ep)
	w, err := New(context.Background(), Options{KeyID: arn})
	if err != nil {
		t.Fatal(err)
	}
	id, dk := dataKeyID(t), randomBytes(t, seal.DataKeySize)
	wr, err := w.Wrap(context.Background(), id, dk)
	if err != nil {
		t.Fatalf("wrap with the endpoint from AWS_ENDPOINT_URL_KMS: %v", err)
	}
	if got, err := w.Unwrap(context.Background(), id, wr); err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("unwrap: %v", err)
	}
	// Options.Endpoint wins over the environment.
	t.Setenv("AWS_ENDPOINT_URL_KMS", "http://127.0.0.1:1")
	w = newWrapper(t, ep, arn)
	if _, err := w.Unwrap(context.Background(), id, wr); err != nil {
		t.Fatalf("unwrap with Options.Endpoint beside another AWS_ENDPOINT_URL_KMS: %v", err)
	}
}

// TestEnvelope runs the wrapper through seal's envelopes: a new envelope,
// its stored form, a rekey from a passphrase to KMS and from one KMS key to
// another, and an envelope's wrapping moved under another key ID.
func TestEnvelope(t *testing.T) {
	ep := kmstest.Endpoint(t)
	ctx := context.Background()
	now := time.Now()
	kw := newWrapper(t, ep, kmstest.CreateKey(t, ep))

	k, env, err := seal.NewEnvelope(ctx, kw, now)
	if err != nil {
		t.Fatal(err)
	}
	if env.Wrap.Kind != seal.KindAWSKMS {
		t.Fatalf("envelope wrapped by %q", env.Wrap.Kind)
	}
	stored, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := seal.DecodeEnvelope(k.ID, stored)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := back.Open(ctx, kw)
	if err != nil {
		t.Fatal(err)
	}
	sameKey(t, k, opened)

	// Passphrase to KMS.
	pw, err := seal.NewPassphrase([]byte("correct horse battery staple"), "the test")
	if err != nil {
		t.Fatal(err)
	}
	pk, penv, err := seal.NewEnvelope(ctx, pw, now)
	if err != nil {
		t.Fatal(err)
	}
	kenv, err := penv.Rewrap(ctx, pw, kw)
	if err != nil {
		t.Fatal(err)
	}
	if kenv.KeyID != penv.KeyID || kenv.Wrap.Kind != seal.KindAWSKMS || kenv.Wrap.KMSKeyID == "" {
		t.Fatalf("rekeyed envelope is %+v", kenv)
	}
	opened, err = kenv.Open(ctx, kw)
	if err != nil {
		t.Fatal(err)
	}
	sameKey(t, pk, opened)
	_, err = kenv.Open(ctx, pw)
	wantCode(t, err, errcode.KeyWrong, "open a KMS envelope with a passphrase")
	_, err = penv.Open(ctx, kw)
	wantCode(t, err, errcode.KeyWrong, "open a passphrase envelope with KMS")

	// KMS key to KMS key: the new envelope names the new key.
	kw2 := newWrapper(t, ep, kmstest.CreateKey(t, ep))
	kenv2, err := kenv.Rewrap(ctx, kw, kw2)
	if err != nil {
		t.Fatal(err)
	}
	if kenv2.Wrap.KMSKeyID == kenv.Wrap.KMSKeyID {
		t.Fatal("rekey to another KMS key kept the old key's ID")
	}
	opened, err = kenv2.Open(ctx, kw2)
	if err != nil {
		t.Fatal(err)
	}
	sameKey(t, pk, opened)

	// One envelope's wrapping under another envelope's ID.
	moved := *kenv
	moved.KeyID = k.ID
	_, err = moved.Open(ctx, kw)
	wantCode(t, err, errcode.KeyWrong, "open a wrapping moved to another envelope")
}

// sameKey fails unless a and b are the same data key: what one seals, the
// other opens.
func sameKey(t *testing.T, a, b *seal.DataKey) {
	t.Helper()
	if a.ID != b.ID {
		t.Fatalf("key IDs %s and %s differ", a.ID, b.ID)
	}
	aad := seal.AAD("test")
	sealed, err := a.Seal(nil, []byte("hello"), aad)
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := b.Open(nil, sealed, aad); err != nil || string(plain) != "hello" {
		t.Fatalf("keys differ: %v", err)
	}
}

func TestStringHoldsNoSecret(t *testing.T) {
	ep := kmstest.Endpoint(t)
	arn := kmstest.CreateKey(t, ep)
	w := newWrapper(t, ep, arn)
	dk := randomBytes(t, seal.DataKeySize)
	wr, err := w.Wrap(context.Background(), dataKeyID(t), dk)
	if err != nil {
		t.Fatal(err)
	}
	s := w.String()
	if s != "AWS KMS key "+arn {
		t.Fatalf("String() = %q", s)
	}
	noKeyMaterial(t, s, dk, "String()")
	noKeyMaterial(t, fmt.Sprintf("%v %+v", w, w), dk, "the formatted wrapper")
	if strings.Contains(s, os.Getenv("AWS_SECRET_ACCESS_KEY")) {
		t.Fatalf("String() holds the AWS secret key: %q", s)
	}
	// A refusal's message names the keys, not the key material.
	_, err = w.Unwrap(context.Background(), dataKeyID(t), wr)
	wantCode(t, err, errcode.KeyWrong, "unwrap under another ID")
	noKeyMaterial(t, err.Error(), dk, "the refusal")
}

// TestUnreachableIsUnavailable: nothing listens at the endpoint; both calls
// fail as KeyUnavailable within seconds, after the bounded retries.
func TestUnreachableIsUnavailable(t *testing.T) {
	kmstest.Env(t)
	w := newWrapper(t, "http://127.0.0.1:1", "alias/sluice-test")
	wr := seal.Wrapping{Kind: seal.KindAWSKMS, KMSKeyID: "arn:aws:kms:us-east-1:111122223333:key/00000000-0000-4000-8000-000000000000", Wrapped: []byte("x")}
	start := time.Now()
	_, err := w.Wrap(context.Background(), dataKeyID(t), randomBytes(t, seal.DataKeySize))
	wantCode(t, err, errcode.KeyUnavailable, "wrap with nothing listening")
	_, err = w.Unwrap(context.Background(), dataKeyID(t), wr)
	wantCode(t, err, errcode.KeyUnavailable, "unwrap with nothing listening")
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("two calls to a closed port took %v", d)
	}
	if !strings.Contains(err.Error(), "http://127.0.0.1:1") {
		t.Fatalf("the error does not say where KMS was asked: %v", err)
	}
}

// fakeKMS answers every call with status and the KMS JSON error code, and
// counts the calls.
func fakeKMS(t *testing.T, status int, code string) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		rw.Header().Set("Content-Type", "application/x-amz-json-1.1")
		rw.WriteHeader(status)
		fmt.Fprintf(rw, `{"__type":%q,"message":"from the test"}`, code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// TestErrorClasses: what KMS answers decides the code, and what retrying
// can fix is retried a bounded number of times.
func TestErrorClasses(t *testing.T) {
	kmstest.Env(t)
	wr := seal.Wrapping{Kind: seal.KindAWSKMS, KMSKeyID: "arn:aws:kms:us-east-1:111122223333:key/00000000-0000-4000-8000-000000000000", Wrapped: []byte("x")}
	for _, c := range []struct {
		status   int
		code     string
		want     errcode.Code
		attempts int32
	}{
		{500, "KMSInternalException", errcode.KeyUnavailable, maxAttempts},
		{503, "ServiceUnavailable", errcode.KeyUnavailable, maxAttempts},
		{400, "ThrottlingException", errcode.KeyUnavailable, maxAttempts},
		{400, "UnrecognizedClientException", errcode.KeyUnavailable, 1},
		{400, "InvalidCiphertextException", errcode.KeyWrong, 1},
		{400, "IncorrectKeyException", errcode.KeyWrong, 1},
		{400, "AccessDeniedException", errcode.KeyWrong, 1},
		{400, "DisabledException", errcode.KeyWrong, 1},
		{400, "NotFoundException", errcode.KeyWrong, 1},
		{400, "KMSInvalidStateException", errcode.KeyWrong, 1},
	} {
		t.Run(c.code, func(t *testing.T) {
			ep, n := fakeKMS(t, c.status, c.code)
			w := newWrapper(t, ep, "alias/sluice-test")
			_, err := w.Unwrap(context.Background(), dataKeyID(t), wr)
			wantCode(t, err, c.want, c.code)
			if got := n.Load(); got != c.attempts {
				t.Fatalf("%s was sent %d times; want %d", c.code, got, c.attempts)
			}
		})
	}
}

// TestNotKMSIsUnavailable: an endpoint that answers, but not as KMS (a
// wrong port, a proxy's error page), is a setup problem, not a wrong key.
func TestNotKMSIsUnavailable(t *testing.T) {
	kmstest.Env(t)
	wr := seal.Wrapping{Kind: seal.KindAWSKMS, KMSKeyID: "arn:aws:kms:us-east-1:111122223333:key/00000000-0000-4000-8000-000000000000", Wrapped: []byte("x")}
	for _, status := range []int{403, 404, 405} {
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", "text/html")
			rw.WriteHeader(status)
			fmt.Fprint(rw, "<html><body>not here</body></html>")
		}))
		w := newWrapper(t, srv.URL, "alias/sluice-test")
		_, err := w.Unwrap(context.Background(), dataKeyID(t), wr)
		srv.Close()
		wantCode(t, err, errcode.KeyUnavailable, fmt.Sprintf("an HTML %d page", status))
	}
}

// TestHungKMSIsUnavailable: a KMS that accepts and never answers ends with
// the caller's deadline, as KeyUnavailable.
func TestHungKMSIsUnavailable(t *testing.T) {
	kmstest.Env(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	w := newWrapper(t, srv.URL, "alias/sluice-test")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := w.Wrap(ctx, dataKeyID(t), randomBytes(t, seal.DataKeySize))
	wantCode(t, err, errcode.KeyUnavailable, "wrap with a KMS that does not answer")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a 1 s deadline took %v", d)
	}
	// A cancelled caller gets its cancellation back, not a verdict on the key.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = w.Wrap(ctx, dataKeyID(t), randomBytes(t, seal.DataKeySize))
	if !errors.Is(err, context.Canceled) || errcode.Is(err, errcode.KeyUnavailable) || errcode.Is(err, errcode.KeyWrong) {
		t.Fatalf("wrap with a cancelled context: %v", err)
	}
}

// TestNoCredentials: credentials the SDK cannot find are the worker's
// setup, which can be fixed without another key: KeyUnavailable.
func TestNoCredentials(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ep, n := fakeKMS(t, 500, "KMSInternalException")
	w := newWrapper(t, ep, "alias/sluice-test")
	_, err := w.Wrap(context.Background(), dataKeyID(t), randomBytes(t, seal.DataKeySize))
	wantCode(t, err, errcode.KeyUnavailable, "wrap without credentials")
	if n.Load() != 0 {
		t.Fatalf("an unsigned request reached KMS")
	}
}

func TestNewOptions(t *testing.T) {
	kmstest.Env(t)
	ctx := context.Background()
	_, err := New(ctx, Options{})
	wantCode(t, err, errcode.KeyRequired, "New without a key")
	for _, ep := range []string{"localhost:4599", "ftp://127.0.0.1:4599", "http://user:secret@127.0.0.1:4599", "http://"} {
		_, err := New(ctx, Options{KeyID: "alias/k", Endpoint: ep})
		wantCode(t, err, errcode.ConfigInvalid, "New with endpoint "+ep)
		if strings.Contains(err.Error(), "secret") {
			t.Fatalf("the error repeats the endpoint's password: %v", err)
		}
	}

	// The region: Options, else the AWS configuration, else DefaultRegion.
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	w, err := New(ctx, Options{KeyID: "alias/k"})
	if err != nil {
		t.Fatal(err)
	}
	if w.region != DefaultRegion {
		t.Fatalf("region %q; want %s", w.region, DefaultRegion)
	}
	t.Setenv("AWS_REGION", "eu-west-2")
	if w, err = New(ctx, Options{KeyID: "alias/k"}); err != nil || w.region != "eu-west-2" {
		t.Fatalf("region from AWS_REGION: %v %v", w, err)
	}
	if w, err = New(ctx, Options{KeyID: "alias/k", Region: "ap-south-1"}); err != nil || w.region != "ap-south-1" {
		t.Fatalf("region from Options: %v %v", w, err)
	}
	if w.Kind() != seal.KindAWSKMS {
		t.Fatalf("Kind() = %q", w.Kind())
	}
}
