package chain

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/v1-changes holds one version-1 change chunk and its reference,
// written once by
//
//	go test ./internal/chain/ -run TestWriteChangeFixtures -update-fixtures
//
// and read by TestFrozenChangeFixturesV1 forever after. Like the chain
// fixture it is never regenerated: the writer refuses an existing directory.
const changeFixtureDir = "testdata/v1-changes"

const changeFixtureKey = "changes-000001.slck"

// fixtureChanges is the content of the frozen change chunk: two source
// transactions and a change without identity, covering every operation,
// NULL against empty and unchanged values, both old image kinds, truncate
// flags, a schema change, a value longer than 127 bytes, 64-bit positions
// and an XID about to wrap.
func fixtureChanges() []Change {
	const t0 = 1_777_000_000_123_456 // 2026-04-24T03:06:40.123456Z
	long := strings.Repeat("long value ", 20)
	return []Change{
		{Op: OpBegin, XID: 4294967290, CommitLSN: 0x16B3748, LSN: 0x16B3400, CommitTime: t0, Identified: true},
		{Op: OpInsert, XID: 4294967290, CommitLSN: 0x16B3748, Ordinal: 0, LSN: 0x16B3400, Table: "public.fixture", Identified: true,
			New: []Value{tv("1"), tv(""), nullV, tv("日本語 ✓"), tv(long)}},
		{Op: OpUpdate, XID: 4294967290, CommitLSN: 0x16B3748, Ordinal: 1, LSN: 0x16B3480, Table: "public.fixture", Identified: true,
			New: []Value{tv("1"), tv("renamed"), nullV, tv("日本語 ✓"), unchangedV}},
		{Op: OpUpdate, XID: 4294967290, CommitLSN: 0x16B3748, Ordinal: 2, LSN: 0x16B3500, Table: "public.fixture", Identified: true,
			New: []Value{tv("2"), tv("renamed"), nullV, tv(""), unchangedV}, OldKind: 'K', Old: []Value{tv("1"), nullV, nullV, nullV, nullV}},
		{Op: OpInsert, XID: 4294967290, CommitLSN: 0x16B3748, Ordinal: 3, LSN: 0x16B3580, Table: "audit.log", Identified: true,
			New: []Value{tv("42"), tv(`{"a": [1, 2]}`)}},
		{Op: OpUpdate, XID: 4294967290, CommitLSN: 0x16B3748, Ordinal: 4, LSN: 0x16B3600, Table: "audit.log", Identified: true,
			New: []Value{tv("42"), nullV}, OldKind: 'O', Old: []Value{tv("42"), tv(`{"a": [1, 2]}`)}},
		{Op: OpDelete, XID: 4294967290, CommitLSN: 0x16B3748, Ordinal: 5, LSN: 0x16B3680, Table: "public.fixture", Identified: true,
			OldKind: 'K', Old: []Value{tv("2"), nullV, nullV, nullV, nullV}},
		{Op: OpCommit, XID: 4294967290, CommitLSN: 0x16B3748, LSN: 0x16B3748, EndLSN: 0x16B3778, CommitTime: t0, Identified: true},
		{Op: OpBegin, XID: 4294967295, CommitLSN: 0x1FFFFFFFF0, LSN: 0x1FFFFFF000, CommitTime: t0 + 1_500_000, Identified: true},
		{Op: OpSchema, XID: 4294967295, CommitLSN: 0x1FFFFFFFF0, Ordinal: 0, LSN: 0x1FFFFFF100, Table: "public.fixture", Identified: true,
			Schema: &Table{Schema: "public", Name: "fixture", Columns: []Column{
				{Name: "id", Type: "bigint", TypeOID: 20, NotNull: true, Encoding: EncodingBinary},
				{Name: "name", Type: "text", TypeOID: 25, Encoding: EncodingBinary},
				{Name: "gone", Type: "text", TypeOID: 25, Encoding: EncodingBinary},
				{Name: "label", Type: "text", TypeOID: 25, Encoding: EncodingBinary},
				{Name: "blob", Type: "text", TypeOID: 25, Encoding: EncodingBinary},
				{Name: "added", Type: "integer", TypeOID: 23, Default: "7", Encoding: EncodingBinary},
			}, PrimaryKey: []string{"id"}, PrimaryKeyName: "fixture_pkey", ReplicaIdentity: "d"}},
		{Op: OpTruncate, XID: 4294967295, CommitLSN: 0x1FFFFFFFF0, Ordinal: 1, LSN: 0x1FFFFFF200, Identified: true,
			Tables: []string{"audit.log", "public.fixture"}, TruncateFlags: 3},
		{Op: OpCommit, XID: 4294967295, CommitLSN: 0x1FFFFFFFF0, LSN: 0x1FFFFFFFF0, EndLSN: 0x2000000020, CommitTime: t0 + 1_500_000, Identified: true},
		{Op: OpInsert, LSN: 0x2000000100, Table: "public.fixture",
			New: []Value{tv("3"), nullV, nullV, nullV, nullV, tv("7")}},
	}
}

