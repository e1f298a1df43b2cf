package chain

import (
	"bytes"
	"context"
	"testing"
)

// testdata/v2-changes holds one version-2 change chunk and its reference,
// written once by
//
//	go test ./internal/chain/ -run TestWriteChangeFixturesV2 -update-fixtures
//
// and read by TestFrozenChangeFixturesV2 forever after.
const changeFixtureDirV2 = "testdata/v2-changes"

// fixtureChangesV2 holds a PostgreSQL transaction (named by XID and commit
// LSN, as in version 1), two transactions named by opaque IDs (a MySQL GTID
// and a MariaDB GTID), and a change without identity between them, which
// clears the carried ID.
func fixtureChangesV2() []Change {
	const t0 = 1_780_000_000_000_000
	gtid := "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"
	maria := "0-1-4711"
	return []Change{
		{Op: OpBegin, XID: 900, CommitLSN: 0x3000100, LSN: 0x3000000, CommitTime: t0, Identified: true},
		{Op: OpInsert, XID: 900, CommitLSN: 0x3000100, LSN: 0x3000010, Table: "public.t", Identified: true, New: []Value{tv("1"), tv("pg")}},
		{Op: OpCommit, XID: 900, CommitLSN: 0x3000100, LSN: 0x3000100, EndLSN: 0x3000130, CommitTime: t0, Identified: true},
		{Op: OpBegin, Tx: gtid, CommitTime: t0 + 1, Identified: true},
		{Op: OpInsert, Tx: gtid, Table: "app.t", Identified: true, New: []Value{tv("2"), tv("gtid")}},
		{Op: OpUpdate, Tx: gtid, Ordinal: 1, Table: "app.t", Identified: true, New: []Value{tv("2"), tv("gtid2")}, OldKind: 'O', Old: []Value{tv("2"), tv("gtid")}},
		{Op: OpCommit, Tx: gtid, CommitTime: t0 + 1, Identified: true},
		{Op: OpInsert, Table: "app.t", New: []Value{tv("3"), nullV}},
		{Op: OpBegin, Tx: maria, CommitTime: t0 + 2, Identified: true},
		{Op: OpDelete, Tx: maria, Table: "app.t", Identified: true, OldKind: 'O', Old: []Value{tv("3"), nullV}},
		{Op: OpCommit, Tx: maria, CommitTime: t0 + 2, Identified: true},
	}
}

// TestWriteChangeFixturesV2 writes the frozen version-2 change chunk; it
// runs only with -update-fixtures and never over an existing directory.
func TestWriteChangeFixturesV2(t *testing.T) {
	writeChangeFixture(t, changeFixtureDirV2, fixtureChangesV2())
}

func TestFrozenChangeFixturesV2(t *testing.T) {
	ctx := context.Background()
	s := loadFixtureStore(t, changeFixtureDirV2)
	var ref ChunkRef
	if err := strictUnmarshal(s.objects["ref.json"], &ref); err != nil {
		t.Fatal(err)
	}
	c := Open(s)
	it, err := c.ReadChangeChunk(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	want := fixtureChangesV2()
	n := 0
	for ; it.Next(); n++ {
		if n >= len(want) {
			t.Fatalf("more than %d records", len(want))
		}
		if d := sameChange(it.Change(), &want[n]); d != "" {
			t.Errorf("record %d: %s", n, d)
		}
		if id := it.Change().Identity(); want[n].Tx != "" && id.String() != want[n].Tx {
			t.Errorf("record %d: identity %s, want %s", n, id, want[n].Tx)
		}
	}
	if it.Err() != nil || n != len(want) {
		t.Fatalf("%d records: %v", n, it.Err())
	}
	if data := s.objects[changeFixtureKey]; !bytes.HasPrefix(data, []byte("SLCK\x02\x02")) {
		t.Errorf("chunk prefix %q: want a version-2 change chunk", data[:min(len(data), 8)])
	}
	b, _ := encodeChanges(t, fixtureChangesV2())
	_, body, err := c.ReadChunk(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.raw, body) {
		t.Error("the writer no longer produces the frozen body")
	}
}

// A version-1 reader's rule holds in version 2: an opaque transaction ID
// only on a change that has an identity.
func TestTransactionIDNeedsIdentity(t *testing.T) {
	b := NewChangeBuilder()
	err := b.Append(&Change{Op: OpInsert, Table: "app.t", Tx: "0-1-2", New: []Value{tv("1")}})
	if err == nil {
		t.Fatal("a transaction ID on an unidentified change was accepted")
	}
}
