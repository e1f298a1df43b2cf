package apply

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
)

// A restore's apply (one lane, one transaction) of an incremental whose
// records break their framing, or do not number what the manifest
// records, commits nothing: the refusal names the fault with its code and
// the position stays at the link before.
func TestRestoreApplyOfABadIncrementalCommitsNothing(t *testing.T) {
	good := append(chaintest.Txn(10, ins("1", "a")), chaintest.Txn(11, ins("2", "b"))...)
	cases := []struct {
		name string
		recs []chain.Change
		edit func(m *chain.Manifest)
		stop int64
		code errcode.Code
		msg  string
	}{
		{name: "transaction count", recs: good, edit: func(m *chain.Manifest) { m.Transactions = 3 }, code: errcode.ManifestInvalid, msg: "2 transactions"},
		{name: "change count", recs: good, edit: func(m *chain.Manifest) { m.Changes = 3 }, code: errcode.ManifestInvalid, msg: "2 changes"},
		{name: "count, stopping inside", recs: good, edit: func(m *chain.Manifest) { m.Changes = 3 }, stop: 3, code: errcode.ManifestInvalid, msg: "2 changes"},
		{name: "change outside a transaction", recs: append(chaintest.Txn(10, ins("1", "a")), ins("2", "b")),
			code: errcode.ChunkCorrupt, msg: "outside a transaction"},
		{name: "unterminated transaction", recs: append(chaintest.Txn(10, ins("1", "a")), chaintest.Txn(11, ins("2", "b"))[:2]...),
			code: errcode.ChunkCorrupt, msg: "ends inside source transaction 11"},
		{name: "nested begin", recs: append(chaintest.Txn(10, ins("1", "a"))[:2], chaintest.Txn(11)...),
			code: errcode.ChunkCorrupt, msg: "inside transaction 10"},
		{name: "ordinals", recs: func() []chain.Change {
			r := chaintest.Txn(10, ins("1", "a"), ins("2", "b"))
			r[2].Ordinal = 0
			return r
		}(), code: errcode.ChunkCorrupt, msg: "follows change"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch, m := chaintest.WriteIncremental(t, tc.recs, 3)
			if tc.edit != nil {
				tc.edit(m)
			}
			f := newFakeTarget()
			startAt(t, f, "full-1", "run-1")
			o := RestoreOptions("s", "run-1", "full-1", target.Subset{}, tc.stop, ChunksDigest(m))
			_, err := ApplyIncremental(context.Background(), ch, m, testSchema(), f, o)
			if !errcode.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %s mentioning %q", err, tc.code, tc.msg)
			}
			if f.commits != 0 || len(f.committed) != 0 {
				t.Fatalf("%d transactions committed %d changes; want none", f.commits, len(f.committed))
			}
			if tok := f.token("s"); tok.LastApplied != "full-1" || tok.InProgress != nil {
				t.Fatalf("position %+v, want still at full-1", tok)
			}
		})
	}
}

// A restore's apply commits the whole incremental in one transaction, its
// position included; applied again, it applies nothing.
func TestRestoreApplyIsOneTransactionAndOnce(t *testing.T) {
	ch, m := chaintest.WriteIncremental(t, txns(40, 5, 1000), 7)
	f := newFakeTarget()
	startAt(t, f, "full-1", "run-1")
	o := RestoreOptions("s", "run-1", "full-1", target.Subset{}, 0, "")
	r, err := ApplyIncremental(context.Background(), ch, m, testSchema(), f, o)
	if err != nil || r.Applied != 200 {
		t.Fatalf("applied %+v, %v; want 200 changes", r, err)
	}
	if f.commits != 1 {
		t.Fatalf("%d commits, want 1", f.commits)
	}
	if tok := f.token("s"); tok.LastApplied != m.ID {
		t.Fatalf("position %+v, want past %s", tok, m.ID)
	}
	r, err = ApplyIncremental(context.Background(), ch, m, testSchema(), f, o)
	if err != nil || r.Applied != 0 || f.commits != 1 {
		t.Fatalf("again: %+v, %v, %d commits; want nothing applied", r, err, f.commits)
	}
}
