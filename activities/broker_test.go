package activities

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	_ "github.com/sluicehq/sluice/internal/target/sqlite"
)

// startFixture is one case's chain (a full F, then incrementals I1 and I2
// of one transaction each, in a file:// store) and its SQLite target.
type startFixture struct {
	t     *testing.T
	dir   string
	b     *chaintest.Builder
	full  string
	inc1  string
	inc2  string
	ref   credentials.DSNRef
	store StoreRef
}

func newStartFixture(t *testing.T) *startFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := blobstore.Open(ctx, "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := chaintest.NewBuilder(t, chain.Open(s), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := &startFixture{t: t, dir: dir, b: b, full: b.Cat.Tip().ID,
		ref:   credentials.DSNRef{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "target.db")},
		store: StoreRef{URL: "file://" + dir}}
	f.inc1 = b.Incremental(b.Txn(chaintest.Insert(2, "two"))).ID
	f.inc2 = b.Incremental(b.Txn(chaintest.Insert(3, "three"))).ID
	return f
}

// token is a broker position of this chain at last.
func (f *startFixture) token(last string) apply.Token {
	return apply.Token{Engine: apply.EngineBroker, Stream: "s", ChainID: f.b.Cat.ChainID, LastApplied: last}
}

// put stores tok as the stream's position.
func (f *startFixture) put(tok apply.Token) {
	f.t.Helper()
	text, sum, err := tok.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	f.putRow(target.StateRow{Token: text, Checksum: sum})
}

// putRow stores a raw state row for the stream.
func (f *startFixture) putRow(row target.StateRow) {
	f.t.Helper()
	ctx := context.Background()
	tgt := f.open()
	defer tgt.Close(ctx)
	if err := tgt.State().EnsureControlTables(ctx); err != nil {
		f.t.Fatal(err)
	}
	if err := tgt.State().ReplaceState(ctx, "s", &row); err != nil {
		f.t.Fatal(err)
	}
}

func (f *startFixture) open() target.Target {
	f.t.Helper()
	tgt, err := openTarget(context.Background(), f.ref)
	if err != nil {
		f.t.Fatal(err)
	}
	return tgt
}

// row reads the stream's stored row.
func (f *startFixture) row() (target.StateRow, bool) {
	f.t.Helper()
	ctx := context.Background()
	tgt := f.open()
	defer tgt.Close(ctx)
	row, found, err := tgt.State().ReadState(ctx, "s")
	if err != nil {
		f.t.Fatal(err)
	}
	return row, found
}