// TestWriteChangeFixtures writes the frozen change chunk; it runs only with
// -update-fixtures and never over an existing directory.
func TestWriteChangeFixtures(t *testing.T) {
	writeChangeFixture(t, changeFixtureDir, fixtureChanges())
}

// writeChangeFixture writes changes as a frozen change chunk and its
// reference into dir; it runs only with -update-fixtures and never over an
// existing directory.
func writeChangeFixture(t *testing.T, dir string, changes []Change) {
	t.Helper()
	if !*updateFixtures {
		t.Skip("run with -update-fixtures to write missing fixtures")
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s exists and is frozen; a new format version gets a new directory", dir)
	}
	b, data := encodeChanges(t, changes)
	ref, err := Open(newMemStore()).WriteChunk(context.Background(), ChunkPlace{Key: changeFixtureKey}, data, b.Records(), int64(b.RawLen()))
	if err != nil {
		t.Fatal(err)
	}
	refJSON, err := json.MarshalIndent(ref, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, changeFixtureKey), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ref.json"), append(refJSON, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFrozenChangeFixturesV1(t *testing.T) {
	ctx := context.Background()
	s := loadFixtureStore(t, changeFixtureDir)
	var ref ChunkRef
	if err := strictUnmarshal(s.objects["ref.json"], &ref); err != nil {
		t.Fatal(err)
	}
	if ref.Key != changeFixtureKey || ref.Rows != 13 {
		t.Fatalf("ref %+v", ref)
	}
	c := Open(s)
	it, err := c.ReadChangeChunk(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	want := fixtureChanges()
	n := 0
	for ; it.Next(); n++ {
		if n >= len(want) {
			t.Fatalf("more than %d records", len(want))
		}
		if d := sameChange(it.Change(), &want[n]); d != "" {
			t.Errorf("record %d: %s", n, d)
		}
	}
	if it.Err() != nil || n != len(want) {
		t.Fatalf("%d records: %v", n, it.Err())
	}

	data := s.objects[changeFixtureKey]
	if !bytes.HasPrefix(data, []byte("SLCK\x01\x02\x00\x32"+`{"table":"","columns":0,"rows":13,"raw_size":1067}`)) {
		t.Errorf("chunk prefix %q", data[:min(len(data), 60)])
	}
	_, body, err := c.ReadChunk(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	// Literal bytes, independent of the encoder: the first two records.
	const begin = "14" + "42" + "8f04" + // length 20, 'B', mask 0x20f: identified, XID, commit LSN, LSN, commit time
		"0b" + // XID 4294967290: int32 -6 from 0, zigzag 11
		"90ddd916" + // commit LSN 0x16B3748 from 0, zigzag
		"80d0d916" + // LSN 0x16B3400 from 0, zigzag
		"80c9afdc818ba806" // commit time 1777000000123456 from 0, zigzag
	if got := hex.EncodeToString(body[:len(begin)/2]); got != begin {
		t.Errorf("begin record\n got %s\nwant %s", got, begin)
	}
	const insert = "8702" + // record of 263 bytes
		"49" + "61" + // 'I', mask 0x61: identified, table, new (LSN and ordinal 0 as before)
		"00" + "0e" + "7075626c69632e66697874757265" + // define table 0, "public.fixture"
		"05" + "7401" + "31" + "7400" + "6e" + "740d" + "e697a5e69cace8aa9e20e29c93" + // five values: "1", "", NULL, "日本語 ✓",
		"74dc01" + "6c6f6e672076616c756520" // and 220 bytes of "long value "
	if got := hex.EncodeToString(body[len(begin)/2 : len(begin)/2+len(insert)/2]); got != insert {
		t.Errorf("insert record\n got %s\nwant %s", got, insert)
	}
	// The writer still produces these exact bytes. Readers accept other
	// encodings of the same records (section 4.4), so a deliberate change to
	// the writer may relax this check; it must never touch the fixture.
	b, _ := encodeChanges(t, fixtureChanges())
	if !bytes.Equal(b.raw, body) {
		t.Error("the writer no longer produces the frozen body")
	}
}
