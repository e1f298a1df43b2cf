package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/seal"
)

// chainPassphraseEnv names the variable every worker of the harness holds
// the chain passphrase in; tests pass the name, never the passphrase.
const chainPassphraseEnv = "SLUICE_IT_CHAIN_PASSPHRASE"

// chainPassphraseNewEnv holds a second passphrase, the one a rekey moves a
// chain to.
const chainPassphraseNewEnv = "SLUICE_IT_CHAIN_PASSPHRASE_NEW"

// chainPassphrase and chainPassphraseNew are random per test binary, so a
// leak is found by grep.
var chainPassphrase, chainPassphraseNew = randomPassphrase(), randomPassphrase()

func randomPassphrase() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "pass-" + hex.EncodeToString(b)
}

// passphraseEnv is what every worker and CLI run of the harness holds.
func passphraseEnv() []string {
	return []string{chainPassphraseEnv + "=" + chainPassphrase, chainPassphraseNewEnv + "=" + chainPassphraseNew}
}

// signingPair is a key pair written by `sluice backup keygen`.
type signingPair struct{ priv, pub string }

func newSigningPair(t *testing.T) signingPair {
	t.Helper()
	out := filepath.Join(t.TempDir(), "signing.key")
	mustSluice(t, "backup", "keygen", "--out", out)
	return signingPair{priv: out, pub: out + ".pub"}
}

// writerTrust are the flags of a writer that encrypts under the harness
// passphrase and signs with kp.
func writerTrust(kp signingPair) []string {
	return []string{"--encrypt", "--key-passphrase-env", chainPassphraseEnv, "--sign-key-file", kp.priv}
}

// readerTrust are the flags of a reader that opens with the harness
// passphrase and requires kp's signature.
func readerTrust(kp signingPair) []string {
	return []string{"--key-passphrase-env", chainPassphraseEnv, "--verify-key-file", kp.pub, "--require-signature"}
}

// chainDir is the folder of a file:// chain URL.
func chainDir(url string) string { return strings.TrimPrefix(url, "file://") }

// copyChain copies a file chain's folder and returns the copy's URL.
func copyChain(t *testing.T, url string) string {
	t.Helper()
	src, dst := chainDir(url), filepath.Join(t.TempDir(), "chain")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return "file://" + dst
}

// dataKeys returns the raw data keys of a passphrase chain, for a test to
// search for them where they must never be.
func dataKeys(t *testing.T, url string) [][]byte {
	t.Helper()
	ctx := context.Background()
	ch, _ := openChainAt(t, url)
	ids, err := ch.ListEnvelopes(ctx)
	if err != nil || len(ids) == 0 {
		t.Fatalf("envelopes of %s: %v, %v", url, ids, err)
	}
	w, _ := seal.NewPassphrase([]byte(chainPassphrase), "test")
	var keys [][]byte
	for _, id := range ids {
		env, err := ch.ReadEnvelope(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		k, err := env.Open(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.Material())
	}
	return keys
}