// reported is the position the broker reported into the store for
// retention ("" when none).
func (f *startFixture) reported() string {
	f.t.Helper()
	ps, err := f.b.Ch.BrokerPositions(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, p := range ps {
		if p.Stream == "s" {
			return p.LastApplied
		}
	}
	return ""
}

// The postgres LSNs of the fixture's chain (chaintest.Builder): the full
// at 0/1000; I1's transaction commits at 0/1004 and I1 ends at 0/100C;
// I2's commits at 0/1010 and I2 ends at 0/1018.
const (
	lsnBeforeFull = "0/800"
	lsnInsideI1   = "0/1002"
	lsnBetween    = "0/100D"
	lsnAfterAll   = "0/FFFFFF"
)

// TestPrepareBrokerStartModes walks every branch of prepareBroker's start
// mode decision, each on its own chain and SQLite target: the mode chosen
// and the position it starts from, or the exact code of the refusal — and
// that a refusal leaves the stored row as it was.
func TestPrepareBrokerStartModes(t *testing.T) {
	type want struct {
		code errcode.Code
		// mode, last, inProgress, tail: the BrokerStart (its ChainID is
		// always the chain's). Names are "F", "I1", "I2".
		mode, last, inProgress, tail string
		// row after the call: "unchanged", "cleared", or the link name
		// a fresh position records.
		row string
	}
	cases := []struct {
		name  string
		setup func(f *startFixture)
		// p adjusts the parameters (stream "s", the fixture's store and
		// target, no flags).
		p    func(f *startFixture, p *BrokerStartParams)
		want want
	}{
		// Cold target, no flags.
		{name: "no position, no flag: cold start refused",
			want: want{code: errcode.BrokerNoPosition, row: "unchanged"}},
		{name: "no position, an until point: still refused",
			p:    func(f *startFixture, p *BrokerStartParams) { p.Point.UntilPosition = lsnAfterAll },
			want: want{code: errcode.BrokerNoPosition, row: "unchanged"}},

		// Warm resume.
		{name: "warm resume from the stored position",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			want:  want{mode: ModeWarm, last: "I1", row: "unchanged"}},
		{name: "warm resume at the full",
			setup: func(f *startFixture) { f.put(f.token(f.full)) },
			want:  want{mode: ModeWarm, last: "F", row: "unchanged"}},
		{name: "warm resume inside an incremental",
			setup: func(f *startFixture) {
				tok := f.token(f.inc1)
				tok.InProgress = &apply.Progress{Incremental: f.inc2, AppliedThrough: 0}
				f.put(tok)
			},
			want: want{mode: ModeWarm, last: "I1", inProgress: "I2", row: "unchanged"}},
		{name: "warm resume with the same subset, patterns in another order",
			setup: func(f *startFixture) {
				tok := f.token(f.inc1)
				tok.Subset = target.Subset{IncludeTables: []string{"public.t", "public.u"}}
				f.put(tok)
			},
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Subset = target.Subset{IncludeTables: []string{"public.u", "public.t"}}
			},
			want: want{mode: ModeWarm, last: "I1", row: "unchanged"}},
		{name: "warm resume with an until point not yet reached",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p:     func(f *startFixture, p *BrokerStartParams) { p.Point.UntilPosition = lsnAfterAll },
			want:  want{mode: ModeWarm, last: "I1", row: "unchanged"}},
		{name: "warm resume with a verified generation no newer than the chain's",
			setup: func(f *startFixture) {
				tok := f.token(f.inc2)
				tok.Verified = &apply.Verified{Generation: f.b.Cat.Generation}
				f.put(tok)
			},
			want: want{mode: ModeWarm, last: "I2", row: "unchanged"}},

		// Warm refusals.
		{name: "position already past the until point",
			setup: func(f *startFixture) { f.put(f.token(f.inc2)) },
			p:     func(f *startFixture, p *BrokerStartParams) { p.Point.UntilPosition = lsnBetween },
			want:  want{code: errcode.PointPassed, row: "unchanged"}},
		{name: "position inside an incremental, past the until point",
			setup: func(f *startFixture) {
				tok := f.token(f.full)
				tok.InProgress = &apply.Progress{Incremental: f.inc1, AppliedThrough: 3}
				f.put(tok)
			},
			p:    func(f *startFixture, p *BrokerStartParams) { p.Point.UntilPosition = lsnInsideI1 },
			want: want{code: errcode.PointPassed, row: "unchanged"}},
		{name: "until position not of the chain's engine",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p:     func(f *startFixture, p *BrokerStartParams) { p.Point.UntilPosition = "not-an-lsn" },
			want:  want{code: errcode.PointInvalid, row: "unchanged"}},
		{name: "position of another chain",
			setup: func(f *startFixture) {
				tok := f.token(f.inc1)
				tok.ChainID = "another-chain"
				f.put(tok)
			},
			want: want{code: errcode.BrokerChainMismatch, row: "unchanged"}},
		{name: "position of another chain, with --at-chain-id",
			setup: func(f *startFixture) {
				tok := f.token(f.inc1)
				tok.ChainID = "another-chain"
				f.put(tok)
			},
			p:    func(f *startFixture, p *BrokerStartParams) { p.AtChainID = f.inc1 },
			want: want{code: errcode.BrokerChainMismatch, row: "unchanged"}},
		{name: "subset changed",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Subset = target.Subset{ExcludeTables: []string{"public.t"}}
			},
			want: want{code: errcode.BrokerSubsetChanged, row: "unchanged"}},
		{name: "subset dropped",
			setup: func(f *startFixture) {
				tok := f.token(f.inc1)
				tok.Subset = target.Subset{IncludeTables: []string{"public.t"}}
				f.put(tok)
			},
			want: want{code: errcode.BrokerSubsetChanged, row: "unchanged"}},
		{name: "subset changed, with --at-chain-id of the position",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p: func(f *startFixture, p *BrokerStartParams) {
				p.AtChainID = f.inc1
				p.Subset = target.Subset{IncludeTables: []string{"public.t"}}
			},
			want: want{code: errcode.BrokerSubsetChanged, row: "unchanged"}},
		{name: "position a rolled-back store no longer holds",
			setup: func(f *startFixture) {
				tok := f.token(f.inc1)
				tok.Verified = &apply.Verified{Generation: f.b.Cat.Generation + 1}
				f.put(tok)
			},
			want: want{code: errcode.ChainRolledBack, row: "unchanged"}},
		{name: "rolled back, checked before another chain's position",
			setup: func(f *startFixture) {
				tok := f.token(f.inc1)
				tok.ChainID = "another-chain"
				tok.Verified = &apply.Verified{Generation: f.b.Cat.Generation + 1}
				f.put(tok)
			},
			want: want{code: errcode.ChainRolledBack, row: "unchanged"}},
		{name: "position pruned from the chain",
			setup: func(f *startFixture) { f.put(f.token("0000pruned0000")) },
			want:  want{code: errcode.BrokerPositionPruned, row: "unchanged"}},
		{name: "damaged broker row",
			setup: func(f *startFixture) {
				text, _, err := f.token(f.inc1).Encode()
				if err != nil {
					t.Fatal(err)
				}
				f.putRow(target.StateRow{Token: text, Checksum: "0000"})
			},
			want: want{code: errcode.BrokerPositionCorrupt, row: "unchanged"}},
		{name: "damaged broker row, with --at-chain-id",
			setup: func(f *startFixture) {
				text, _, err := f.token(f.inc1).Encode()
				if err != nil {
					t.Fatal(err)
				}
				f.putRow(target.StateRow{Token: text, Checksum: "0000"})
			},
			p:    func(f *startFixture, p *BrokerStartParams) { p.AtChainID = f.inc1 },
			want: want{code: errcode.BrokerPositionCorrupt, row: "unchanged"}},
		{name: "classic broker row",
			setup: func(f *startFixture) {
				text := `{"_engine":"` + apply.EngineBrokerClassic + `","stream":"s"}`
				f.putRow(target.StateRow{Token: text, Checksum: apply.Checksum(text)})
			},
			want: want{code: errcode.BrokerPositionCorrupt, row: "unchanged"}},
		{name: "row of another writer",
			setup: func(f *startFixture) { f.putForeign() },
			want:  want{code: errcode.BrokerPositionForeign, row: "unchanged"}},
		{name: "row of another writer, with --reset-target-data",
			setup: func(f *startFixture) { f.putForeign() },
			p:     func(f *startFixture, p *BrokerStartParams) { p.Reset = true },
			want:  want{code: errcode.BrokerPositionForeign, row: "unchanged"}},
		{name: "row of another writer, with --at-chain-id",
			setup: func(f *startFixture) { f.putForeign() },
			p:     func(f *startFixture, p *BrokerStartParams) { p.AtChainID = f.inc1 },
			want:  want{code: errcode.BrokerPositionForeign, row: "unchanged"}},

		// --at-chain-id.
		{name: "--at-chain-id on a target with no position",
			p:    func(f *startFixture, p *BrokerStartParams) { p.AtChainID = f.inc1 },
			want: want{mode: ModeAtChainID, last: "I1", row: "I1"}},
		{name: "--at-chain-id of the full, with a subset",
			p: func(f *startFixture, p *BrokerStartParams) {
				p.AtChainID = f.full
				p.Subset = target.Subset{IncludeTables: []string{"public.t"}}
			},
			want: want{mode: ModeAtChainID, last: "F", row: "F"}},
		{name: "--at-chain-id of no link in the chain",
			p:    func(f *startFixture, p *BrokerStartParams) { p.AtChainID = "0000nosuch0000" },
			want: want{code: errcode.LinkNotFound, row: "unchanged"}},
		{name: "--at-chain-id of no link, over a position",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p:     func(f *startFixture, p *BrokerStartParams) { p.AtChainID = "0000nosuch0000" },
			want:  want{code: errcode.LinkNotFound, row: "unchanged"}},
		{name: "--at-chain-id with a point it already passed",
			p: func(f *startFixture, p *BrokerStartParams) {
				p.AtChainID = f.inc2
				p.Point.UntilPosition = lsnBetween
			},
			want: want{code: errcode.PointPassed, row: "unchanged"}},
		{name: "--at-chain-id with a point ahead",
			p: func(f *startFixture, p *BrokerStartParams) {
				p.AtChainID = f.inc1
				p.Point.UntilPosition = lsnBetween
			},
			want: want{mode: ModeAtChainID, last: "I1", row: "I1"}},
		{name: "--at-chain-id over a position naming the same link: warm resume",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p:     func(f *startFixture, p *BrokerStartParams) { p.AtChainID = f.inc1 },
			want:  want{mode: ModeWarm, last: "I1", row: "unchanged"}},
		{name: "--at-chain-id over a position naming the same link, point passed",
			setup: func(f *startFixture) { f.put(f.token(f.inc2)) },
			p: func(f *startFixture, p *BrokerStartParams) {
				p.AtChainID = f.inc2
				p.Point.UntilPosition = lsnBetween
			},
			want: want{code: errcode.PointPassed, row: "unchanged"}},
		{name: "--at-chain-id over a position naming another link",
			setup: func(f *startFixture) { f.put(f.token(f.inc2)) },
			p:     func(f *startFixture, p *BrokerStartParams) { p.AtChainID = f.inc1 },
			want:  want{code: errcode.BrokerAtChainIDConflict, row: "unchanged"}},
		{name: "--at-chain-id over a position inside an incremental",
			setup: func(f *startFixture) {
				tok := f.token(f.inc1)
				tok.InProgress = &apply.Progress{Incremental: f.inc2, AppliedThrough: 0}
				f.put(tok)
			},
			p:    func(f *startFixture, p *BrokerStartParams) { p.AtChainID = f.inc1 },
			want: want{code: errcode.BrokerAtChainIDConflict, row: "unchanged"}},

		// --reset-target-data.
		{name: "reset on a target with no position",
			p:    func(f *startFixture, p *BrokerStartParams) { p.Reset = true },
			want: want{mode: ModeReset, tail: "I2", row: "cleared"}},
		{name: "reset over a position",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p:     func(f *startFixture, p *BrokerStartParams) { p.Reset = true },
			want:  want{mode: ModeReset, tail: "I2", row: "cleared"}},
		{name: "reset over a damaged broker row",
			setup: func(f *startFixture) {
				text, _, err := f.token(f.inc1).Encode()
				if err != nil {
					t.Fatal(err)
				}
				f.putRow(target.StateRow{Token: text, Checksum: "0000"})
			},
			p:    func(f *startFixture, p *BrokerStartParams) { p.Reset = true },
			want: want{mode: ModeReset, tail: "I2", row: "cleared"}},
		{name: "reset over another chain's position, with --at-chain-id ignored",
			setup: func(f *startFixture) {
				tok := f.token(f.inc1)
				tok.ChainID = "another-chain"
				f.put(tok)
			},
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Reset = true
				p.AtChainID = "0000nosuch0000"
			},
			want: want{mode: ModeReset, tail: "I2", row: "cleared"}},
		{name: "reset with a new subset",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Reset = true
				p.Subset = target.Subset{IncludeTables: []string{"public.t"}}
			},
			want: want{mode: ModeReset, tail: "I2", row: "cleared"}},
		{name: "reset with an invalid subset pattern",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Reset = true
				p.Subset = target.Subset{IncludeTables: []string{"a.b.c.d"}}
			},
			want: want{code: errcode.FilterInvalid, row: "unchanged"}},
		{name: "reset to an until point inside I2: restores through I1",
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Reset = true
				p.Point.UntilPosition = lsnBetween
			},
			want: want{mode: ModeReset, tail: "I1", row: "cleared"}},
		{name: "reset to an until point inside I1: restores the full",
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Reset = true
				p.Point.UntilPosition = lsnInsideI1
			},
			want: want{mode: ModeReset, tail: "F", row: "cleared"}},
		{name: "reset to an until point after the chain: restores the tip",
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Reset = true
				p.Point.UntilPosition = lsnAfterAll
			},
			want: want{mode: ModeReset, tail: "I2", row: "cleared"}},
		{name: "reset to an until point before the oldest full",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Reset = true
				p.Point.UntilPosition = lsnBeforeFull
			},
			want: want{code: errcode.PointOutsideChain, row: "unchanged"}},
		{name: "reset to an invalid until point",
			setup: func(f *startFixture) { f.put(f.token(f.inc1)) },
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Reset = true
				p.Point.UntilPosition = "not-an-lsn"
			},
			want: want{code: errcode.PointInvalid, row: "unchanged"}},
		{name: "reset over a chain whose incremental's chunk is damaged",
			setup: func(f *startFixture) {
				f.put(f.token(f.inc1))
				f.damageChunk(f.inc2)
			},
			p:    func(f *startFixture, p *BrokerStartParams) { p.Reset = true },
			want: want{code: errcode.ChunkCorrupt, row: "unchanged"}},
		{name: "warm resume does not read chunks: a damaged one is the apply's to find",
			setup: func(f *startFixture) {
				f.put(f.token(f.inc1))
				f.damageChunk(f.inc2)
			},
			want: want{mode: ModeWarm, last: "I1", row: "unchanged"}},
		{name: "reset over a chain that lost a manifest",
			setup: func(f *startFixture) {
				f.put(f.token(f.inc1))
				if err := os.Remove(filepath.Join(f.dir, filepath.FromSlash(chain.ManifestKey(f.inc1)))); err != nil {
					t.Fatal(err)
				}
			},
			p:    func(f *startFixture, p *BrokerStartParams) { p.Reset = true },
			want: want{code: errcode.ManifestInvalid, row: "unchanged"}},
		{name: "reset over a chain with a severed transaction",
			setup: func(f *startFixture) {
				f.put(f.token(f.inc1))
				// Shape A: a transaction begun in one window, committed
				// in the next.
				whole := f.b.Txn(chaintest.Insert(4, "four"))
				split := f.b.Txn(chaintest.Insert(5, "five"), chaintest.Insert(6, "six"))
				after := f.b.Txn(chaintest.Insert(7, "seven"))
				f.rawIncremental(append(whole, split[:2]...), whole[len(whole)-1].EndLSN)
				f.rawIncremental(append(split[2:], after...), after[len(after)-1].EndLSN)
				f.b.Incremental(f.b.Txn(chaintest.Insert(8, "eight")))
			},
			p:    func(f *startFixture, p *BrokerStartParams) { p.Reset = true },
			want: want{code: errcode.ChainSeveredTransaction, row: "unchanged"}},
		{name: "reset refused by the target's judgment before the drop",
			setup: func(f *startFixture) {
				f.put(f.token(f.inc1))
				f.exec(`CREATE VIEW t AS SELECT 1 AS id`)
			},
			p:    func(f *startFixture, p *BrokerStartParams) { p.Reset = true },
			want: want{code: errcode.BrokerKeylessTable, row: "unchanged"}},

		// The store and the target themselves.
		{name: "a store holding no chain",
			p:    func(f *startFixture, p *BrokerStartParams) { p.Store = StoreRef{URL: "file://" + t.TempDir()} },
			want: want{code: errcode.ChainNotFound, row: "unchanged"}},
		{name: "a store URL no store opens",
			p:    func(f *startFixture, p *BrokerStartParams) { p.Store = StoreRef{URL: "nosuch://bucket"} },
			want: want{code: errcode.ConfigInvalid, row: "unchanged"}},
		{name: "a target driver no engine registers",
			p: func(f *startFixture, p *BrokerStartParams) {
				p.Target = credentials.DSNRef{Driver: "nosuch", DSN: f.ref.DSN}
			},
			want: want{code: errcode.ConfigInvalid, row: "unchanged"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			f := newStartFixture(t)
			if c.setup != nil {
				c.setup(f)
			}
			before, hadRow := f.row()
			p := BrokerStartParams{BrokerParams: BrokerParams{Store: f.store, Target: f.ref, Stream: "s"}}
			if c.p != nil {
				c.p(f, &p)
			}
			a := &Activities{}
			got, err := a.prepareBroker(ctx, p)
			names := map[string]string{f.full: "F", f.inc1: "I1", f.inc2: "I2", "": ""}
			named := func(id string) string {
				if n, ok := names[id]; ok {
					return n
				}
				return id
			}
			if c.want.code != "" {
				e, ok := errcode.As(err)
				if !ok || e.Code != c.want.code {
					t.Fatalf("got %+v, %v; want %s", got, err, c.want.code)
				}
				if got != (BrokerStart{}) {
					t.Fatalf("a refusal returned a start: %+v", got)
				}
			} else {
				if err != nil {
					t.Fatalf("want mode %s, got %v", c.want.mode, err)
				}
				g := struct{ mode, last, inProgress, tail, chain string }{got.Mode, named(got.LastApplied), named(got.InProgress), named(got.Tail), got.ChainID}
				w := struct{ mode, last, inProgress, tail, chain string }{c.want.mode, c.want.last, c.want.inProgress, c.want.tail, f.b.Cat.ChainID}
				if g != w {
					t.Fatalf("start %+v, want %+v", g, w)
				}
				// The position reported for retention is where the run
				// starts: the position, or the link the reset restores
				// through.
				at := c.want.last
				if c.want.mode == ModeReset {
					at = c.want.tail
				}
				if r := named(f.reported()); r != at {
					t.Fatalf("reported position %s, want %s", r, at)
				}
			}
			after, hasRow := f.row()
			switch c.want.row {
			case "unchanged":
				if hasRow != hadRow || after != before {
					t.Fatalf("the row changed: before %v %+v, after %v %+v", hadRow, before, hasRow, after)
				}
				if c.setup == nil && f.controlTables() != 0 {
					t.Fatal("a refusal created the control tables")
				}
				if c.want.code != "" && f.reported() != "" {
					t.Fatalf("a refusal reported a position: %s", f.reported())
				}
			case "cleared":
				if hasRow {
					t.Fatalf("the row stayed: %+v", after)
				}
			default:
				if !hasRow {
					t.Fatal("no row written")
				}
				tok, err := apply.Decode(after.Token, after.Checksum)
				if err != nil {
					t.Fatal(err)
				}
				if tok.Engine != apply.EngineBroker || tok.Stream != "s" || tok.ChainID != f.b.Cat.ChainID ||
					named(tok.LastApplied) != c.want.row || tok.InProgress != nil || !tok.Subset.Equal(p.Subset) {
					t.Fatalf("position written %+v, want %s with subset %s", tok, c.want.row, p.Subset)
				}
			}
		})
	}
}

