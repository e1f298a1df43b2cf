package chainview_test

import (
	"context"
	"strconv"
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

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// at stamps a transaction Txn made with commit time t.
func at(t time.Time, txn []chain.Change) []chain.Change {
	txn[0].CommitTime = t.UnixMicro()
	txn[len(txn)-1].CommitTime = t.UnixMicro()
	return txn
}

func concat(txns ...[]chain.Change) []chain.Change {
	var out []chain.Change
	for _, t := range txns {
		out = append(out, t...)
	}
	return out
}

// testChain is a chain of two segments in a folder: segment 0 holds a full
// and two incrementals (the first of three transactions cut into chunks of
// three records), segment 1 a full and one incremental.
type testChain struct {
	dir   string
	raw   *chain.Chain
	b     *chaintest.Builder
	links []*chain.Manifest
}

func newTestChain(t *testing.T, tr *chain.Trust) *testChain {
	t.Helper()
	dir := t.TempDir()
	s, err := blobstore.Open(context.Background(), "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw := chain.Open(s)
	ch := raw
	if tr != nil {
		ch = raw.WithKeyring(chain.NewKeyring(*tr))
	}
	b := chaintest.NewBuilder(t, ch, t0)
	b.PerChunk = 3
	tc := &testChain{dir: dir, raw: raw, b: b}
	tc.links = append(tc.links, b.Incremental(concat(
		at(t0.Add(time.Second), b.Txn(chaintest.Insert(1, "one"), chaintest.Insert(2, "two words"))),
		at(t0.Add(2*time.Second), b.Txn(chaintest.Update(1, "uno"))),
		at(t0.Add(3*time.Second), b.Txn(chaintest.Delete(2))),
	)))
	tc.links = append(tc.links, b.Incremental(at(t0.Add(4*time.Second), b.Txn(chaintest.Insert(3, "three")))))
	tc.links = append(tc.links, b.Rotate())
	tc.links = append(tc.links, b.Incremental(at(t0.Add(5*time.Second), b.Txn(chaintest.Insert(4, "four")))))
	return tc
}

func TestListPlain(t *testing.T) {
	ctx := context.Background()
	tc := newTestChain(t, nil)
	first := tc.links[0]
	if err := tc.raw.PutBrokerPosition(ctx, chain.BrokerPosition{Stream: "east", ChainID: tc.b.Cat.ChainID, LastApplied: first.ID, UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := tc.raw.PutBrokerPosition(ctx, chain.BrokerPosition{Stream: "west", ChainID: strings.Repeat("a", 40), LastApplied: first.ID, UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	l, err := chainview.List(ctx, tc.raw)
	if err != nil {
		t.Fatal(err)
	}
	if l.Sealed || l.KeyNeeded || len(l.Segments) != 2 || len(l.Segments[0].Links) != 3 || len(l.Segments[1].Links) != 2 {
		t.Fatalf("listing %+v", l)
	}
	if !l.Segments[0].Capped || l.Segments[1].Capped {
		t.Errorf("capped: %v %v", l.Segments[0].Capped, l.Segments[1].Capped)
	}
	full := l.Segments[0].Links[0]
	if full.Kind != chain.KindFull || full.Rows != 1 || full.Chunks != 1 || full.StoredBytes == 0 || full.FirstCommit != nil {
		t.Errorf("full %+v", full)
	}
	inc := l.Segments[0].Links[1]
	if inc.ID != first.ID || inc.Transactions != 3 || inc.Changes != 4 || inc.Chunks != 4 || inc.StoredBytes == 0 {
		t.Errorf("incremental %+v", inc)
	}
	if inc.FirstCommit == nil || !inc.FirstCommit.Equal(t0.Add(time.Second)) || inc.LastCommit == nil || !inc.LastCommit.Equal(t0.Add(3*time.Second)) {
		t.Errorf("commit range %v .. %v", inc.FirstCommit, inc.LastCommit)
	}
	if len(inc.Brokers) != 1 || inc.Brokers[0] != "east" {
		t.Errorf("brokers on the link: %v", inc.Brokers)
	}
	last := l.Segments[1].Links[1]
	if !last.FirstCommit.Equal(t0.Add(5*time.Second)) || !last.LastCommit.Equal(t0.Add(5*time.Second)) {
		t.Errorf("last link's range %v .. %v", last.FirstCommit, last.LastCommit)
	}
	want := []chainview.BrokerView{
		{Stream: "east", State: chainview.BrokerAt, LastApplied: first.ID, Segment: 0, Behind: 3, UpdatedAt: t0},
		{Stream: "west", State: chainview.BrokerOtherChain, LastApplied: first.ID, Segment: -1, Behind: -1, UpdatedAt: t0},
	}
	if len(l.Brokers) != 2 || l.Brokers[0] != want[0] || l.Brokers[1] != want[1] {
		t.Errorf("brokers %+v, want %+v", l.Brokers, want)
	}

	var out strings.Builder
	if err := chainview.WriteListing(&out, "file://"+tc.dir, l, t0.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"SEG  LINK", chainview.ShortID(first.ID) + "  incr",
		"2026-12-04T10:00:01Z  2026-12-04T10:00:03Z  3     4",
		"<- east",
		"east: applied through " + chainview.ShortID(first.ID) + " (segment 0), 3 link(s) behind the tip; reported 1m30s ago",
		"west: reports link",
		"\n1*  ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("listing lacks %q:\n%s", want, text)
		}
	}
}

func passphrase(t *testing.T) seal.Wrapper {
	t.Helper()
	w, err := seal.NewPassphrase([]byte("correct horse"), "test")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestListEncrypted(t *testing.T) {
	ctx := context.Background()
	tc := newTestChain(t, &chain.Trust{Wrapper: passphrase(t), Encrypt: true})

	// Without the key: the catalog's structure and counts, the clear chunk
	// sizes, no commit times.
	l, err := chainview.List(ctx, tc.raw)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Sealed || !l.KeyNeeded || len(l.Segments) != 2 {
		t.Fatalf("listing without the key: %+v", l)
	}
	inc := l.Segments[0].Links[1]
	if inc.Transactions != 3 || inc.Changes != 4 || inc.Chunks != 4 || inc.StoredBytes == 0 || inc.FirstCommit != nil {
		t.Errorf("incremental without the key: %+v", inc)
	}
	var out strings.Builder
	if err := chainview.WriteListing(&out, "file://"+tc.dir, l, t0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "encrypted (no key given)") || !strings.Contains(out.String(), "(key)") ||
		!strings.Contains(out.String(), "need its key") {
		t.Errorf("listing without the key:\n%s", out.String())
	}

	// With it: the commit times too.
	keyed := tc.raw.WithKeyring(chain.NewKeyring(chain.Trust{Wrapper: passphrase(t)}))
	l, err = chainview.List(ctx, keyed)
	if err != nil {
		t.Fatal(err)
	}
	inc = l.Segments[0].Links[1]
	if !l.Sealed || l.KeyNeeded || inc.FirstCommit == nil || !inc.LastCommit.Equal(t0.Add(3*time.Second)) {
		t.Errorf("listing with the key: %+v %+v", l, inc)
	}

	// Inspect needs the key.
	err = chainview.Inspect(ctx, tc.raw, inc.ID, "", chainview.Visitor{})
	if !errcode.Is(err, errcode.KeyRequired) {
		t.Errorf("inspect without the key: %v", err)
	}
	var lines []string
	err = chainview.Inspect(ctx, keyed, inc.ID, "", chainview.Visitor{Record: func(r *chainview.Record) error {
		lines = append(lines, chainview.RecordLine(r))
		return nil
	}})
	if err != nil || len(lines) != 10 {
		t.Errorf("inspect with the key: %v, %q", err, lines)
	}
}

func TestInspectIncremental(t *testing.T) {
	ctx := context.Background()
	tc := newTestChain(t, nil)
	first := tc.links[0]
	var lines []string
	var recs []chainview.Record
	var info chainview.LinkInfo
	v := chainview.Visitor{
		Link: func(li chainview.LinkInfo) error { info = li; return nil },
		Record: func(r *chainview.Record) error {
			lines = append(lines, chainview.RecordLine(r))
			recs = append(recs, *r)
			return nil
		},
	}
	if err := chainview.Inspect(ctx, tc.raw, first.ID[:8], "", v); err != nil {
		t.Fatal(err)
	}
	if info.Link.ID != first.ID || info.Segment != 0 || info.Engine != "postgres" {
		t.Errorf("link info %+v", info)
	}
	xid := recs[0].XID
	lsn := recs[0].CommitLSN
	want := []string{
		"BEGIN 2026-12-04T10:00:01.000000Z xid " + itoa(xid) + " commit-lsn " + lsn,
		"  insert public.t key(id=1) id=1 v=one",
		`  insert public.t key(id=2) id=2 v="two words"`,
		"COMMIT 2026-12-04T10:00:01.000000Z xid " + itoa(xid) + " commit-lsn " + lsn,
		"BEGIN 2026-12-04T10:00:02.000000Z xid " + itoa(xid+1) + " commit-lsn " + recs[4].CommitLSN,
		"  update public.t key(id=1) v=uno",
		"COMMIT 2026-12-04T10:00:02.000000Z xid " + itoa(xid+1) + " commit-lsn " + recs[4].CommitLSN,
		"BEGIN 2026-12-04T10:00:03.000000Z xid " + itoa(xid+2) + " commit-lsn " + recs[7].CommitLSN,
		"  delete public.t key(id=2)",
		"COMMIT 2026-12-04T10:00:03.000000Z xid " + itoa(xid+2) + " commit-lsn " + recs[7].CommitLSN,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if r := recs[2]; r.Ordinal == nil || *r.Ordinal != 1 || r.Key[0].Column != "id" || *r.Key[0].Value != "2" {
		t.Errorf("second insert %+v", r)
	}

	// A table filter that matches nothing prints no transaction.
	lines = nil
	if err := chainview.Inspect(ctx, tc.raw, first.ID, "public.other", v); err != nil || len(lines) != 0 {
		t.Errorf("filtered: %v %q", err, lines)
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func TestInspectFullAndMissing(t *testing.T) {
	ctx := context.Background()
	tc := newTestChain(t, nil)
	var tables []chainview.TableView
	v := chainview.Visitor{Table: func(tv chainview.TableView) error { tables = append(tables, tv); return nil }}
	if err := chainview.Inspect(ctx, tc.raw, tc.links[2].ID, "", v); err != nil {
		t.Fatal(err)
	}
	if len(tables) != 1 || tables[0].Table != "public.t" || tables[0].Rows != 1 || tables[0].Chunks != 1 || tables[0].StoredBytes == 0 {
		t.Errorf("tables %+v", tables)
	}
	if line := chainview.TableLine(tables[0]); !strings.HasPrefix(line, "  public.t  rows 1  chunks 1  stored ") {
		t.Errorf("table line %q", line)
	}
	err := chainview.Inspect(ctx, tc.raw, strings.Repeat("0", 40), "", v)
	if !errcode.Is(err, errcode.LinkNotFound) {
		t.Errorf("missing link: %v", err)
	}
	if err := chainview.Inspect(ctx, tc.raw, "abc", "", v); !errcode.Is(err, errcode.LinkNotFound) {
		t.Errorf("short prefix: %v", err)
	}
}

func TestRecordLineValues(t *testing.T) {
	long := strings.Repeat("é", 40)
	old := "a"
	r := &chainview.Record{Op: "update", Table: "s.t", GTID: "3E11FA47-71CA-11E1-9E33-C80AA9429562:23",
		Key:     []chainview.ColumnValue{{Column: "k", Value: nil}},
		Changed: []chainview.ColumnValue{{Column: "a", Value: &long, Old: &old}, {Column: "b", Value: &old, OldNull: true}}}
	got := chainview.RecordLine(r)
	want := "  update s.t key(k=NULL) a=a->" + strings.Repeat("é", 30) + "…(80 bytes) b=NULL->a"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	begin := &chainview.Record{Op: "begin", GTID: "0-1-7"}
	if got := chainview.RecordLine(begin); got != "BEGIN gtid 0-1-7" {
		t.Errorf("begin %q", got)
	}
}

func TestInspectShapes(t *testing.T) {
	ctx := context.Background()
	tc := newTestChain(t, nil)
	b := tc.b
	// A table added by a schema change, with a two-column key, then an
	// update recorded with its whole old row, a key change, a truncate and
	// a transaction named by a GTID.
	tb := chain.Table{Schema: "app", Name: "orders", PrimaryKey: []string{"region", "id"}, Columns: []chain.Column{
		{Name: "region", Type: "text", NotNull: true, Encoding: chain.EncodingText},
		{Name: "id", Type: "integer", NotNull: true, Encoding: chain.EncodingText},
		{Name: "total", Type: "numeric", Encoding: chain.EncodingText},
		{Name: "note", Type: "text", Encoding: chain.EncodingText},
	}}
	schema := b.Txn(chain.Change{Op: chain.OpSchema, Table: "app.orders", Schema: &tb})
	rows := b.Txn(
		chain.Change{Op: chain.OpInsert, Table: "app.orders", New: chaintest.Text("eu", "7", "10.50", "\x00")},
		chain.Change{Op: chain.OpUpdate, Table: "app.orders", OldKind: 'O', Old: chaintest.Text("eu", "7", "10.50", "\x00"), New: chaintest.Text("eu", "7", "12.00", "gift wrap")},
		chain.Change{Op: chain.OpUpdate, Table: "app.orders", OldKind: 'K', Old: chaintest.Text("eu", "7", "\x00", "\x00"), New: chaintest.Text("us", "7", "12.00", "gift wrap")},
		chaintest.Update(1, "other table"),
	)
	trunc := b.Txn(chain.Change{Op: chain.OpTruncate, Tables: []string{"app.orders"}})
	gtid := chaintest.GTIDTxn("0-1-57", chain.Change{Op: chain.OpDelete, Table: "app.orders", OldKind: 'K', Old: chaintest.Text("us", "7", "\x00", "\x00")})
	m := b.Incremental(concat(schema, rows, trunc, gtid))

	var lines []string
	v := chainview.Visitor{Record: func(r *chainview.Record) error {
		lines = append(lines, chainview.RecordLine(r))
		return nil
	}}
	if err := chainview.Inspect(ctx, tc.raw, m.ID, "app.orders", v); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"  schema app.orders columns(region text, id integer, total numeric, note text)",
		"  insert app.orders key(region=eu, id=7) region=eu id=7 total=10.50 note=NULL",
		"  update app.orders key(region=eu, id=7) total=10.50->12.00 note=NULL->\"gift wrap\"",
		"  update app.orders key(region=eu, id=7) region=us total=12.00 note=\"gift wrap\"",
		"  truncate app.orders",
		"BEGIN 1970-01-01T00:00:00.000001Z gtid 0-1-57",
		"  delete app.orders key(region=us, id=7)",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "public.t") {
		t.Errorf("the filter kept public.t:\n%s", got)
	}
	if n := strings.Count(got, "BEGIN"); n != 4 {
		t.Errorf("%d transactions, want 4:\n%s", n, got)
	}
}

func TestListDamagedChunk(t *testing.T) {
	ctx := context.Background()
	tc := newTestChain(t, nil)
	last := tc.links[3]
	if err := tc.raw.Store().Delete(ctx, last.Chunks[0].Key); err != nil {
		t.Fatal(err)
	}
	_, err := chainview.List(ctx, tc.raw)
	if _, ok := errcode.As(err); !ok || !strings.Contains(err.Error(), last.ID) {
		t.Errorf("a missing chunk: %v", err)
	}
}
