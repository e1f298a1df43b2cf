package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// interruptInside starts a following broker run and interrupts it once part
// of the incremental is committed; it returns the run's stderr.
func interruptInside(t *testing.T, chainURL, dst, stream, atChainID, table string) string {
	t.Helper()
	args := []string{"sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream, "--poll-interval", "300ms"}
	if atChainID != "" {
		args = append(args, "--at-chain-id", atChainID)
	}
	cmd := exec.Command(filepath.Join(h.bin, "sluice"), args...)
	cmd.Env = h.env()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			text.WriteString(sc.Text() + "\n")
		}
		close(done)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		if queryInt(t, dst, fmt.Sprintf(`SELECT count(*) FROM %s WHERE v = 'bulk'`, table), &n) == nil && n > 0 {
			_ = cmd.Process.Signal(syscall.SIGINT)
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the broker never committed part of the incremental")
		}
		time.Sleep(50 * time.Millisecond)
	}
	<-done
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(text.String(), "SLUICE-E-BROKER-INCREMENTAL-PARTIAL") {
		t.Fatalf("want BROKER-INCREMENTAL-PARTIAL exit 1, got %v:\n%s", err, text.String())
	}
	return text.String()
}

func TestRewrittenIncrementalRefusedAndPlainReuploadResumes(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
	dir := filepath.Join(t.TempDir(), "chain")
	chainURL := "file://" + dir
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	full := lastIncremental(t, chainURL, nil)
	for i := 0; i < 60; i++ {
		testenv.Exec(t, src, fmt.Sprintf(`INSERT INTO t SELECT i, 'bulk' FROM generate_series(%d, %d) i`, i*10000, i*10000+9999))
	}
	mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
	inc := lastIncremental(t, chainURL, nil)

	dst := testenv.CreateDB(t, "dst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--through", full)
	stream := fmt.Sprintf("rewritten-%d", time.Now().UnixNano()%1e6)
	interruptInside(t, chainURL, dst, stream, full, "public.t")
	before := describeRows(t, dst, "public.t")

	// A copy of the chain where the incremental was rewritten (compacted to
	// its first transaction) under the stopped broker.
	copyDir := filepath.Join(t.TempDir(), "rewritten")
	if out, err := exec.Command("cp", "-a", dir, copyDir).CombinedOutput(); err != nil {
		t.Fatalf("copy chain: %v %s", err, out)
	}
	rewritten := compactToFirstTransaction(t, "file://"+copyDir, inc)
	r := sluice(t, "sync", "from-backup", "run", "--backup-target", "file://"+copyDir, "--target", testenv.DSN(dst), "--stream-id", stream, "--poll-interval", "300ms")
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-BROKER-INCREMENTAL-REWRITTEN") || !strings.Contains(r.stderr, "--reset-target-data") ||
		!strings.Contains(r.stderr, rewritten) {
		t.Fatalf("want SLUICE-E-BROKER-INCREMENTAL-REWRITTEN exit 3 naming %s and --reset-target-data, got %s", rewritten, r)
	}
	if after := describeRows(t, dst, "public.t"); after != before {
		t.Fatalf("the refused run applied something: %s -> %s", before, after)
	}

	// The original chain with its chunks uploaded again, byte for byte:
	// the broker resumes and converges exactly once.
	chunks, _ := filepath.Glob(filepath.Join(dir, "data", "*", "*.chunk"))
	for _, c := range chunks {
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(c, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--stream-id", stream,
		"--poll-interval", "300ms", "--detach"); r.exit != 0 {
		t.Fatal(r)
	}
	waitBrokerAt(t, stream, inc, 2*time.Minute)
	stopBroker(t, chainURL, stream)
	requireSameRows(t, src, dst)
}

// compactToFirstTransaction replaces incremental id in the chain's catalog by
// one holding only its first transaction, as a compaction would, and returns
// the new incremental's ID.
func compactToFirstTransaction(t *testing.T, chainURL, id string) string {
	t.Helper()
	ctx := context.Background()
	ch, cat := openChainAt(t, chainURL)
	m, err := ch.GetManifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	it, err := ch.ReadChangeChunk(ctx, m.Chunks[0])
	if err != nil {
		t.Fatal(err)
	}
	b := chain.NewChangeBuilder()
	var changes int64
	var end uint64
	for it.Next() {
		c := it.Change()
		if err := b.Append(c); err != nil {
			t.Fatal(err)
		}
		if c.Op == chain.OpCommit {
			end = c.EndLSN
			break
		}
		if c.Op != chain.OpBegin {
			changes++
		}
	}
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey("compacted", "changes-000000.chunk")}, data, b.Records(), int64(b.RawLen()))
	if err != nil {
		t.Fatal(err)
	}
	nm := *m
	nm.ID, nm.Chunks, nm.Changes, nm.Transactions = "", []chain.ChunkRef{ref}, changes, 1
	nm.EndPosition = fmt.Sprintf("%X/%X", end>>32, uint32(end))
	if err := ch.PutManifest(ctx, &nm); err != nil {
		t.Fatal(err)
	}
	next := cat.Next()
	for si := range next.Segments {
		// Next shares the links with cat: copy before changing one.
		next.Segments[si].Incrementals = slices.Clone(next.Segments[si].Incrementals)
		for li, l := range next.Segments[si].Incrementals {
			if l.ID == id {
				next.Segments[si].Incrementals[li] = chain.LinkFromManifest(&nm)
			}
		}
	}
	if err := ch.CommitCatalog(ctx, next); err != nil {
		t.Fatal(err)
	}
	return nm.ID
}
