package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/seal"
	"github.com/sluicehq/sluice/internal/testenv"
)

// tamperFixture is an encrypted, signed chain of a full and two
// incrementals, the second spread over several chunks, and a second chain
// written under the same passphrase.
type tamperFixture struct {
	src        string
	url        string
	other      string
	kp         signingPair
	full       string
	inc1, inc2 string
}

func newTamperFixture(t *testing.T) *tamperFixture {
	t.Helper()
	f := &tamperFixture{src: testenv.CreateDB(t, "tampersrc"), url: fileChain(t), kp: newSigningPair(t)}
	testenv.Exec(t, f.src, `CREATE TABLE t (id int PRIMARY KEY, v text);
		INSERT INTO t SELECT i, 'tamper-plain-' || i FROM generate_series(1, 50) i;`)
	w := writerTrust(f.kp)
	src := []string{"--source", testenv.DSN(f.src)}
	mustSluice(t, append(append([]string{"backup", "full", "--target", f.url, "--chain-slot"}, src...), w...)...)
	testenv.Exec(t, f.src, `INSERT INTO t SELECT i, 'tamper-inc1-' || i FROM generate_series(51, 100) i; UPDATE t SET v = 'tamper-upd' WHERE id <= 5`)
	mustSluice(t, append(append([]string{"backup", "incremental", "--target", f.url}, src...), w...)...)
	// About 14 MB of changes: two chunks or more.
	testenv.Exec(t, f.src, `INSERT INTO t SELECT i, 'tamper-inc2-' || repeat('w', 100) FROM generate_series(1000, 120000) i; DELETE FROM t WHERE id = 7`)
	mustSluice(t, append(append([]string{"backup", "incremental", "--target", f.url}, src...), w...)...)
	_, cat := openChainAt(t, f.url)
	links := cat.Links()
	if len(links) != 3 {
		t.Fatalf("fixture chain holds %d links", len(links))
	}
	f.full, f.inc1, f.inc2 = links[0].ID, links[1].ID, links[2].ID

	// Another chain, same passphrase, same signing key.
	other := testenv.CreateDB(t, "tamperother")
	testenv.Exec(t, other, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'tamper-other-row')`)
	f.other = fileChain(t)
	mustSluice(t, append([]string{"backup", "full", "--target", f.other, "--source", testenv.DSN(other)}, w...)...)
	return f
}

// targetAtInc1 restores a copy of the chain through its first incremental
// into a new database and returns the database and the copy's URL: a
// broker started there with --at-chain-id applies the second incremental.
func (f *tamperFixture) targetAtInc1(t *testing.T) (db, url string) {
	t.Helper()
	url = copyChain(t, f.url)
	db = testenv.CreateDB(t, "tamperdst")
	mustSluice(t, append([]string{"restore", "--backup-target", url, "--target", testenv.DSN(db), "--through", f.inc1}, readerTrust(f.kp)...)...)
	return db, url
}

// brokerRefuses runs a broker on url into db (a first start at inc1 unless
// warm) and wants it to end with code and exit status 3, and the target's
// rows and position unchanged.
func (f *tamperFixture) brokerRefuses(t *testing.T, db, url, stream, code string, exit int, warm bool, flags ...string) {
	t.Helper()
	before := rowsDigest(t, db)
	args := []string{"sync", "from-backup", "run", "--backup-target", url, "--target", testenv.DSN(db),
		"--stream-id", stream, "--poll-interval", "300ms"}
	if !warm {
		args = append(args, "--at-chain-id", f.inc1)
	}
	r := sluiceWithin(t, 3*time.Minute, "broker/"+stream, append(args, flags...)...)
	if r.exit != exit || !strings.Contains(r.stderr, code) {
		t.Fatalf("want %s exit %d, got %s", code, exit, r)
	}
	if after := rowsDigest(t, db); after != before {
		t.Fatalf("the refused broker changed the target:\nbefore %s\nafter  %s", before, after)
	}
}

// rowsDigest summarises table t of db: count, and a hash of every row.
func rowsDigest(t *testing.T, db string) string {
	t.Helper()
	var s string
	if err := queryString(db, `SELECT count(*) || ':' || coalesce(md5(string_agg(id || '=' || v, ',' ORDER BY id)), '') FROM t`, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// sluiceWithin runs the CLI and terminates the workflow named wf if the
// command has not ended within d (a broker that should have refused and
// did not would run forever).
func sluiceWithin(t *testing.T, d time.Duration, wf string, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- sluice(t, args...) }()
	select {
	case r := <-done:
		return r
	case <-time.After(d):
		cl := temporalClient(t)
		_ = cl.TerminateWorkflow(context.Background(), wf, "", "test: the run should have refused")
		cl.Close()
		r := <-done
		t.Fatalf("sluice %s did not end within %s: %s", strings.Join(args, " "), d, r)
		return r
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// manifestChunkKeys returns the chunk keys of link id, read without a key.
func manifestChunkKeys(t *testing.T, url, id string) []string {
	t.Helper()
	ch, _ := openChainAt(t, url)
	chunks, err := ch.ManifestChunks(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range chunks {
		keys = append(keys, c.Key)
	}
	return keys
}

// The tamper suite: an encrypted, signed chain altered in the store in each
// way a writer of the bucket could, read through the real CLI and broker
// with the passphrase and --require-signature. Each is refused with its code
// and nothing of the altered link reaches the target.
func TestTamperedChainIsRefused(t *testing.T) {
	f := newTamperFixture(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	rt := readerTrust(f.kp)

	t.Run("untouched, the broker applies it", func(t *testing.T) {
		db, url := f.targetAtInc1(t)
		stream := "tamper-ok-" + suffix
		mustSluice(t, append([]string{"sync", "from-backup", "run", "--backup-target", url, "--target", testenv.DSN(db),
			"--stream-id", stream, "--poll-interval", "300ms", "--at-chain-id", f.inc1, "--detach"}, rt...)...)
		waitBrokerAt(t, stream, f.inc2, 2*time.Minute)
		stopBroker(t, url, stream)
		requireSameRows(t, f.src, db)
	})
	t.Run("a flipped byte in a chunk", func(t *testing.T) {
		db, url := f.targetAtInc1(t)
		path := filepath.Join(chainDir(url), manifestChunkKeys(t, url, f.inc2)[0])
		data, _ := os.ReadFile(path)
		data[len(data)/2] ^= 0x01
		_ = os.WriteFile(path, data, 0o644)
		f.brokerRefuses(t, db, url, "tamper-flip-"+suffix, "SLUICE-E-CHUNK-CORRUPT", 3, false, rt...)
	})
	t.Run("two chunks of an incremental swapped", func(t *testing.T) {
		db, url := f.targetAtInc1(t)
		keys := manifestChunkKeys(t, url, f.inc2)
		if len(keys) < 2 {
			t.Fatalf("the second incremental has %d chunks", len(keys))
		}
		a, b := filepath.Join(chainDir(url), keys[0]), filepath.Join(chainDir(url), keys[1])
		da, _ := os.ReadFile(a)
		db2, _ := os.ReadFile(b)
		_ = os.WriteFile(a, db2, 0o644)
		_ = os.WriteFile(b, da, 0o644)
		f.brokerRefuses(t, db, url, "tamper-swap-"+suffix, "SLUICE-E-CHUNK-CORRUPT", 3, false, rt...)
	})
	t.Run("a chunk copied from another chain under the same passphrase", func(t *testing.T) {
		db, url := f.targetAtInc1(t)
		_, ocat := openChainAt(t, f.other)
		src := filepath.Join(chainDir(f.other), manifestChunkKeys(t, f.other, ocat.Tip().ID)[0])
		data, _ := os.ReadFile(src)
		_ = os.WriteFile(filepath.Join(chainDir(url), manifestChunkKeys(t, url, f.inc2)[0]), data, 0o644)
		f.brokerRefuses(t, db, url, "tamper-copy-"+suffix, "SLUICE-E-CHUNK-CORRUPT", 3, false, rt...)
	})
	t.Run("a manifest sealed for another link", func(t *testing.T) {
		db, url := f.targetAtInc1(t)
		// The second incremental's manifest replaced by the first's sealed
		// bytes under the second's ID.
		m := readJSON(t, filepath.Join(chainDir(url), chain.ManifestKey(f.inc1)))
		m["id"] = f.inc2
		writeJSON(t, filepath.Join(chainDir(url), chain.ManifestKey(f.inc2)), m)
		f.brokerRefuses(t, db, url, "tamper-manifest-"+suffix, "SLUICE-E-CHUNK-SEAL-BROKEN", 3, false, rt...)
	})
	t.Run("the signature removed", func(t *testing.T) {
		db, url := f.targetAtInc1(t)
		_, cat := openChainAt(t, url)
		path := filepath.Join(chainDir(url), chain.CommitKey(cat.Generation))
		c := readJSON(t, path)
		delete(c, "signature")
		writeJSON(t, path, c)
		f.brokerRefuses(t, db, url, "tamper-unsigned-"+suffix, "SLUICE-E-SIGNATURE-MISSING", 3, false, rt...)
	})
	t.Run("re-signed with another key", func(t *testing.T) {
		db, url := f.targetAtInc1(t)
		// The same chain's last generation signed by another key: a forged
		// incremental would carry such a signature.
		other := newSigningPair(t)
		otherRT := []string{"--key-passphrase-env", chainPassphraseEnv, "--verify-key-file", other.pub, "--require-signature"}
		r := sluice(t, append([]string{"backup", "verify-chain", "--target", url}, otherRT...)...)
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-SIGNATURE-INVALID") {
			t.Fatalf("verify-chain with another key: %s", r)
		}
		_, cat := openChainAt(t, url)
		path := filepath.Join(chainDir(url), chain.CommitKey(cat.Generation))
		data, _ := os.ReadFile(path)
		var c chain.CatalogCommit
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		pem, _ := os.ReadFile(other.priv)
		sk, err := seal.ParseSigningKey(pem, other.priv)
		if err != nil {
			t.Fatal(err)
		}
		c.Signature = nil
		msg, _ := json.Marshal(&c)
		c.Signature = &chain.CatalogSignature{KeyID: sk.ID, Sig: sk.Sign("catalog commit", msg)}
		writeJSON(t, path, &c)
		f.brokerRefuses(t, db, url, "tamper-resigned-"+suffix, "SLUICE-E-SIGNATURE-INVALID", 3, false, rt...)
	})
	t.Run("a wrong passphrase, no key, a plaintext chain read with a key", func(t *testing.T) {
		db, url := f.targetAtInc1(t)
		f.brokerRefuses(t, db, url, "tamper-wrongpass-"+suffix, "SLUICE-E-KEY-WRONG", 3, false,
			"--key-passphrase-env", sourcePasswordEnv, "--verify-key-file", f.kp.pub, "--require-signature")
		f.brokerRefuses(t, db, url, "tamper-nokey-"+suffix, "SLUICE-E-KEY-REQUIRED", 2, false)
		plain := fileChain(t)
		mustSluice(t, "backup", "full", "--target", plain, "--source", testenv.DSN(f.src))
		r := sluice(t, append([]string{"backup", "verify-chain", "--target", plain}, "--key-passphrase-env", chainPassphraseEnv)...)
		if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-CHAIN-NOT-SEALED") {
			t.Fatalf("a plaintext chain read with a key: %s", r)
		}
	})
	t.Run("the last link deleted, and an older catalog put back", func(t *testing.T) {
		db, url := f.targetAtInc1(t)
		catalogDir := filepath.Join(chainDir(url), "catalog")
		saved := filepath.Join(t.TempDir(), "catalog-at-inc1")
		_, cat := openChainAt(t, url)
		lastCommit := filepath.Join(chainDir(url), chain.CommitKey(cat.Generation))
		if out, err := exec.Command("cp", "-a", catalogDir, saved).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if err := os.Remove(filepath.Join(saved, filepath.Base(lastCommit))); err != nil {
			t.Fatal(err)
		}
		// The broker applies the whole chain and records its generation.
		stream := "tamper-rollback-" + suffix
		mustSluice(t, append([]string{"sync", "from-backup", "run", "--backup-target", url, "--target", testenv.DSN(db),
			"--stream-id", stream, "--poll-interval", "300ms", "--at-chain-id", f.inc1, "--detach"}, rt...)...)
		waitBrokerAt(t, stream, f.inc2, 2*time.Minute)
		stopBroker(t, url, stream)
		// The last link's commit deleted: the catalog ends a link early.
		if err := os.Remove(lastCommit); err != nil {
			t.Fatal(err)
		}
		f.brokerRefuses(t, db, url, stream, "SLUICE-E-CHAIN-ROLLED-BACK", 3, true, rt...)
		// The catalog folder as it was at the first incremental put back.
		if err := os.RemoveAll(catalogDir); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", saved, catalogDir).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		f.brokerRefuses(t, db, url, stream, "SLUICE-E-CHAIN-ROLLED-BACK", 3, true, rt...)
	})
}

// The stored objects of an encrypted chain hold none of the dataset's
// values, table or column names in the clear.
func TestEncryptedChainHoldsNoPlaintext(t *testing.T) {
	f := newTamperFixture(t)
	for _, url := range []string{f.url, f.other} {
		err := filepath.Walk(chainDir(url), func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, plain := range []string{"tamper-plain-", "tamper-inc1-", "tamper-inc2-", "tamper-upd", "tamper-other-row", "public.t", chainPassphrase} {
				if bytes.Contains(data, []byte(plain)) {
					t.Errorf("%s holds %q in the clear", path, plain)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// And it reads back whole with the key.
	dst := testenv.CreateDB(t, "plaincheck")
	mustSluice(t, append([]string{"restore", "--backup-target", f.url, "--target", testenv.DSN(dst)}, readerTrust(f.kp)...)...)
	requireSameRows(t, f.src, dst)
}

// A rekey while a producer and a broker run: both go on with the data keys
// they hold; a producer started again under the new passphrase writes under
// a new data key, which the broker, still given the old passphrase, refuses
// (SLUICE-E-KEY-WRONG) without applying any of it; started again with the
// new passphrase, it catches up.
func TestRekeyWhileBrokerRuns(t *testing.T) {
	src := testenv.CreateDB(t, "rekeysrc")
	dst := testenv.CreateDB(t, "rekeydst")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT i, 'r' || i FROM generate_series(1, 100) i`)
	kp := newSigningPair(t)
	url := fileChain(t)
	producer := ownWorker(t, fmt.Sprintf("rekeyproducer-%d", time.Now().UnixNano()%1e6))
	broker := ownWorker(t, fmt.Sprintf("rekeybroker-%d", time.Now().UnixNano()%1e6))
	stream := fmt.Sprintf("rekey-%d", time.Now().UnixNano()%1e6)
	oldKey := []string{"--key-passphrase-env", chainPassphraseEnv}
	newKey := []string{"--key-passphrase-env", chainPassphraseNewEnv}
	sign := []string{"--encrypt", "--sign-key-file", kp.priv}
	verify := []string{"--verify-key-file", kp.pub, "--require-signature"}
	srcFlags := []string{"--source", testenv.DSN(src)}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	mustSluice(t, producer.args(cat([]string{"backup", "full", "--target", url, "--chain-slot"}, srcFlags, sign, oldKey)...)...)
	mustSluice(t, producer.args(cat([]string{"backup", "stream", "run", "--target", url, "--rollover-window", "1s", "--detach"}, srcFlags, sign, oldKey)...)...)
	runBroker := func(key []string, flags ...string) {
		mustSluice(t, broker.args(cat([]string{"sync", "from-backup", "run", "--backup-target", url, "--target", testenv.DSN(dst),
			"--stream-id", stream, "--poll-interval", "300ms", "--detach"}, key, verify, flags)...)...)
	}
	runBroker(oldKey, "--reset-target-data", "--yes")
	testenv.Exec(t, src, `INSERT INTO t SELECT i, 'before' FROM generate_series(101, 200) i`)
	waitCaughtUp(t, src, time.Minute)
	waitBrokerAtTip(t, stream, url, nil, 2*time.Minute)

	// The rekey: every envelope now opens with the new passphrase only.
	r := mustSluice(t, cat([]string{"backup", "rekey", "--target", url}, oldKey, []string{"--new-key-passphrase-env", chainPassphraseNewEnv})...)
	t.Logf("rekey: %s", strings.TrimSpace(r.stdout))
	if r := sluice(t, cat([]string{"backup", "verify-chain", "--target", url}, oldKey)...); r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-KEY-WRONG") {
		t.Fatalf("the old passphrase after the rekey: %s", r)
	}
	// Both runs go on with the keys they hold.
	testenv.Exec(t, src, `INSERT INTO t SELECT i, 'during' FROM generate_series(201, 300) i`)
	waitCaughtUp(t, src, time.Minute)
	waitBrokerAtTip(t, stream, url, nil, 2*time.Minute)
	requireSameRows(t, src, dst)

	// The producer started again under the new passphrase: a new data key.
	mustSluice(t, producer.args("backup", "stream", "stop", "--target", url)...)
	waitWorkflowEnd(t, "producer/"+url, time.Minute)
	producer.kill()
	producer.restart()
	mustSluice(t, producer.args(cat([]string{"backup", "stream", "run", "--target", url, "--rollover-window", "1s", "--detach"}, srcFlags, sign, newKey)...)...)
	before := rowsDigest(t, dst)
	// The broker's worker starts again too, so it holds no key in memory.
	broker.kill()
	broker.restart()
	testenv.Exec(t, src, `INSERT INTO t SELECT i, 'after' FROM generate_series(301, 400) i`)
	waitCaughtUp(t, src, time.Minute)
	end := waitWorkflowFailure(t, "broker/"+stream, 2*time.Minute)
	if !strings.Contains(end, "SLUICE-E-KEY-WRONG") {
		t.Fatalf("the broker under the old passphrase ended with %q", end)
	}
	if after := rowsDigest(t, dst); after != before {
		t.Fatalf("the refused broker applied rows: %s, then %s", before, after)
	}
	runBroker(newKey)
	waitBrokerAtTip(t, stream, url, nil, 2*time.Minute)
	requireSameRows(t, src, dst)
	stopBroker(t, url, stream)
	mustSluice(t, producer.args("backup", "stream", "stop", "--target", url)...)
	waitWorkflowEnd(t, "producer/"+url, time.Minute)
}

// waitWorkflowFailure waits for workflow id to end and returns its failure
// message ("" when it completed).
func waitWorkflowFailure(t *testing.T, id string, within time.Duration) string {
	t.Helper()
	cl := temporalClient(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	err := cl.GetWorkflow(ctx, id, "").Get(ctx, nil)
	if ctx.Err() != nil {
		t.Fatalf("workflow %s did not end within %s", id, within)
	}
	if err == nil {
		return ""
	}
	var b strings.Builder
	for e := err; e != nil; e = errors.Unwrap(e) {
		b.WriteString(e.Error() + "\n")
	}
	return b.String()
}
