package chain

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/errcode"
)

func tv(s string) Value { return Value{Kind: ValueText, Data: []byte(s)} }

var (
	nullV      = Value{Kind: ValueNull}
	unchangedV = Value{Kind: ValueUnchanged}
)

// cloneChange deep-copies a change, so it survives the iterator's next step.
func cloneChange(c *Change) Change {
	out := *c
	cp := func(vs []Value) []Value {
		if vs == nil {
			return nil
		}
		r := make([]Value, len(vs))
		for i, v := range vs {
			r[i] = Value{Kind: v.Kind}
			if v.Data != nil {
				r[i].Data = bytes.Clone(v.Data)
			}
		}
		return r
	}
	out.New, out.Old = cp(c.New), cp(c.Old)
	if c.Tables != nil {
		out.Tables = append([]string{}, c.Tables...)
	}
	return out
}

// sameChange compares two changes, treating an empty slice as nil and a
// nil text value as empty text (as the format does).
func sameChange(a, b *Change) string {
	if a.Op != b.Op || a.XID != b.XID || a.CommitLSN != b.CommitLSN || a.Ordinal != b.Ordinal ||
		a.LSN != b.LSN || a.CommitTime != b.CommitTime || a.EndLSN != b.EndLSN || a.Table != b.Table ||
		a.TruncateFlags != b.TruncateFlags || a.OldKind != b.OldKind || a.Identified != b.Identified || a.Tx != b.Tx {
		return fmt.Sprintf("scalars differ:\n got %+v\nwant %+v", *a, *b)
	}
	if len(a.Tables) != len(b.Tables) || (len(a.Tables) > 0 && !reflect.DeepEqual(a.Tables, b.Tables)) {
		return fmt.Sprintf("tables %q, want %q", a.Tables, b.Tables)
	}
	for _, img := range [][2][]Value{{a.New, b.New}, {a.Old, b.Old}} {
		if len(img[0]) != len(img[1]) {
			return fmt.Sprintf("image of %d values, want %d", len(img[0]), len(img[1]))
		}
		for i := range img[0] {
			x, y := img[0][i], img[1][i]
			if x.Kind != y.Kind || !bytes.Equal(x.Data, y.Data) {
				return fmt.Sprintf("value %d: %c %q, want %c %q", i, x.Kind, x.Data, y.Kind, y.Data)
			}
			if x.Kind == ValueText && x.Data == nil && y.Data != nil {
				return fmt.Sprintf("value %d: text came back nil", i)
			}
		}
	}
	if (a.Schema == nil) != (b.Schema == nil) || (a.Schema != nil && !reflect.DeepEqual(*a.Schema, *b.Schema)) {
		return fmt.Sprintf("schema %+v, want %+v", a.Schema, b.Schema)
	}
	return ""
}

