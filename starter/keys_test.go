package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/keyref"
	"github.com/sluicehq/sluice/internal/seal"
)

// An age key pair for tests only.
const (
	testRecipient = "age1rnqakvsfgr4xje5vpcwzdq824pxps7gqy732fr99dvx9yrhxh4vqatxz8n"
	testIdentity  = "AGE-SECRET-KEY-1NTM8XXG9YWRASAEVJJ057NFQF88N54K0WTFGZ37A4279WETTM75SXA2HET"
)

// Key flags are checked before anything starts: each misuse exits 2 with
// its code (no Temporal is reachable in these tests), and never echoes a
// secret given by mistake.
func TestKeyFlagsRefusedBeforeStart(t *testing.T) {
	cleanEnv(t)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	dir := t.TempDir()
	src := []string{"--source", "postgres://app@db/app", "--target", dir}
	for _, tc := range []struct {
		args []string
		code errcode.Code
		says string
	}{
		{append([]string{"backup", "full", "--encrypt"}, src...), errcode.KeyRequired, "--encrypt needs a key"},
		{append([]string{"backup", "full", "--key-passphrase-env", "P"}, src...), errcode.Usage, "add --encrypt"},
		{append([]string{"backup", "full", "--encrypt", "--key-passphrase-env", "P", "--kms-key", "alias/k"}, src...), errcode.Usage, "--key-passphrase-env, --kms-key"},
		{append([]string{"backup", "full", "--encrypt-to", testIdentity}, src...), errcode.Usage, "age identity (a secret key)"},
		{append([]string{"backup", "full", "--encrypt-to", "age1nope"}, src...), errcode.Usage, "not an age recipient"},
		{append([]string{"backup", "full", "--encrypt", "--kms-key", "k", "--kms-endpoint", "localhost:4599"}, src...), errcode.Usage, "--kms-endpoint"},
		{append([]string{"backup", "full", "--encrypt", "--key-passphrase-env", "correct horse"}, src...), errcode.Usage, "never the secret itself"},
		{append([]string{"backup", "stream", "run", "--key-identity-file", "/id"}, src...), errcode.Usage, "add --encrypt"},
		{append([]string{"backup", "stream", "run", "--require-signature"}, src...), errcode.Usage, "--require-signature needs --verify-key-file"},
		{append([]string{"backup", "incremental", "--sign-key-file", "/k", "--sign-key-env", "K"}, src...), errcode.Usage, "give one"},
		{[]string{"restore", "--backup-target", dir, "--target", "postgres://app@db/app", "--require-signature"}, errcode.Usage, "--verify-key-file"},
		{[]string{"sync", "from-backup", "run", "--backup-target", dir, "--target", "postgres://app@db/app", "--stream-id", "s", "--kms-region", "eu-west-1"}, errcode.Usage, "need --kms-key"},
		{[]string{"backup", "verify-chain", "--target", dir, "--key-passphrase-env", "P", "--key-identity-file", "/id"}, errcode.Usage, "give one"},
		{[]string{"backup", "prune", "--target", dir, "--keep-segments", "1", "--require-signature"}, errcode.Usage, "--verify-key-file"},
		{[]string{"backup", "compact", "--target", dir, "--encrypt"}, errcode.Usage, "unknown flag: --encrypt"},
		{[]string{"backup", "prune", "--target", dir, "--keep-segments", "1", "--key-passphrase-env", "P"}, errcode.Usage, "unknown flag"},
		{[]string{"verify", "--source", "postgres://app@db/app", "--target", "postgres://app@db2/app", "--key-passphrase-env", "P"}, errcode.Usage, "--wait-broker"},
		{[]string{"backup", "rekey", "--target", dir, "--new-key-passphrase-env", "N"}, errcode.KeyRequired, "current key"},
		{[]string{"backup", "rekey", "--target", dir, "--key-passphrase-env", "O"}, errcode.Usage, "give the new key"},
		{[]string{"backup", "rekey", "--target", dir, "--key-passphrase-env", "O", "--new-key-passphrase-env", "N", "--new-kms-key", "k"}, errcode.Usage, "--new-key-passphrase-env, --new-kms-key"},
		{[]string{"backup", "rekey", "--target", dir, "--encrypt-to", testRecipient, "--new-key-passphrase-env", "N"}, errcode.Usage, "unknown flag"},
		{[]string{"backup", "keygen"}, errcode.Usage, "--out PATH is required"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != errcode.ExitUsage || !strings.Contains(errOut, string(tc.code)) || !strings.Contains(errOut, tc.says) {
			t.Errorf("%s: exit %d, stderr %s; want exit 2, %s saying %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.says)
		}
		if strings.Contains(errOut, "started workflow") || strings.Contains(errOut, string(errcode.TemporalUnreachable)) {
			t.Errorf("%s: got as far as Temporal: %s", strings.Join(tc.args, " "), errOut)
		}
		if strings.Contains(errOut, testIdentity) || strings.Contains(errOut, "correct horse") {
			t.Errorf("%s: stderr echoes a secret: %s", strings.Join(tc.args, " "), errOut)
		}
	}
}

// Flags that go together pass the checks and reach Temporal (here: none
// listening, exit 1).
func TestKeyFlagsAccepted(t *testing.T) {
	cleanEnv(t)
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	dir := t.TempDir()
	src := []string{"--source", "postgres://app@db/app", "--target", dir}
	for _, args := range [][]string{
		append([]string{"backup", "full", "--encrypt", "--key-passphrase-env", "P", "--sign-key-file", "/k"}, src...),
		append([]string{"backup", "stream", "run", "--encrypt-to", testRecipient, "--key-identity-file", "/own.txt", "--sign-key-env", "K", "--verify-key-file", "/k.pub", "--require-signature"}, src...),
		append([]string{"backup", "incremental", "--encrypt", "--kms-key", "alias/sluice", "--kms-region", "eu-west-1", "--kms-endpoint", "http://127.0.0.1:4599"}, src...),
		{"sync", "from-backup", "run", "--backup-target", dir, "--target", "postgres://app@db/app", "--stream-id", "s", "--key-identity-file", "/id", "--verify-key-file", "/k.pub", "--require-signature"},
		{"restore", "--backup-target", dir, "--target", "postgres://app@db/app", "--key-passphrase-file", "/pw"},
		{"backup", "compact", "--target", dir, "--key-passphrase-env", "P", "--sign-key-file", "/k"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != errcode.ExitRuntime || !strings.Contains(errOut, string(errcode.TemporalUnreachable)) {
			t.Errorf("%s: exit %d, stderr %s; want exit 1 at Temporal", strings.Join(args, " "), code, errOut)
		}
	}
}

// What a command hands a workflow is references: variable names, paths,
// public recipients, never a key.
func TestStoreRefCarriesReferencesOnly(t *testing.T) {
	t.Setenv("SLUICE_TEST_PASS", "the-passphrase-itself")
	s := storeFlags{keys: keyFlags{use: keysOpen | keysEncrypt | keysSign | keysVerify,
		passphraseEnv: "SLUICE_TEST_PASS", encrypt: true, signKeyFile: "/keys/sign", verifyKeyFile: "/keys/sign.pub", requireSignature: true}}
	st, err := s.ref("--target", "s3://bucket/chain")
	if err != nil {
		t.Fatal(err)
	}
	want := keyref.Ref{PassphraseEnv: "SLUICE_TEST_PASS", Encrypt: true, SignKeyFile: "/keys/sign", VerifyKeyFile: "/keys/sign.pub", RequireSignature: true}
	if st.Trust.String() != want.String() {
		t.Fatalf("trust %s, want %s", st.Trust, want)
	}
	b, _ := json.Marshal(st)
	if strings.Contains(string(b), "the-passphrase-itself") || !strings.Contains(string(b), `"passphrase_env":"SLUICE_TEST_PASS"`) {
		t.Fatalf("store reference %s", b)
	}
	// --encrypt-to implies --encrypt; compact seals when given the key.
	s = storeFlags{keys: keyFlags{use: keysOpen | keysEncrypt, encryptTo: []string{testRecipient}}}
	if st, err := s.ref("--target", "s3://b"); err != nil || !st.Trust.Encrypt {
		t.Fatalf("--encrypt-to: %+v, %v", st.Trust, err)
	}
	s = storeFlags{keys: keyFlags{use: keysOpen | keysImplyEncrypt, passphraseFile: "/pw"}}
	if st, err := s.ref("--target", "s3://b"); err != nil || !st.Trust.Encrypt {
		t.Fatalf("compact's key: %+v, %v", st.Trust, err)
	}
}

func TestKeygen(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "sign")
	code, stdout, errOut := runCLI(t, "backup", "keygen", "--out", out)
	if code != errcode.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	priv, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(out + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(out + ".pub"); fi.Mode().Perm()&0o077 == 0o077 || fi.Mode().Perm()&0o600 != 0o600 {
		t.Fatalf("public key mode %v", fi.Mode().Perm())
	}
	sk, err := seal.ParseSigningKey(priv, out)
	if err != nil {
		t.Fatal(err)
	}
	vk, err := seal.ParseVerifyKey(pub, out+".pub")
	if err != nil {
		t.Fatal(err)
	}
	if sk.ID != vk.ID || !strings.Contains(stdout, "signing key "+sk.ID+"\n") {
		t.Fatalf("IDs %s and %s; stdout %s", sk.ID, vk.ID, stdout)
	}
	if strings.Contains(stdout, "PRIVATE KEY") {
		t.Fatalf("stdout prints the key: %s", stdout)
	}
	if !vk.Verify("test", []byte("m"), sk.Sign("test", []byte("m"))) {
		t.Fatal("the pair does not verify")
	}

	// Never overwritten: not the key, not its .pub.
	code, _, errOut = runCLI(t, "backup", "keygen", "--out", out)
	if code != errcode.ExitUsage || !strings.Contains(errOut, "exists") {
		t.Fatalf("second keygen: exit %d, %s", code, errOut)
	}
	if again, _ := os.ReadFile(out); !bytes.Equal(again, priv) {
		t.Fatal("the private key was overwritten")
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other+".pub", []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, "backup", "keygen", "--out", other)
	if code != errcode.ExitUsage || !strings.Contains(errOut, other+".pub exists") {
		t.Fatalf("keygen onto an existing .pub: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("a private key was written beside the existing .pub: %v", err)
	}
}

// sealedChain writes a chain sealed under the passphrase in env: a full
// and an incremental by one writer, another incremental by a second (so
// two data keys).
func sealedChain(t *testing.T, dir, env string) {
	t.Helper()
	ctx := context.Background()
	bs, err := blobstore.Open(ctx, "file://"+dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := keyref.Ref{PassphraseEnv: env, Encrypt: true}.Trust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := chaintest.NewBuilder(t, chain.Open(bs).WithKeyring(chain.NewKeyring(tr)), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	b.Incremental(b.Txn(chaintest.Insert(2, "secret-row-two")))
	b.Ch = chain.Open(bs).WithKeyring(chain.NewKeyring(tr))
	b.Incremental(b.Txn(chaintest.Insert(3, "secret-row-three")))
}

// storeDigests returns the SHA-256 of every object under dir, by path.
func storeDigests(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func changedObjects(before, after map[string][32]byte) []string {
	var out []string
	for k, v := range after {
		if before[k] != v {
			out = append(out, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k+" (deleted)")
		}
	}
	return out
}

func onlyEnvelopes(objs []string) bool {
	for _, o := range objs {
		if !strings.HasPrefix(filepath.ToSlash(o), chain.KeysPrefix) {
			return false
		}
	}
	return true
}

// Rekey rewraps every data key and nothing else; a wrong current key is
// refused with nothing written; a second run finds the keys done; the
// chain reads with the new key (here through verify-chain --chunks).
func TestRekey(t *testing.T) {
	cleanEnv(t)
	t.Setenv("SLUICE_TEST_OLD", "old passphrase")
	t.Setenv("SLUICE_TEST_NEW", "new passphrase")
	t.Setenv("SLUICE_TEST_WRONG", "not the passphrase")
	dir := t.TempDir()
	sealedChain(t, dir, "SLUICE_TEST_OLD")
	before := storeDigests(t, dir)
	keys := 0
	for k := range before {
		if strings.HasPrefix(filepath.ToSlash(k), chain.KeysPrefix) {
			keys++
		}
	}
	if keys != 2 {
		t.Fatalf("the chain holds %d data keys, want 2", keys)
	}

	code, _, errOut := runCLI(t, "backup", "verify-chain", "--target", dir)
	if code != errcode.ExitUsage || !strings.Contains(errOut, string(errcode.KeyRequired)) {
		t.Fatalf("verify-chain without a key: exit %d, %s", code, errOut)
	}

	code, _, errOut = runCLI(t, "backup", "rekey", "--target", dir, "--key-passphrase-env", "SLUICE_TEST_WRONG", "--new-key-passphrase-env", "SLUICE_TEST_NEW")
	if code != errcode.ExitRefused || !strings.Contains(errOut, string(errcode.KeyWrong)) || !strings.Contains(errOut, "nothing written") {
		t.Fatalf("rekey with a wrong key: exit %d, %s", code, errOut)
	}
	if ch := changedObjects(before, storeDigests(t, dir)); len(ch) > 0 {
		t.Fatalf("a refused rekey changed %v", ch)
	}

	code, out, errOut := runCLI(t, "backup", "rekey", "--target", dir, "--key-passphrase-env", "SLUICE_TEST_OLD", "--new-key-passphrase-env", "SLUICE_TEST_NEW", "--dry-run")
	if code != errcode.ExitOK || !strings.Contains(out, "dry run: all 2 data keys") {
		t.Fatalf("dry run: exit %d, %s%s", code, out, errOut)
	}
	if ch := changedObjects(before, storeDigests(t, dir)); len(ch) > 0 {
		t.Fatalf("a dry run changed %v", ch)
	}

	code, out, errOut = runCLI(t, "backup", "rekey", "--target", dir, "--key-passphrase-env", "SLUICE_TEST_OLD", "--new-key-passphrase-env", "SLUICE_TEST_NEW")
	if code != errcode.ExitOK || !strings.Contains(out, "rewrapped 2 data keys") || strings.Contains(out+errOut, "new passphrase") {
		t.Fatalf("rekey: exit %d, %s%s", code, out, errOut)
	}
	after := storeDigests(t, dir)
	if ch := changedObjects(before, after); len(ch) != 2 || !onlyEnvelopes(ch) {
		t.Fatalf("rekey changed %v; want the two envelopes only", ch)
	}

	// Again: the new key already opens them; nothing to do.
	code, out, errOut = runCLI(t, "backup", "rekey", "--target", dir, "--key-passphrase-env", "SLUICE_TEST_OLD", "--new-key-passphrase-env", "SLUICE_TEST_NEW")
	if code != errcode.ExitOK || !strings.Contains(out, "rewrapped 0 data keys") || !strings.Contains(out, "2 already were") {
		t.Fatalf("second rekey: exit %d, %s%s", code, out, errOut)
	}

	code, _, errOut = runCLI(t, "backup", "verify-chain", "--target", dir, "--chunks", "--key-passphrase-env", "SLUICE_TEST_OLD")
	if code != errcode.ExitRefused || !strings.Contains(errOut, string(errcode.KeyWrong)) {
		t.Fatalf("verify-chain with the old key: exit %d, %s", code, errOut)
	}
	code, out, errOut = runCLI(t, "backup", "verify-chain", "--target", dir, "--chunks", "--key-passphrase-env", "SLUICE_TEST_NEW")
	if code != errcode.ExitOK || !strings.Contains(out, "clean") {
		t.Fatalf("verify-chain with the new key: exit %d, %s%s", code, out, errOut)
	}

	// To age recipients: this site can then no longer read it; the
	// identity's site can.
	code, out, errOut = runCLI(t, "backup", "rekey", "--target", dir, "--key-passphrase-env", "SLUICE_TEST_NEW", "--new-encrypt-to", testRecipient)
	if code != errcode.ExitOK || !strings.Contains(out, "rewrapped 2 data keys") {
		t.Fatalf("rekey to age: exit %d, %s%s", code, out, errOut)
	}
	id := filepath.Join(t.TempDir(), "id.txt")
	if err := os.WriteFile(id, []byte(testIdentity+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "backup", "verify-chain", "--target", dir, "--chunks", "--key-identity-file", id)
	if code != errcode.ExitOK {
		t.Fatalf("verify-chain with the identity: exit %d, %s%s", code, out, errOut)
	}
	if ch := changedObjects(before, storeDigests(t, dir)); !onlyEnvelopes(ch) {
		t.Fatalf("rekeys changed %v", ch)
	}
}

// A chain one of whose data keys the current key does not open is
// refused whole: no envelope is rewritten, not even those it opens.
func TestRekeyOpensAllBeforeWriting(t *testing.T) {
	cleanEnv(t)
	t.Setenv("SLUICE_TEST_A", "passphrase a")
	t.Setenv("SLUICE_TEST_B", "passphrase b")
	t.Setenv("SLUICE_TEST_C", "passphrase c")
	ctx := context.Background()
	dir := t.TempDir()
	bs, err := blobstore.Open(ctx, "file://"+dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, env := range []string{"SLUICE_TEST_A", "SLUICE_TEST_C"} {
		tr, err := keyref.Ref{PassphraseEnv: env, Encrypt: true}.Trust(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ch := chain.Open(bs).WithKeyring(chain.NewKeyring(tr))
		if _, err := ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey("w", "c"+string(rune('0'+i)))}, []byte("x"), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	before := storeDigests(t, dir)
	code, out, errOut := runCLI(t, "backup", "rekey", "--target", dir, "--key-passphrase-env", "SLUICE_TEST_A", "--new-key-passphrase-env", "SLUICE_TEST_B")
	if code != errcode.ExitRefused || !strings.Contains(errOut, string(errcode.KeyWrong)) || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	if ch := changedObjects(before, storeDigests(t, dir)); len(ch) > 0 {
		t.Fatalf("changed %v", ch)
	}

	// A store without keys is not an encrypted chain.
	code, _, errOut = runCLI(t, "backup", "rekey", "--target", t.TempDir(), "--key-passphrase-env", "SLUICE_TEST_A", "--new-key-passphrase-env", "SLUICE_TEST_B")
	if code != errcode.ExitRefused || !strings.Contains(errOut, string(errcode.ChainNotSealed)) {
		t.Fatalf("rekey of a store without keys: exit %d, %s", code, errOut)
	}
}

// `backup full` to a remote store without --encrypt says so, once, on
// stderr; encrypted or local, it says nothing.
func TestBackupFullWarnsUnencryptedRemote(t *testing.T) {
	cleanEnv(t)
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		all := append([]string{"backup", "full", "--source", "postgres://app@db/app", "--temporal-address", "127.0.0.1:1"}, args...)
		newCLI(&stdout, &stderr).run(ctx, all)
		return stderr.String()
	}
	warning := regexp.MustCompile(`(?m)^warning: the chain at s3://bucket/chain will be stored unencrypted: .*--encrypt.*$`)
	errOut := run("--target", "s3://bucket/chain")
	if n := len(warning.FindAllString(errOut, -1)); n != 1 || strings.Count(errOut, "unencrypted") != 1 {
		t.Fatalf("%d warnings in %s", n, errOut)
	}
	if errOut := run("--target", "s3://bucket/chain", "--encrypt", "--key-passphrase-env", "P"); strings.Contains(errOut, "unencrypted") {
		t.Fatalf("encrypted: %s", errOut)
	}
	if errOut := run("--target", t.TempDir()); strings.Contains(errOut, "unencrypted") {
		t.Fatalf("a local folder: %s", errOut)
	}
}
