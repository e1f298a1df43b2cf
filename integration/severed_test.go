package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// sevChain appends hand-made incrementals to a chain in a file:// store with
// the chain package's own writer, the way a faulty producer would have.
type sevChain struct {
	t   *testing.T
	url string
	ch  *chain.Chain
	n   int
}

func openSevChain(t *testing.T, url string) *sevChain {
	t.Helper()
	bs, err := blobstore.Open(context.Background(), url, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &sevChain{t: t, url: url, ch: chain.Open(bs)}
}

func (s *sevChain) catalog() *chain.Catalog {
	s.t.Helper()
	cat, err := s.ch.LoadCatalog(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return cat
}

// tipLSN is where the chain's tip ends.
func (s *sevChain) tipLSN() uint64 {
	s.t.Helper()
	lsn, err := chain.ParseLSN(s.catalog().Tip().EndPosition)
	if err != nil {
		s.t.Fatal(err)
	}
	return uint64(lsn)
}

// add commits an incremental after the tip ending at end, one chunk per
// slice of records, and returns its ID.
func (s *sevChain) add(end uint64, chunks ...[]chain.Change) string {
	s.t.Helper()
	ctx := context.Background()
	cat := s.catalog()
	s.n++
	var refs []chain.ChunkRef
	var records, begins, commits int64
	for i, recs := range chunks {
		b := chain.NewChangeBuilder()
		for j := range recs {
			if err := b.Append(&recs[j]); err != nil {
				s.t.Fatal(err)
			}
			switch recs[j].Op {
			case chain.OpBegin:
				begins++
			case chain.OpCommit:
				commits++
			}
		}
		records += b.Records()
		data, err := b.Encode()
		if err != nil {
			s.t.Fatal(err)
		}
		key := chain.DataKey(fmt.Sprintf("severed-test-%d-%d", time.Now().UnixNano(), s.n), fmt.Sprintf("changes-%06d.chunk", i))
		ref, err := s.ch.WriteChunk(ctx, chain.ChunkPlace{Key: key}, data, b.Records(), int64(b.RawLen()))
		if err != nil {
			s.t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	txs := min(begins, commits)
	tip := cat.Tip()
	m := &chain.Manifest{
		Kind: chain.KindIncremental, Parent: tip.ID, Source: cat.Source,
		StartPosition: tip.EndPosition, EndPosition: chain.FormatLSN(end), CreatedAt: time.Now(),
		Chunks: refs, Changes: records - 2*txs, Transactions: txs, ApplyIdentity: true,
	}
	if err := s.ch.PutManifest(ctx, m); err != nil {
		s.t.Fatal(err)
	}
	next := cat.Next()
	if err := next.AppendIncremental(m); err != nil {
		s.t.Fatal(err)
	}
	if err := s.ch.CommitCatalog(ctx, next); err != nil {
		s.t.Fatal(err)
	}
	return m.ID
}

// Records of transaction xid committing at commit into public.a; the
// transaction ends at commit+0x30.
func sevBegin(xid uint32, commit uint64) chain.Change {
	return chain.Change{Op: chain.OpBegin, XID: xid, CommitLSN: commit, LSN: commit - 0x80, CommitTime: time.Now().UnixMicro(), Identified: true}
}

func sevInsert(xid uint32, commit uint64, ord uint32, id int) chain.Change {
	return chain.Change{Op: chain.OpInsert, XID: xid, CommitLSN: commit, Ordinal: ord, LSN: commit - 0x40 + uint64(ord),
		Table: "public.a", New: []chain.Value{{Kind: chain.ValueText, Data: []byte(fmt.Sprint(id))}, {Kind: chain.ValueText, Data: []byte("inc")}},
		Identified: true}
}

func sevCommit(xid uint32, commit uint64) chain.Change {
	return chain.Change{Op: chain.OpCommit, XID: xid, CommitLSN: commit, LSN: commit, CommitTime: time.Now().UnixMicro(), EndLSN: commit + 0x30, Identified: true}
}

// sevTxn is a whole transaction inserting ids.
func sevTxn(xid uint32, commit uint64, ids ...int) []chain.Change {
	out := []chain.Change{sevBegin(xid, commit)}
	for i, id := range ids {
		out = append(out, sevInsert(xid, commit, uint32(i), id))
	}
	return append(out, sevCommit(xid, commit))
}

func sevJoin(parts ...[]chain.Change) []chain.Change {
	var out []chain.Change
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// copyTree copies the store root src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func requireRefusal(t *testing.T, r result, code string, mention ...string) {
	t.Helper()
	if r.exit != 3 {
		t.Fatalf("want exit 3 with %s, got %s", code, r)
	}
	for _, want := range append([]string{code, "hint:"}, mention...) {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

func publicTableExists(t *testing.T, db, table string) bool {
	t.Helper()
	var n int
	if err := queryInt(t, db, fmt.Sprintf(`SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = '%s'`, table), &n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestSeveredTransactionsRefused(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT i, 'v' || i FROM generate_series(1, 10) i;`)
	base := filepath.Join(t.TempDir(), "base")
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", "file://"+base, "--chain-slot")

	// Each case starts from a copy of the same full.
	fork := func(name string) *sevChain {
		dir := filepath.Join(t.TempDir(), name)
		copyTree(t, base, dir)
		return openSevChain(t, "file://"+dir)
	}

	t.Run("clean", func(t *testing.T) {
		s := fork("clean")
		at := s.tipLSN()
		s.add(at+0x130, sevTxn(1001, at+0x100, 1001))
		s.add(at+0x230, sevTxn(1002, at+0x200, 1002, 1003))
		r := mustSluice(t, "backup", "verify-chain", "--target", s.url)
		if !strings.Contains(r.stdout, "clean") || !strings.Contains(r.stdout, "2 incrementals") {
			t.Errorf("verify-chain does not report a clean chain of 2 incrementals:\n%s", r)
		}
		dst := testenv.CreateDB(t, "dst")
		mustSluice(t, "restore", "--backup-target", s.url, "--target", testenv.DSN(dst))
		var n int
		if err := queryInt(t, dst, "SELECT count(*) FROM public.a", &n); err != nil || n != 13 {
			t.Fatalf("clean chain restored %d rows (%v), want 13", n, err)
		}
	})

	t.Run("A", func(t *testing.T) {
		// A window ended inside transaction 1002; the next begins inside it.
		s := fork("a")
		at := s.tipLSN()
		first := s.add(at+0x130, sevJoin(sevTxn(1001, at+0x100, 1001), []chain.Change{sevBegin(1002, at+0x200), sevInsert(1002, at+0x200, 0, 1002)}))
		second := s.add(at+0x330, sevJoin([]chain.Change{sevInsert(1002, at+0x200, 1, 1003), sevCommit(1002, at+0x200)}, sevTxn(1003, at+0x300, 1004)))
		r := sluice(t, "backup", "verify-chain", "--target", s.url)
		t.Logf("verify-chain: %s", r)
		requireRefusal(t, r, "SLUICE-E-BACKUP-CHAIN-SEVERED-TRANSACTION", "shape A")
		for _, want := range []string{"shape A", first, second, "xid 1002", "1 finding"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("verify-chain output lacks %q:\n%s", want, r)
			}
		}
		dst := testenv.CreateDB(t, "dst")
		r = sluice(t, "restore", "--backup-target", s.url, "--target", testenv.DSN(dst))
		requireRefusal(t, r, "SLUICE-E-BACKUP-CHAIN-SEVERED-TRANSACTION", first, second)
		if publicTableExists(t, dst, "a") {
			t.Error("the refused restore created the chain's table on the target")
		}
	})

	t.Run("B", func(t *testing.T) {
		// A resume delivered the last transaction of the first window again.
		s := fork("b")
		at := s.tipLSN()
		first := s.add(at+0x230, sevTxn(1001, at+0x100, 1001), sevTxn(1002, at+0x200, 1002))
		second := s.add(at+0x330, sevJoin(sevTxn(1002, at+0x200, 1002), sevTxn(1003, at+0x300, 1003)))
		r := sluice(t, "backup", "verify-chain", "--target", s.url, "--json")
		requireRefusal(t, r, "SLUICE-E-BACKUP-CHAIN-SEVERED-TRANSACTION")
		var rep struct {
			Incrementals int `json:"incrementals"`
			Findings     []struct {
				Shape, Code string
				Links       []string
				XID         uint32
			} `json:"findings"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("--json output does not parse: %v\n%s", err, r)
		}
		if len(rep.Findings) != 1 || rep.Incrementals != 2 {
			t.Fatalf("want one finding over 2 incrementals, got %+v", rep)
		}
		f := rep.Findings[0]
		if f.Shape != "B" || f.Code != "SLUICE-E-BACKUP-CHAIN-SEVERED-TRANSACTION" || f.XID != 1002 ||
			len(f.Links) != 2 || f.Links[0] != first || f.Links[1] != second {
			t.Errorf("finding %+v, want shape B over %s, %s for xid 1002", f, first, second)
		}
		dst := testenv.CreateDB(t, "dst")
		r = sluice(t, "restore", "--backup-target", s.url, "--target", testenv.DSN(dst))
		requireRefusal(t, r, "SLUICE-E-BACKUP-CHAIN-SEVERED-TRANSACTION", "shape B", second)
		if publicTableExists(t, dst, "a") {
			t.Error("the refused restore created the chain's table on the target")
		}
	})

	t.Run("C", func(t *testing.T) {
		// The second window's end position lies past its last transaction.
		s := fork("c")
		at := s.tipLSN()
		good := s.add(at+0x130, sevTxn(1001, at+0x100, 1001))
		bad := s.add(at+0x2000, sevTxn(1002, at+0x200, 1002))
		r := sluice(t, "backup", "verify-chain", "--target", s.url)
		requireRefusal(t, r, "SLUICE-E-BACKUP-INCOMPLETE", bad)
		if !strings.Contains(r.stdout, "shape C") || strings.Contains(r.stdout, good) {
			t.Errorf("verify-chain should name only %s, shape C:\n%s", bad, r)
		}
		dst := testenv.CreateDB(t, "dst")
		r = sluice(t, "restore", "--backup-target", s.url, "--target", testenv.DSN(dst))
		t.Logf("restore: %s", r)
		requireRefusal(t, r, "SLUICE-E-BACKUP-INCOMPLETE", bad)
		if publicTableExists(t, dst, "a") {
			t.Error("the refused restore created the chain's table on the target")
		}
		// A restore whose path stops before the damage is not concerned.
		dst2 := testenv.CreateDB(t, "dst")
		mustSluice(t, "restore", "--backup-target", s.url, "--target", testenv.DSN(dst2), "--through", good)
		var n int
		if err := queryInt(t, dst2, "SELECT count(*) FROM public.a", &n); err != nil || n != 11 {
			t.Fatalf("restore through %s gave %d rows (%v), want 11", good, n, err)
		}
	})
}

func TestSeveredCheckPassesProducerChain(t *testing.T) {
	// A chain the real producer wrote has no finding.
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT i, 'v' || i FROM generate_series(1, 10) i;`)
	chainURL := fileChain(t)
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL, "--chain-slot")
	for round := range 3 {
		base := 100 * (round + 1)
		testenv.Exec(t, src, fmt.Sprintf(`BEGIN; INSERT INTO a SELECT i, 'r' FROM generate_series(%d, %d) i; UPDATE a SET v = 'u' WHERE id <= %d; COMMIT;
			INSERT INTO a VALUES (%d, 'single'); DELETE FROM a WHERE id = %d;`, base, base+49, round+2, base+50, round+1))
		mustSluice(t, "backup", "incremental", "--source", testenv.DSN(src), "--target", chainURL)
	}
	r := mustSluice(t, "backup", "verify-chain", "--target", chainURL)
	if !strings.Contains(r.stdout, "3 incrementals") || !strings.Contains(r.stdout, "clean") {
		t.Fatalf("verify-chain over the producer's chain:\n%s", r)
	}
}
