package activities

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	_ "github.com/sluicehq/sluice/internal/target/sqlite"
)

// A cutover's counters are the incrementals' latest records, and the
// full's values for the sequences none of them records.
func TestCutoverCounters(t *testing.T) {
	full := &chain.Manifest{Kind: chain.KindFull, Schema: &chain.Schema{Sequences: []chain.Sequence{
		{Schema: "public", Name: "s_id_seq", LastValue: 10, IsCalled: true},
		{Schema: "public", Name: "quiet", LastValue: 77, IsCalled: true},
	}}}
	inc1 := &chain.Manifest{Kind: chain.KindIncremental, Sequences: map[string]int64{"public.s_id_seq": 1500, "shop.orders": 4}}
	inc2 := &chain.Manifest{Kind: chain.KindIncremental, Sequences: map[string]int64{"public.s_id_seq": 3000}}
	got := CutoverCounters([]*chain.Manifest{full, inc1, inc2})
	want := map[string]int64{"public.s_id_seq": 3000, "public.quiet": 77, "shop.orders": 4}
	if !maps.Equal(got, want) {
		t.Fatalf("counters %v, want %v", got, want)
	}
	if got := CutoverCounters([]*chain.Manifest{full}); !maps.Equal(got, map[string]int64{"public.s_id_seq": 10, "public.quiet": 77}) {
		t.Fatalf("a position at the full: %v", got)
	}
}

// The activity moves nothing unless the target's position holds the tip
// the cutover began at, and refuses a position of another chain.
func TestCutoverRefusesAPositionShortOfTheTip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := blobstore.Open(ctx, "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := chaintest.NewBuilder(t, chain.Open(s), time.Now().Add(-time.Hour))
	full := b.Cat.Tip().ID
	inc := b.Incremental(b.Txn(chaintest.Insert(1, "one")))

	ref := credentials.DSNRef{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "target.db")}
	tgt, err := openTarget(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close(ctx)
	if err := tgt.State().EnsureControlTables(ctx); err != nil {
		t.Fatal(err)
	}
	at := func(chainID, last string) {
		t.Helper()
		text, sum, err := apply.Token{Engine: apply.EngineBroker, Stream: "s", ChainID: chainID, LastApplied: last}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := tgt.State().ReplaceState(ctx, "s", &target.StateRow{Token: text, Checksum: sum}); err != nil {
			t.Fatal(err)
		}
	}

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	a := &Activities{}
	env.RegisterActivity(a)
	p := CutoverParams{Store: StoreRef{URL: "file://" + dir}, Target: ref, Stream: "s", Tip: inc.ID, Margin: 10}
	wantCode := func(code errcode.Code) {
		t.Helper()
		_, err := env.ExecuteActivity(a.RaiseCutoverSequences, p)
		var app *temporal.ApplicationError
		if !errors.As(err, &app) || app.Type() != string(code) {
			t.Fatalf("got %v, want %s", err, code)
		}
	}
	wantCode(errcode.CutoverBehind) // no position
	at(b.Cat.ChainID, full)
	wantCode(errcode.CutoverBehind)
	at("another-chain", inc.ID)
	wantCode(errcode.BrokerChainMismatch)
	at(b.Cat.ChainID, inc.ID)
	v, err := env.ExecuteActivity(a.RaiseCutoverSequences, p)
	if err != nil {
		t.Fatal(err)
	}
	var res CutoverResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.ChainID != b.Cat.ChainID || res.LastApplied != inc.ID {
		t.Fatalf("result %+v, want the position at %s", res, inc.ID)
	}
}
