package main

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/chainview"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/seal"
)

var listT0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// stamped sets a Builder transaction's commit time.
func stamped(t time.Time, txn []chain.Change) []chain.Change {
	txn[0].CommitTime, txn[len(txn)-1].CommitTime = t.UnixMicro(), t.UnixMicro()
	return txn
}

// listChain writes a chain of two segments into a folder (sealed under the
// passphrase "correct horse" when encrypt) and returns the folder and the
// manifests of its links after the first full.
func listChain(t *testing.T, encrypt bool) (string, *chaintest.Builder, []*chain.Manifest) {
	t.Helper()
	dir := t.TempDir()
	s, err := blobstore.Open(context.Background(), "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := chain.Open(s)
	if encrypt {
		w, err := seal.NewPassphrase([]byte("correct horse"), "test")
		if err != nil {
			t.Fatal(err)
		}
		ch = ch.WithKeyring(chain.NewKeyring(chain.Trust{Wrapper: w, Encrypt: true}))
	}
	b := chaintest.NewBuilder(t, ch, listT0)
	var ms []*chain.Manifest
	ms = append(ms, b.Incremental(append(
		stamped(listT0.Add(time.Second), b.Txn(chaintest.Insert(1, "one"), chaintest.Insert(2, "two"))),
		stamped(listT0.Add(2*time.Second), b.Txn(chaintest.Update(1, "uno")))...)))
	ms = append(ms, b.Rotate())
	ms = append(ms, b.Incremental(stamped(listT0.Add(3*time.Second), b.Txn(chaintest.Delete(2)))))
	return dir, b, ms
}

func TestBackupListText(t *testing.T) {
	cleanEnv(t)
	dir, b, ms := listChain(t, false)
	code, out, errOut := runCLI(t, "backup", "list", "--target", dir)
	if code != errcode.ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	first := b.Cat.Segments[0].Full.ID
	want := `chain file://` + dir + `  id ` + short(first) + `  generation 4  source postgres src
2 segments, 4 links

SEG  LINK          KIND  START   END     CREATED               FIRST COMMIT          LAST COMMIT           TXNS  CHANGES  ROWS  SIZE   BROKERS
0    ` + short(first) + `  full  0/1000  0/1000  2026-12-04T10:00:00Z  -                     -                     -     -        1     93 B
0    ` + short(ms[0].ID) + `  incr  0/1000  ` + ms[0].EndPosition + `  2026-12-04T10:01:00Z  2026-12-04T10:00:01Z  2026-12-04T10:00:02Z  2     3        -     ` + sizeOf(ms[0]) + `
1*   ` + short(ms[1].ID) + `  full  ` + ms[1].StartPosition + `  ` + ms[1].EndPosition + `  2026-12-04T10:02:00Z  -                     -                     -     -        1     93 B
1*   ` + short(ms[2].ID) + `  incr  ` + ms[2].StartPosition + `  ` + ms[2].EndPosition + `  2026-12-04T10:03:00Z  2026-12-04T10:00:03Z  2026-12-04T10:00:03Z  1     1        -     ` + sizeOf(ms[2]) + `
(* the open segment; times UTC; SIZE is the stored size of the link's chunks)

no broker has reported a position into this store
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

// sizeOf renders the stored size of an incremental's chunks as the
// listing does.
func sizeOf(m *chain.Manifest) string {
	var n int64
	for _, c := range m.Chunks {
		n += c.Size
	}
	return chainview.HumanBytes(n)
}

func TestBackupListJSON(t *testing.T) {
	cleanEnv(t)
	dir, b, ms := listChain(t, false)
	s, err := blobstore.Open(context.Background(), "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Open(s).PutBrokerPosition(context.Background(), chain.BrokerPosition{Stream: "east", ChainID: b.Cat.ChainID, LastApplied: ms[0].ID, UpdatedAt: listT0}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "backup", "list", "--target", dir, "--json")
	if code != errcode.ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var rep struct {
		Chain      string `json:"chain"`
		ChainID    string `json:"chain_id"`
		Generation int64  `json:"generation"`
		KeyNeeded  bool   `json:"key_needed"`
		Segments   []struct {
			Index  int  `json:"index"`
			Capped bool `json:"capped"`
			Links  []struct {
				ID           string     `json:"id"`
				Kind         string     `json:"kind"`
				FirstCommit  *time.Time `json:"first_commit"`
				LastCommit   *time.Time `json:"last_commit"`
				Transactions int64      `json:"transactions"`
				Changes      int64      `json:"changes"`
				Rows         int64      `json:"rows"`
				StoredBytes  int64      `json:"stored_bytes"`
				Brokers      []string   `json:"brokers"`
			} `json:"links"`
		} `json:"segments"`
		Brokers []struct {
			Stream      string `json:"stream"`
			State       string `json:"state"`
			LastApplied string `json:"last_applied"`
			Behind      int    `json:"behind"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Chain != "file://"+dir || rep.ChainID != b.Cat.ChainID || rep.Generation != 4 || rep.KeyNeeded || len(rep.Segments) != 2 || !rep.Segments[0].Capped {
		t.Fatalf("report %+v", rep)
	}
	inc := rep.Segments[0].Links[1]
	if inc.ID != ms[0].ID || inc.Kind != "incremental" || inc.Transactions != 2 || inc.Changes != 3 || inc.StoredBytes == 0 ||
		!inc.FirstCommit.Equal(listT0.Add(time.Second)) || !inc.LastCommit.Equal(listT0.Add(2*time.Second)) ||
		len(inc.Brokers) != 1 || inc.Brokers[0] != "east" {
		t.Errorf("incremental %+v", inc)
	}
	if len(rep.Brokers) != 1 || rep.Brokers[0].State != "at" || rep.Brokers[0].Behind != 2 {
		t.Errorf("brokers %+v", rep.Brokers)
	}
}

func TestBackupListEncrypted(t *testing.T) {
	cleanEnv(t)
	dir, _, _ := listChain(t, true)
	code, out, errOut := runCLI(t, "backup", "list", "--target", dir)
	if code != errcode.ExitOK || !strings.Contains(out, "encrypted (no key given)") || !strings.Contains(out, "(key)") {
		t.Fatalf("without the key: exit %d, stderr %s, out:\n%s", code, errOut, out)
	}
	t.Setenv("SLUICE_TEST_CHAIN_PASS", "correct horse")
	code, out, errOut = runCLI(t, "backup", "list", "--target", dir, "--key-passphrase-env", "SLUICE_TEST_CHAIN_PASS")
	if code != errcode.ExitOK || strings.Contains(out, "(key)") || !strings.Contains(out, "2026-12-04T10:00:03Z") {
		t.Fatalf("with the key: exit %d, stderr %s, out:\n%s", code, errOut, out)
	}
	code, _, errOut = runCLI(t, "backup", "inspect", "--target", dir, "--link", "000000")
	if code != errcode.ExitRefused || !strings.Contains(errOut, string(errcode.LinkNotFound)) {
		t.Errorf("missing link: exit %d, stderr %s", code, errOut)
	}
}

func TestBackupInspect(t *testing.T) {
	cleanEnv(t)
	dir, _, ms := listChain(t, false)
	code, out, errOut := runCLI(t, "backup", "inspect", "--target", dir, "--link", short(ms[0].ID))
	if code != errcode.ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 8 || !strings.HasPrefix(lines[0], "incremental "+ms[0].ID+" (segment 0): 0/1000 to "+ms[0].EndPosition+", created 2026-12-04T10:01:00Z") ||
		!strings.HasPrefix(lines[1], "BEGIN 2026-12-04T10:00:01.000000Z xid ") ||
		lines[2] != "  insert public.t key(id=1) id=1 v=one" ||
		lines[6] != "  update public.t key(id=1) v=uno" {
		t.Errorf("output:\n%s", out)
	}

	// JSON lines, filtered by table.
	code, out, errOut = runCLI(t, "backup", "inspect", "--target", dir, "--link", ms[2].ID, "--table", "public.t", "--json")
	if code != errcode.ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var ops []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r struct {
			Op         string     `json:"op"`
			CommitTime *time.Time `json:"commit_time"`
			XID        uint32     `json:"xid"`
			CommitLSN  string     `json:"commit_lsn"`
			Table      string     `json:"table"`
			Key        []struct {
				Column string  `json:"column"`
				Value  *string `json:"value"`
			} `json:"key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		if r.CommitTime == nil || !r.CommitTime.Equal(listT0.Add(3*time.Second)) || r.XID == 0 || r.CommitLSN == "" {
			t.Errorf("record %s", sc.Text())
		}
		if r.Op == "delete" && (r.Table != "public.t" || len(r.Key) != 1 || r.Key[0].Column != "id" || *r.Key[0].Value != "2") {
			t.Errorf("delete %s", sc.Text())
		}
		ops = append(ops, r.Op)
	}
	if strings.Join(ops, " ") != "begin delete commit" {
		t.Errorf("ops %v:\n%s", ops, out)
	}

	// A full: per table, counts only.
	code, out, _ = runCLI(t, "backup", "inspect", "--target", dir, "--link", ms[1].ID)
	if code != errcode.ExitOK || !strings.Contains(out, "\n  public.t  rows 1  chunks 1  stored 93 B\n") {
		t.Errorf("full: exit %d:\n%s", code, out)
	}
}

func TestBackupInspectRefusals(t *testing.T) {
	cleanEnv(t)
	dir, _, _ := listChain(t, false)
	for _, tc := range []struct {
		args []string
		exit int
		code errcode.Code
	}{
		{[]string{"backup", "inspect", "--target", dir, "--link", strings.Repeat("f", 40)}, errcode.ExitRefused, errcode.LinkNotFound},
		{[]string{"backup", "inspect", "--target", dir}, errcode.ExitUsage, errcode.Usage},
		{[]string{"backup", "inspect", "--target", t.TempDir(), "--link", "abcdef"}, errcode.ExitRefused, errcode.ChainNotFound},
		{[]string{"backup", "list", "--target", t.TempDir()}, errcode.ExitRefused, errcode.ChainNotFound},
		{[]string{"backup", "list"}, errcode.ExitUsage, errcode.Usage},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != tc.exit || !strings.Contains(errOut, string(tc.code)) {
			t.Errorf("%s: exit %d, stderr %s; want exit %d with %s", strings.Join(tc.args, " "), code, errOut, tc.exit, tc.code)
		}
	}
}