// sampleChanges covers every op and the edges of every field.
func sampleChanges() []Change {
	schema := &Table{Schema: "public", Name: "orders", Columns: []Column{
		{Name: "id", Type: "bigint", TypeOID: 20, NotNull: true, Encoding: EncodingBinary},
		{Name: "note", Type: "text", TypeOID: 25, Encoding: EncodingText, Default: "'<none>'::text"},
	}, PrimaryKey: []string{"id"}, PrimaryKeyName: "orders_pkey", ReplicaIdentity: "d"}
	const ts = 1_780_000_000_000_000
	return []Change{
		{Op: OpBegin, XID: 1000, CommitLSN: 0x1A2C100, LSN: 0x1A2B3C8, CommitTime: ts, Identified: true},
		{Op: OpInsert, XID: 1000, CommitLSN: 0x1A2C100, LSN: 0x1A2B400, Table: "public.orders", Identified: true,
			New: []Value{tv("1"), nullV, tv(""), {Kind: ValueText}, tv("日本語 \x00 tab\t")}},
		{Op: OpUpdate, XID: 1000, CommitLSN: 0x1A2C100, Ordinal: 1, LSN: 0x1A2B480, Table: "public.orders", Identified: true,
			New: []Value{tv("1"), unchangedV, tv("x"), nullV, unchangedV}, OldKind: 'K', Old: []Value{tv("1"), nullV, nullV, nullV, nullV}},
		{Op: OpUpdate, XID: 1000, CommitLSN: 0x1A2C100, Ordinal: 2, LSN: 0x1A2B500, Table: `"Weird Schema"."tbl.name"`, Identified: true,
			New: []Value{tv("2"), tv("b")}, OldKind: 'O', Old: []Value{tv("2"), tv("a")}},
		{Op: OpDelete, XID: 1000, CommitLSN: 0x1A2C100, Ordinal: 3, LSN: 0x1A2B580, Table: "public.orders", Identified: true,
			OldKind: 'K', Old: []Value{tv("1"), nullV, nullV, nullV, nullV}},
		{Op: OpTruncate, XID: 1000, CommitLSN: 0x1A2C100, Ordinal: 4, LSN: 0x1A2B600, Identified: true,
			Tables: []string{"public.orders", "public.items", `"Weird Schema"."tbl.name"`}, TruncateFlags: 3},
		{Op: OpTruncate, XID: 1000, CommitLSN: 0x1A2C100, Ordinal: 5, LSN: 0x1A2B680, Identified: true, Tables: []string{"public.items"}},
		{Op: OpSchema, XID: 1000, CommitLSN: 0x1A2C100, Ordinal: 6, LSN: 0x1A2B700, Table: "public.orders", Identified: true, Schema: schema},
		{Op: OpSchema, XID: 1000, CommitLSN: 0x1A2C100, Ordinal: 7, LSN: 0x1A2B780, Identified: true, Schema: &Table{Schema: "s", Name: "empty"}},
		{Op: OpInsert, XID: 1000, CommitLSN: 0x1A2C100, Ordinal: 8, LSN: 0x1A2B800, Table: "public.nocols", Identified: true},
		{Op: OpCommit, XID: 1000, CommitLSN: 0x1A2C100, LSN: 0x1A2C100, EndLSN: 0x1A2C130, CommitTime: ts, Identified: true},
		// XID wraparound, LSNs going backwards, an out-of-order ordinal,
		// extreme values, a change that carries no identity.
		{Op: OpBegin, XID: math.MaxUint32, CommitLSN: 0x1A2C000, LSN: 0x10, CommitTime: -1, Identified: true},
		{Op: OpInsert, XID: 3, CommitLSN: math.MaxUint64, Ordinal: math.MaxUint32, LSN: math.MaxUint64, Table: "public.orders",
			New: []Value{tv("9")}, Identified: true},
		{Op: OpInsert, XID: 3, CommitLSN: math.MaxUint64, Ordinal: 7, LSN: 0, Table: "public.orders", New: []Value{nullV}, Identified: true},
		{Op: OpDelete, Table: "public.orders", OldKind: 'K'},
		{Op: OpCommit, XID: 3, CommitLSN: 1, LSN: 1, EndLSN: 0, CommitTime: math.MinInt64, Identified: true},
		{Op: OpCommit, CommitTime: math.MaxInt64, EndLSN: math.MaxUint64, LSN: 5},
	}
}

