package chain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

// trustedChain is a chain in a folder and the handles that read it.
type trustedChain struct {
	dir string
	raw *chain.Chain
	b   *chaintest.Builder
}

func newTrustedChain(t *testing.T, tr chain.Trust) *trustedChain {
	t.Helper()
	dir := t.TempDir()
	s, err := blobstore.Open(context.Background(), "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw := chain.Open(s)
	ch := raw.WithKeyring(chain.NewKeyring(tr))
	ch.SetCheckpointPolicy(chain.CheckpointPolicy{Every: 2, Bytes: 1 << 20})
	b := chaintest.NewBuilder(t, ch, time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	b.Incremental(b.Txn(chaintest.Insert(1, "secret-value-alpha"), chaintest.Insert(2, "secret-value-beta")))
	b.Incremental(b.Txn(chaintest.Update(1, "secret-value-gamma")))
	b.Incremental(b.Txn(chaintest.Delete(2)))
	return &trustedChain{dir: dir, raw: raw, b: b}
}

func (tc *trustedChain) reader(tr chain.Trust) *chain.Chain {
	return tc.raw.WithKeyring(chain.NewKeyring(tr))
}

func passphrase(t *testing.T, p string) seal.Wrapper {
	t.Helper()
	w, err := seal.NewPassphrase([]byte(p), "test")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func wantCode(t *testing.T, err error, code errcode.Code) {
	t.Helper()
	if !errcode.Is(err, code) {
		t.Fatalf("got %v, want %s", err, code)
	}
}

// readAll reads every manifest and chunk of the chain through ch.
func readAll(ctx context.Context, ch *chain.Chain) error {
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return err
	}
	for _, l := range cat.Links() {
		m, err := ch.GetManifest(ctx, l.ID)
		if err != nil {
			return err
		}
		for _, ref := range m.AllChunks() {
			if _, _, err := ch.ReadChunk(ctx, ref); err != nil {
				return err
			}
		}
	}
	return nil
}

// An encrypted chain reads back whole with the key, stores none of its
// values, table names or schema in the clear, and refuses every reader
// without the right key; retention still lists what to delete.
func TestSealedChainRoundTrip(t *testing.T) {
	ctx := context.Background()
	tc := newTrustedChain(t, chain.Trust{Wrapper: passphrase(t, "pass one"), Encrypt: true})
	if err := readAll(ctx, tc.reader(chain.Trust{Wrapper: passphrase(t, "pass one")})); err != nil {
		t.Fatal(err)
	}
	err := filepath.Walk(tc.dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, plain := range []string{"secret-value", "public.t", `"integer"`, "pass one"} {
			if bytes.Contains(data, []byte(plain)) {
				t.Errorf("%s holds %q in the clear", path, plain)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tc.raw.ListEnvelopes(ctx)
	if err != nil || len(ids) != 1 {
		t.Fatalf("envelopes %v, %v: one writer draws one data key", ids, err)
	}
	// Without a key: the catalog reads (its shape is not secret), the
	// manifests and chunks do not, and retention still finds the chunks.
	cat, err := tc.raw.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tc.raw.GetManifest(ctx, cat.Tip().ID)
	wantCode(t, err, errcode.KeyRequired)
	chunks, err := tc.raw.ManifestChunks(ctx, cat.Tip().ID)
	if err != nil || len(chunks) == 0 {
		t.Fatalf("chunks without the key: %v, %v", chunks, err)
	}
	// The wrong passphrase.
	wantCode(t, readAll(ctx, tc.reader(chain.Trust{Wrapper: passphrase(t, "pass two")})), errcode.KeyWrong)
	// A manifest stored under another link's ID fails authentication.
	links := cat.Links()
	a, b := filepath.Join(tc.dir, chain.ManifestKey(links[1].ID)), filepath.Join(tc.dir, chain.ManifestKey(links[2].ID))
	data, _ := os.ReadFile(a)
	var sm map[string]any
	if err := json.Unmarshal(data, &sm); err != nil {
		t.Fatal(err)
	}
	sm["id"] = links[2].ID
	forged, _ := json.Marshal(sm)
	if err := os.WriteFile(b, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = tc.reader(chain.Trust{Wrapper: passphrase(t, "pass one")}).GetManifest(ctx, links[2].ID)
	wantCode(t, err, errcode.ChunkSealBroken)
}

// A reader given a key accepts no plaintext link: a plaintext chain (or
// plaintext put in place of a sealed link) is refused.
func TestKeyedReaderRefusesPlaintext(t *testing.T) {
	ctx := context.Background()
	tc := newTrustedChain(t, chain.Trust{})
	if err := readAll(ctx, tc.raw); err != nil {
		t.Fatal(err)
	}
	wantCode(t, readAll(ctx, tc.reader(chain.Trust{Wrapper: passphrase(t, "p")})), errcode.ChainNotSealed)
}

// A chunk whose stored bytes changed is refused before it is opened.
func TestSealedChunkFlippedByte(t *testing.T) {
	ctx := context.Background()
	tc := newTrustedChain(t, chain.Trust{Wrapper: passphrase(t, "p"), Encrypt: true})
	r := tc.reader(chain.Trust{Wrapper: passphrase(t, "p")})
	m, err := r.GetManifest(ctx, tc.b.Cat.Tip().ID)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tc.dir, m.Chunks[0].Key)
	data, _ := os.ReadFile(path)
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.ReadChunk(ctx, m.Chunks[0])
	wantCode(t, err, errcode.ChunkCorrupt)
}

// Public-key mode: the writer holds recipients only and cannot read what
// it wrote; the identity reads it.
func TestAgeChainWriteOnly(t *testing.T) {
	ctx := context.Background()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	w, err := seal.NewAgeRecipients(id.Recipient().String(), "--encrypt-to")
	if err != nil {
		t.Fatal(err)
	}
	tc := newTrustedChain(t, chain.Trust{Wrapper: w, Encrypt: true})
	wantCode(t, readAll(ctx, tc.reader(chain.Trust{Wrapper: w})), errcode.KeyRequired)
	r, err := seal.NewAgeIdentities(id.String(), "identity file")
	if err != nil {
		t.Fatal(err)
	}
	if err := readAll(ctx, tc.reader(chain.Trust{Wrapper: r})); err != nil {
		t.Fatal(err)
	}
}

func signingPair(t *testing.T) (*seal.SigningKey, *seal.VerifyKey) {
	t.Helper()
	priv, pub, _, err := seal.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	sk, err := seal.ParseSigningKey(priv, "k")
	if err != nil {
		t.Fatal(err)
	}
	vk, err := seal.ParseVerifyKey(pub, "k.pub")
	if err != nil {
		t.Fatal(err)
	}
	return sk, vk
}

// Signed generations verify; a changed, re-signed, unsigned or stripped
// generation is refused when the reader verifies or requires signatures.
func TestSignedCatalog(t *testing.T) {
	ctx := context.Background()
	sk, vk := signingPair(t)
	otherSK, otherVK := signingPair(t)
	tc := newTrustedChain(t, chain.Trust{Signer: sk})
	verifying := chain.Trust{Verifier: vk, RequireSignature: true}
	cat, err := tc.reader(verifying).LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !cat.Signed() || cat.StoredHash() == "" {
		t.Fatalf("signed %v, hash %q", cat.Signed(), cat.StoredHash())
	}
	_, err = tc.reader(chain.Trust{Verifier: otherVK}).LoadCatalog(ctx)
	wantCode(t, err, errcode.SignatureInvalid)

	// A writer without the key cannot add unsigned generations to it.
	unsigned := tc.reader(chain.Trust{})
	next := cat.Next()
	if err := unsigned.CommitCatalog(ctx, next); !errcode.Is(err, errcode.KeyRequired) {
		t.Fatalf("unsigned commit onto a signed chain: %v", err)
	}

	last := filepath.Join(tc.dir, chain.CommitKey(cat.Generation))
	orig, _ := os.ReadFile(last)
	var c map[string]any
	if err := json.Unmarshal(orig, &c); err != nil {
		t.Fatal(err)
	}
	// The signature removed.
	stripped := map[string]any{}
	for k, v := range c {
		if k != "signature" {
			stripped[k] = v
		}
	}
	write := func(v any) {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(last, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(stripped)
	_, err = tc.reader(verifying).LoadCatalog(ctx)
	wantCode(t, err, errcode.SignatureMissing)
	// Changed after signing.
	changed := map[string]any{}
	for k, v := range c {
		changed[k] = v
	}
	changed["chain_id"] = strings.Repeat("f", 40)
	write(changed)
	_, err = tc.reader(verifying).LoadCatalog(ctx)
	wantCode(t, err, errcode.SignatureInvalid)
	// Re-signed by another key: the commit is rebuilt from its fields and
	// signed by otherSK, which a reader verifying with vk refuses.
	var commit chain.CatalogCommit
	if err := json.Unmarshal(orig, &commit); err != nil {
		t.Fatal(err)
	}
	commit.Signature = nil
	msg, _ := json.Marshal(&commit)
	commit.Signature = &chain.CatalogSignature{KeyID: otherSK.ID, Sig: otherSK.Sign("catalog commit", msg)}
	write(&commit)
	_, err = tc.reader(verifying).LoadCatalog(ctx)
	wantCode(t, err, errcode.SignatureInvalid)
	if _, err := tc.reader(chain.Trust{Verifier: otherVK}).LoadCatalog(ctx); !errcode.Is(err, errcode.SignatureInvalid) {
		// Earlier generations (the checkpoint) still carry vk's signature.
		t.Fatalf("a chain signed by two keys verified with one: %v", err)
	}
	if err := os.WriteFile(last, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.reader(verifying).LoadCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	// A checkpoint changed after signing.
	cps, _ := filepath.Glob(filepath.Join(tc.dir, "catalog", "checkpoint-*"))
	if len(cps) == 0 {
		t.Fatal("no checkpoint written")
	}
	newest := cps[len(cps)-1]
	cpData, _ := os.ReadFile(newest)
	var cp map[string]any
	_ = json.Unmarshal(cpData, &cp)
	cp["created_at"] = "2020-01-01T00:00:00Z"
	b, _ := json.Marshal(cp)
	_ = os.WriteFile(newest, b, 0o644)
	_, err = tc.reader(verifying).LoadCatalog(ctx)
	wantCode(t, err, errcode.SignatureInvalid)
}

// An unsigned chain is refused when signatures are required, and read as
// ever when they are not.
func TestUnsignedChainRequired(t *testing.T) {
	ctx := context.Background()
	_, vk := signingPair(t)
	tc := newTrustedChain(t, chain.Trust{})
	_, err := tc.reader(chain.Trust{Verifier: vk, RequireSignature: true}).LoadCatalog(ctx)
	wantCode(t, err, errcode.SignatureMissing)
	if _, err := tc.reader(chain.Trust{Verifier: vk}).LoadCatalog(ctx); err != nil {
		t.Fatal(err)
	}
}

// A write-only writer with an identity of its own reads back its manifests
// (the schema at the tip, after a restart) but none of its chunks; the
// target's identity reads everything.
func TestAgeWriterReadsManifestsOnly(t *testing.T) {
	ctx := context.Background()
	target, _ := age.GenerateX25519Identity()
	writer, _ := age.GenerateX25519Identity()
	rcpt, err := seal.NewAgeRecipients(target.Recipient().String(), "--encrypt-to")
	if err != nil {
		t.Fatal(err)
	}
	own, err := seal.NewAgeIdentities(writer.String(), "writer identity")
	if err != nil {
		t.Fatal(err)
	}
	chunks, manifests := seal.NewAgeWriter(rcpt, own)
	tr := chain.Trust{Wrapper: chunks, ManifestWrapper: manifests, Encrypt: true}
	tc := newTrustedChain(t, tr)
	restarted := tc.reader(tr)
	cat, err := restarted.LoadCatalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := restarted.SchemaAt(ctx, cat, cat.Tip().ID)
	if err != nil || schema == nil || len(schema.Tables) != 1 {
		t.Fatalf("the writer's schema at the tip: %v, %v", schema, err)
	}
	m, err := restarted.GetManifest(ctx, cat.Tip().ID)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = restarted.ReadChunk(ctx, m.Chunks[0])
	wantCode(t, err, errcode.KeyWrong)
	ids, _ := tc.raw.ListEnvelopes(ctx)
	if len(ids) != 2 {
		t.Fatalf("envelopes %v: a chunk key and a manifest key", ids)
	}
	reader, _ := seal.NewAgeIdentities(target.String(), "target identity")
	if err := readAll(ctx, tc.reader(chain.Trust{Wrapper: reader})); err != nil {
		t.Fatal(err)
	}
}

// A catalog cached for a handle that checks no signature never serves one
// that requires them: the second reads and verifies for itself.
func TestCatalogCacheKeepsVerifiersApart(t *testing.T) {
	ctx := context.Background()
	tc := newTrustedChain(t, chain.Trust{})
	_, vk := signingPair(t)
	var cache chain.CatalogCache
	if _, err := cache.Latest(ctx, tc.raw); err != nil {
		t.Fatal(err)
	}
	_, err := cache.Latest(ctx, tc.reader(chain.Trust{Verifier: vk, RequireSignature: true}))
	wantCode(t, err, errcode.SignatureMissing)
}

// After StartNewKeys the writer seals under a new data key; what it sealed
// before still opens.
func TestStartNewKeys(t *testing.T) {
	ctx := context.Background()
	tr := chain.Trust{Wrapper: passphrase(t, "p"), Encrypt: true}
	tc := newTrustedChain(t, tr)
	tc.b.Ch.Keyring().StartNewKeys()
	tc.b.Rotate()
	tc.b.Incremental(tc.b.Txn(chaintest.Insert(3, "after rotation")))
	ids, err := tc.raw.ListEnvelopes(ctx)
	if err != nil || len(ids) != 2 {
		t.Fatalf("envelopes %v, %v: one per segment", ids, err)
	}
	if err := readAll(ctx, tc.reader(chain.Trust{Wrapper: passphrase(t, "p")})); err != nil {
		t.Fatal(err)
	}
}