// putForeign stores a row of another writer (a sync start stream's).
func (f *startFixture) putForeign() {
	text := `{"_engine":"pg-cdc","stream":"s"}`
	f.putRow(target.StateRow{Token: text, Checksum: apply.Checksum(text)})
}

// controlTables counts the sluice_ tables the target database holds.
func (f *startFixture) controlTables() int {
	f.t.Helper()
	db, err := sql.Open("sqlite", f.ref.DSN)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'sluice%'`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// exec runs one statement on the target database.
func (f *startFixture) exec(stmt string) {
	f.t.Helper()
	db, err := sql.Open("sqlite", f.ref.DSN)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		f.t.Fatal(err)
	}
}

// damageChunk flips the last byte of the first change chunk of
// incremental id in the store.
func (f *startFixture) damageChunk(id string) {
	f.t.Helper()
	m, err := f.b.Ch.GetManifest(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(f.dir, filepath.FromSlash(m.Chunks[0].Key))
	b, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// rawIncremental commits records as the chain's next incremental, ending
// at position end, whether or not they are whole transactions (the
// Builder's incrementals always are): a window that severs one.
func (f *startFixture) rawIncremental(records []chain.Change, end uint64) {
	f.t.Helper()
	ctx := context.Background()
	cb := chain.NewChangeBuilder()
	var begins, commits int64
	for i := range records {
		if err := cb.Append(&records[i]); err != nil {
			f.t.Fatal(err)
		}
		switch records[i].Op {
		case chain.OpBegin:
			begins++
		case chain.OpCommit:
			commits++
		}
	}
	data, err := cb.Encode()
	if err != nil {
		f.t.Fatal(err)
	}
	tip := f.b.Cat.Tip()
	ref, err := f.b.Ch.WriteChunk(ctx, chain.ChunkPlace{Key: chain.DataKey("raw-"+tip.ID[:8], "changes-000000.chunk")}, data, cb.Records(), int64(cb.RawLen()))
	if err != nil {
		f.t.Fatal(err)
	}
	txs := min(begins, commits)
	m := &chain.Manifest{Kind: chain.KindIncremental, Parent: tip.ID, Source: f.b.Cat.Source,
		StartPosition: tip.EndPosition, EndPosition: chain.FormatLSN(end), CreatedAt: f.b.Now,
		Chunks: []chain.ChunkRef{ref}, Changes: cb.Records() - 2*txs, Transactions: txs, ApplyIdentity: true}
	f.b.Now = f.b.Now.Add(time.Minute)
	if err := f.b.Ch.PutManifest(ctx, m); err != nil {
		f.t.Fatal(err)
	}
	next := f.b.Cat.Next()
	if err := next.AppendIncremental(m); err != nil {
		f.t.Fatal(err)
	}
	if err := f.b.Ch.CommitCatalog(ctx, next); err != nil {
		f.t.Fatal(err)
	}
	f.b.Cat = next
}