func encodeChanges(t testing.TB, changes []Change) (*ChangeBuilder, []byte) {
	t.Helper()
	b := NewChangeBuilder()
	for i := range changes {
		if err := b.Append(&changes[i]); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b, data
}

// decodeChanges decodes a change chunk file and copies out its records.
func decodeChanges(t testing.TB, data []byte) (ChunkHeader, []Change) {
	t.Helper()
	h, body, err := DecodeChunk(data)
	if err != nil {
		t.Fatal(err)
	}
	if h.Kind != ChunkKindChanges || h.Table != "" || h.Columns != 0 || h.RawSize != int64(len(body)) {
		t.Fatalf("header %+v", h)
	}
	var out []Change
	it := NewChangeIter(body)
	for it.Next() {
		out = append(out, cloneChange(it.Change()))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if int64(len(out)) != h.Rows {
		t.Fatalf("%d records, header says %d", len(out), h.Rows)
	}
	return h, out
}

func roundTrip(t *testing.T, changes []Change) []byte {
	t.Helper()
	b, data := encodeChanges(t, changes)
	if b.Records() != int64(len(changes)) {
		t.Fatalf("builder counts %d records, want %d", b.Records(), len(changes))
	}
	h, got := decodeChanges(t, data)
	if h.RawSize != int64(b.RawLen()) {
		t.Fatalf("raw size %d, builder %d", h.RawSize, b.RawLen())
	}
	if len(got) != len(changes) {
		t.Fatalf("%d changes back, want %d", len(got), len(changes))
	}
	for i := range changes {
		if d := sameChange(&got[i], &changes[i]); d != "" {
			t.Fatalf("change %d (%c): %s", i, changes[i].Op, d)
		}
	}
	return data
}

func TestChangeRoundTrip(t *testing.T) {
	changes := sampleChanges()
	roundTrip(t, changes)
	// Every change on its own, so no field leans on the one before.
	for i := range changes {
		roundTrip(t, changes[i:i+1])
	}
	// NULL, unchanged and empty text stay apart.
	_, got := decodeChanges(t, roundTrip(t, changes[1:3]))
	n, u := got[0].New, got[1].New
	if n[1].Kind != ValueNull || n[1].Data != nil || n[2].Kind != ValueText || n[2].Data == nil || len(n[2].Data) != 0 ||
		n[3].Kind != ValueText || n[3].Data == nil || u[1].Kind != ValueUnchanged || u[1].Data != nil {
		t.Fatalf("NULL, empty and unchanged values confused: %+v %+v", n, u)
	}
}

func TestChangeEmptyChunk(t *testing.T) {
	b := NewChangeBuilder()
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	h, body, err := DecodeChunk(data)
	if err != nil || h.Kind != ChunkKindChanges || h.Rows != 0 || h.RawSize != 0 || len(body) != 0 {
		t.Fatalf("empty change chunk: %+v %d %v", h, len(body), err)
	}
	it := NewChangeIter(body)
	if it.Next() || it.Err() != nil {
		t.Fatalf("empty body: next true or %v", it.Err())
	}
	if !bytes.Contains(data, []byte(`{"table":"","columns":0,"rows":0,"raw_size":0}`)) {
		t.Fatalf("header not as documented: %q", data)
	}
}

func TestChangeBigValues(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	var changes []Change
	// Record lengths crossing the one-, two- and three-byte length prefixes,
	// and value lengths crossing the one- and two-byte ones.
	for _, l := range []int{0, 1, 100, 118, 119, 120, 121, 122, 127, 128, 129, 16360, 16370, 16371, 16372, 16373, 16374, 16384, 1 << 20} {
		changes = append(changes, Change{Op: OpInsert, Table: "public.big", LSN: uint64(l), Ordinal: 1, New: []Value{{Kind: ValueText, Data: big[:l]}}})
	}
	changes = append(changes, Change{Op: OpUpdate, Table: "public.big", New: []Value{{Kind: ValueText, Data: big}, tv("x")},
		OldKind: 'O', Old: []Value{{Kind: ValueText, Data: big}, unchangedV}})
	roundTrip(t, changes)
	// Check the boundaries were really crossed.
	b := NewChangeBuilder()
	sizes := map[int]bool{}
	for i := range changes {
		before := b.RawLen()
		if err := b.Append(&changes[i]); err != nil {
			t.Fatal(err)
		}
		_, k := binary.Uvarint(b.raw[before:])
		sizes[k] = true
	}
	if !sizes[1] || !sizes[2] || !sizes[3] {
		t.Fatalf("length prefixes of sizes %v, want 1, 2 and 3", sizes)
	}
}

func TestChangeManyTables(t *testing.T) {
	var changes []Change
	for i := range 3000 {
		name := fmt.Sprintf("schema_%d.table_%d", i%7, (i*7919)%1000)
		c := Change{Op: OpInsert, XID: uint32(i / 10), Ordinal: uint32(i % 10), LSN: uint64(i) * 64, Table: name, New: []Value{tv(name)}, Identified: true}
		if i%97 == 0 {
			c = Change{Op: OpTruncate, Tables: []string{name, fmt.Sprintf("other.t%d", i), "schema_0.table_0"}}
		}
		changes = append(changes, c)
	}
	roundTrip(t, changes)
	// A builder reused after Reset starts a new dictionary: each chunk
	// decodes on its own.
	b := NewChangeBuilder()
	for part := range 3 {
		b.Reset()
		chunk := changes[part*1000 : (part+1)*1000]
		for i := range chunk {
			if err := b.Append(&chunk[i]); err != nil {
				t.Fatal(err)
			}
		}
		data, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		_, got := decodeChanges(t, data)
		for i := range chunk {
			if d := sameChange(&got[i], &chunk[i]); d != "" {
				t.Fatalf("part %d change %d: %s", part, i, d)
			}
		}
	}
}

func TestChangeAppendRefusesInvalid(t *testing.T) {
	b := NewChangeBuilder()
	ok := Change{Op: OpInsert, Table: "public.t", New: []Value{tv("1")}}
	if err := b.Append(&ok); err != nil {
		t.Fatal(err)
	}
	raw, records := bytes.Clone(b.raw), b.Records()
	for name, c := range map[string]*Change{
		"nil":                 nil,
		"unknown op":          {Op: 'X', Table: "public.t"},
		"zero op":             {},
		"insert no table":     {Op: OpInsert, New: []Value{tv("1")}},
		"update no table":     {Op: OpUpdate},
		"delete no table":     {Op: OpDelete, OldKind: 'K', Old: []Value{tv("1")}},
		"schema no schema":    {Op: OpSchema, Table: "public.t"},
		"truncate no tables":  {Op: OpTruncate},
		"truncate empty name": {Op: OpTruncate, Tables: []string{"public.t", ""}},
		"bad old kind":        {Op: OpDelete, Table: "public.t", OldKind: 'X', Old: []Value{tv("1")}},
		"old without kind":    {Op: OpDelete, Table: "public.t", Old: []Value{tv("1")}},
		"bad value kind":      {Op: OpInsert, Table: "public.t", New: []Value{{Kind: 'x'}}},
		"zero value kind":     {Op: OpInsert, Table: "public.t", New: []Value{{}}},
		"null with data":      {Op: OpInsert, Table: "public.t", New: []Value{{Kind: ValueNull, Data: []byte("a")}}},
		"unchanged with data": {Op: OpUpdate, Table: "public.t", New: []Value{{Kind: ValueUnchanged, Data: []byte("a")}}},
		"too many values":     {Op: OpInsert, Table: "public.t", New: make([]Value, MaxColumns+1)},
	} {
		if err := b.Append(c); !errors.Is(err, ErrInvalidChange) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if !bytes.Equal(b.raw, raw) || b.Records() != records {
		t.Fatal("refused appends changed the builder")
	}
	b.Reset()
	if b.Records() != 0 || b.RawLen() != 0 {
		t.Fatal("Reset did not empty the builder")
	}
}

// chunkFromBody wraps a hand-made body into a change chunk file.
func chunkFromBody(t testing.TB, body []byte, rows int64) []byte {
	t.Helper()
	b := NewChangeBuilder()
	b.raw, b.records = body, rows
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// rec frames a record body (op onwards) with its length.
func rec(parts ...any) []byte {
	var r []byte
	for _, p := range parts {
		switch v := p.(type) {
		case byte:
			r = append(r, v)
		case Op:
			r = append(r, byte(v))
		case int:
			r = binary.AppendUvarint(r, uint64(v))
		case string:
			r = append(r, v...)
		case []byte:
			r = append(r, v...)
		default:
			panic(fmt.Sprintf("rec: %T", p))
		}
	}
	return append(binary.AppendUvarint(nil, uint64(len(r))), r...)
}

func TestChangeBodyCorruption(t *testing.T) {
	okRec := rec(OpInsert, fieldTable|fieldNew, 0, 3, "a.b", 1, ValueText, 1, "x")
	if _, got := decodeChanges(t, chunkFromBody(t, okRec, 1)); got[0].Table != "a.b" || string(got[0].New[0].Data) != "x" {
		t.Fatalf("hand-made record: %+v", got)
	}
	for name, body := range map[string][]byte{
		"empty record":          {0},
		"record past end":       append(rec(OpBegin, 0), 9, byte(OpBegin), 0),
		"bad length varint":     bytes.Repeat([]byte{0xff}, 11),
		"unknown op":            rec(byte('X'), 0),
		"zero op":               rec(byte(0), 0),
		"unknown field bit":     rec(OpBegin, 1<<14),
		"two ordinals":          rec(OpBegin, fieldOrdinalNext|fieldOrdinal, 1),
		"no mask":               rec(OpBegin),
		"insert without table":  rec(OpInsert, fieldNew, 1, ValueNull),
		"table ref too far":     rec(OpInsert, fieldTable, 1),
		"table name empty":      rec(OpInsert, fieldTable, 0, 0),
		"table name past end":   rec(OpInsert, fieldTable, 0, 9, "a.b"),
		"value kind unknown":    rec(OpInsert, fieldTable|fieldNew, 0, 1, "t", 1, byte('x')),
		"value past record":     rec(OpInsert, fieldTable|fieldNew, 0, 1, "t", 1, ValueText, 5, "ab"),
		"value count too big":   rec(OpInsert, fieldTable|fieldNew, 0, 1, "t", 40000, ValueNull),
		"values missing":        rec(OpInsert, fieldTable|fieldNew, 0, 1, "t", 2, ValueNull),
		"old kind bad":          rec(OpDelete, fieldTable|fieldOld, 0, 1, "t", byte('X'), 0),
		"old kind zero":         rec(OpDelete, fieldTable|fieldOld, 0, 1, "t", byte(0), 0),
		"leftover bytes":        rec(OpBegin, 0, "zz"),
		"xid out of range":      rec(OpBegin, fieldXID, binary.AppendVarint(nil, 1<<31)),
		"ordinal out of range":  rec(OpBegin, fieldOrdinal, 1<<32),
		"truncate no tables":    rec(OpTruncate, 0),
		"truncate count lies":   rec(OpTruncate, fieldTables, 5, 0, 1, "t"),
		"schema not json":       rec(OpSchema, fieldSchema, 3, "{x}"),
		"schema unknown field":  rec(OpSchema, fieldSchema, 8, `{"x":1}`),
		"schema trailing":       rec(OpSchema, fieldSchema, 5, `{} {}`),
		"schema past record":    rec(OpSchema, fieldSchema, 50, `{}`),
		"truncated mid-varint":  rec(OpBegin, fieldLSN, byte(0x80)),
		"second record broken":  append(bytes.Clone(okRec), rec(OpInsert, fieldTable, 1, 5)...),
		"trailing partial byte": append(bytes.Clone(okRec), 0x80),
	} {
		it := NewChangeIter(body)
		n := int64(0)
		for it.Next() {
			n++
		}
		if !errcode.Is(it.Err(), errcode.ChunkCorrupt) || !strings.Contains(it.Err().Error(), "offset") {
			t.Errorf("%s: iterator error %v", name, it.Err())
		}
		if it.Next() {
			t.Errorf("%s: Next true after an error", name)
		}
		for _, rows := range []int64{n, n + 1} {
			if _, _, err := DecodeChunk(chunkFromBody(t, body, rows)); !errcode.Is(err, errcode.ChunkCorrupt) {
				t.Errorf("%s: DecodeChunk with %d rows: %v", name, rows, err)
			}
		}
	}
	// A count that disagrees with an intact body.
	body := append(bytes.Clone(okRec), rec(OpInsert, fieldTable|fieldNew, 0, 1, ValueNull)...)
	if _, _, err := DecodeChunk(chunkFromBody(t, body, 2)); err != nil {
		t.Fatal(err)
	}
	for _, rows := range []int64{0, 1, 3} {
		if _, _, err := DecodeChunk(chunkFromBody(t, body, rows)); !errcode.Is(err, errcode.ChunkCorrupt) {
			t.Errorf("%d rows declared for 2 records: %v", rows, err)
		}
	}
}

func TestChangeChunkCorruption(t *testing.T) {
	_, data := encodeChanges(t, sampleChanges())
	for n := 0; n < len(data); n++ {
		if _, _, err := DecodeChunk(data[:n]); !errcode.Is(err, errcode.ChunkCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	for i := chunkPrefixLen; i < len(data); i++ {
		d := bytes.Clone(data)
		d[i] ^= 0x40
		if _, _, err := DecodeChunk(d); err != nil && !errcode.Is(err, errcode.ChunkCorrupt) {
			t.Fatalf("flip at %d: uncoded error %v", i, err)
		}
	}
	mk := func(hdr string) []byte {
		d := append([]byte(ChunkMagic), ChunkFormatVersion, byte(ChunkKindChanges), 0)
		d = binary.AppendUvarint(d, uint64(len(hdr)))
		return append(d, hdr...)
	}
	if _, _, err := DecodeChunk(mk(`{"table":"","columns":0,"rows":0,"raw_size":0}`)); err != nil {
		t.Fatal(err)
	}
	for _, hdr := range []string{
		`{"table":"public.t","columns":0,"rows":0,"raw_size":0}`,
		`{"table":"","columns":3,"rows":0,"raw_size":0}`,
		`{"table":"","columns":0,"rows":1,"raw_size":0}`,
		`{"table":"","columns":0,"rows":4,"raw_size":11}`,
		`{"table":"","columns":0,"rows":-1,"raw_size":0}`,
		`{"table":"","columns":0,"rows":0,"raw_size":-1}`,
		`{"table":"","columns":0,"rows":0,"raw_size":2000000000}`,
	} {
		if _, _, err := DecodeChunk(mk(hdr)); !errcode.Is(err, errcode.ChunkCorrupt) {
			t.Errorf("header %s: %v", hdr, err)
		}
	}
}

func TestReadChangeChunk(t *testing.T) {
	ctx := context.Background()
	s := newMemStore()
	c := Open(s)
	changes := sampleChanges()
	b, data := encodeChanges(t, changes)
	ref, err := c.WriteChunk(ctx, ChunkPlace{Key: DataKey("inc-1", "changes-000001.slck")}, data, b.Records(), int64(b.RawLen()))
	if err != nil {
		t.Fatal(err)
	}
	it, err := c.ReadChangeChunk(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.Next() {
		if d := sameChange(it.Change(), &changes[n]); d != "" {
			t.Fatalf("change %d: %s", n, d)
		}
		n++
	}
	if it.Err() != nil || n != len(changes) {
		t.Fatalf("%d changes: %v", n, it.Err())
	}
	// ReadChunk reads change chunks too, and says what they are.
	if h, _, err := c.ReadChunk(ctx, ref); err != nil || h.Kind != ChunkKindChanges || h.Rows != int64(len(changes)) {
		t.Fatalf("ReadChunk: %+v %v", h, err)
	}
	rowRef := writeTestChunk(t, c, "full-1", "rows")
	if _, err := c.ReadChangeChunk(ctx, rowRef); !errcode.Is(err, errcode.ChunkCorrupt) || !strings.Contains(err.Error(), rowRef.Key) {
		t.Fatalf("row chunk read as changes: %v", err)
	}
	lying := ref
	lying.Rows++
	if _, err := c.ReadChangeChunk(ctx, lying); !errcode.Is(err, errcode.ChunkCorrupt) || !strings.Contains(err.Error(), ref.Key) {
		t.Fatalf("record count mismatch: %v", err)
	}
}

// manyChanges returns n insert and update records over a few tables.
func manyChanges(n int) []Change {
	out := make([]Change, 0, n)
	for i := range n {
		c := Change{Op: OpInsert, XID: uint32(100 + i/50), CommitLSN: uint64(i/50) * 4096, Ordinal: uint32(i % 50),
			LSN: uint64(i) * 80, Table: fmt.Sprintf("public.t%d", i%5), Identified: true,
			New: []Value{tv(fmt.Sprint(i)), tv("some text"), nullV, tv(""), tv("more text here")}}
		if i%3 == 0 {
			c.Op, c.OldKind, c.Old = OpUpdate, 'K', []Value{tv(fmt.Sprint(i)), nullV, nullV, nullV, nullV}
			c.New[2] = unchangedV
		}
		out = append(out, c)
	}
	return out
}

func TestChangeIterDoesNotAllocate(t *testing.T) {
	changes := manyChanges(10000)
	b, _ := encodeChanges(t, changes)
	body := b.raw
	it := NewChangeIter(body)
	for it.Next() {
	}
	allocs := testing.AllocsPerRun(20, func() {
		it.Reset(body)
		n := 0
		for it.Next() {
			n++
		}
		if n != len(changes) || it.Err() != nil {
			t.Fatalf("%d records: %v", n, it.Err())
		}
	})
	if allocs != 0 {
		t.Fatalf("iterating %d records allocates %v times", len(changes), allocs)
	}
	// A fresh iterator allocates its buffers and names once per chunk, not
	// per record.
	allocs = testing.AllocsPerRun(20, func() {
		it := NewChangeIter(body)
		for it.Next() {
		}
	})
	if allocs > 20 {
		t.Fatalf("a fresh iterator allocates %v times over %d records", allocs, len(changes))
	}
	// Appending does not allocate either once the builder's buffer has grown.
	allocs = testing.AllocsPerRun(20, func() {
		b.Reset()
		for i := range changes {
			if err := b.Append(&changes[i]); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("appending %d records allocates %v times", len(changes), allocs)
	}
}

func TestChangeIterAliasesBody(t *testing.T) {
	b, _ := encodeChanges(t, manyChanges(2))
	it := NewChangeIter(b.raw)
	if !it.Next() {
		t.Fatal(it.Err())
	}
	d := it.Change().New[1].Data
	if string(d) != "some text" || cap(d) != len(d) {
		t.Fatalf("value %q cap %d", d, cap(d))
	}
	d[0] = 'S' // aliases the body
	it.Reset(b.raw)
	it.Next()
	if string(it.Change().New[1].Data) != "Some text" {
		t.Fatal("values do not alias the body")
	}
}
