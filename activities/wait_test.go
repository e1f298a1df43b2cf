package activities

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/dur"
)

// A delayed broker's wait hands over the links it held back once they come
// due, even when nothing was committed to the chain meanwhile: a quiet
// source must not leave a delayed replica behind until the wait's end.
func TestWaitHandsOverHeldLinksOnAQuietChain(t *testing.T) {
	dir := t.TempDir()
	s, err := blobstore.Open(context.Background(), "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := chaintest.NewBuilder(t, chain.Open(s), time.Now().Add(-time.Hour))
	full := b.Cat.Tip().ID
	inc := b.Incremental(b.Txn(chaintest.Insert(1, "one")))

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	a := &Activities{}
	env.RegisterActivity(a)
	for _, tc := range []struct {
		name string
		held time.Duration
	}{
		{"nothing held", 0},
		{"held until after the first poll", 400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := WaitParams{
				BrokerParams: BrokerParams{Store: StoreRef{URL: "file://" + dir}, Stream: "s"},
				After:        full, PollInterval: dur.Duration(10 * time.Second), MaxWait: dur.Duration(5 * time.Second),
			}
			if tc.held > 0 {
				p.HeldUntil = time.Now().Add(tc.held)
			}
			v, err := env.ExecuteActivity(a.WaitForLinks, p)
			if err != nil {
				t.Fatal(err)
			}
			var res WaitResult
			if err := v.Get(&res); err != nil {
				t.Fatal(err)
			}
			if len(res.Pending) != 1 || res.Pending[0].ID != inc.ID || res.Pending[0].ExpectedLast != full {
				t.Fatalf("the wait returned %+v (held %d); want incremental %s after %s", res.Pending, res.Held, inc.ID, full)
			}
			if !p.HeldUntil.IsZero() && time.Now().Before(p.HeldUntil) {
				t.Fatalf("the wait handed the link over before it came due at %s", p.HeldUntil.Format(time.RFC3339Nano))
			}
		})
	}
}
