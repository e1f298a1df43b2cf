package activities

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/retention"
)

// heldStore is a store the network stopped reaching: every call blocks
// until released, then fails.
type heldStore struct {
	blobstore.Store
	blocked  chan struct{} // closed by the first call that blocks
	release  chan struct{}
	blockOne sync.Once
}

func (s *heldStore) wait(ctx context.Context) error {
	s.blockOne.Do(func() { close(s.blocked) })
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return errors.New("the store did not answer")
}

func (s *heldStore) Put(ctx context.Context, _ string, _ []byte) error { return s.wait(ctx) }

func (s *heldStore) PutIfAbsent(ctx context.Context, _ string, _ []byte) error { return s.wait(ctx) }

func (s *heldStore) Get(ctx context.Context, _ string) (io.ReadCloser, error) {
	return nil, s.wait(ctx)
}

func (s *heldStore) List(ctx context.Context, _ string) ([]blobstore.ObjectInfo, error) {
	return nil, s.wait(ctx)
}

func (s *heldStore) Delete(ctx context.Context, _ string) error { return s.wait(ctx) }

// Whatever activity of a run is blocked on a store that stopped answering,
// the worker still runs it: past the not-running threshold the run reads
// stalled, never not_running. (In CI a broker blocked inside its
// severed-transaction check read not_running, as if no worker ran it.)
func TestARunBlockedOnTheStoreInAnyActivityIsNotReadAsNotRunning(t *testing.T) {
	dir := t.TempDir()
	base, err := blobstore.Open(context.Background(), "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := chaintest.NewBuilder(t, chain.Open(base), time.Now().Add(-time.Hour))
	full := b.Cat.Tip().ID
	inc := b.Incremental(b.Txn(chaintest.Insert(1, "one")))
	store := StoreRef{URL: "file://" + dir}
	bp := BrokerParams{Store: store, Stream: "s",
		Target: credentials.DSNRef{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "target.db")}}
	link := PendingLink{ID: inc.ID, ExpectedLast: full}

	for _, tc := range []struct {
		name string
		key  health.Key
		run  func(a *Activities, env *testsuite.TestActivityEnvironment) error
	}{
		{"wait for links", brokerKey("s"), func(a *Activities, env *testsuite.TestActivityEnvironment) error {
			_, err := env.ExecuteActivity(a.WaitForLinks, WaitParams{BrokerParams: bp, After: inc.ID,
				PollInterval: dur.Duration(time.Second), MaxWait: dur.Duration(time.Minute)})
			return err
		}},
		{"severed-transaction check", brokerKey("s"), func(a *Activities, env *testsuite.TestActivityEnvironment) error {
			_, err := env.ExecuteActivity(a.CheckChainForBroker, CheckChainParams{BrokerParams: bp, After: full})
			return err
		}},
		{"judge an incremental", brokerKey("s"), func(a *Activities, env *testsuite.TestActivityEnvironment) error {
			_, err := env.ExecuteActivity(a.JudgeBrokerIncremental, BrokerApplyParams{BrokerParams: bp, Link: link})
			return err
		}},
		{"find the point in an incremental", brokerKey("s"), func(a *Activities, env *testsuite.TestActivityEnvironment) error {
			_, err := env.ExecuteActivity(a.PlanBrokerCut, BrokerCutParams{BrokerParams: bp, Link: link,
				Point: BrokerPoint{ApplyDelay: dur.Duration(time.Minute)}})
			return err
		}},
		{"apply an incremental", brokerKey("s"), func(a *Activities, env *testsuite.TestActivityEnvironment) error {
			_, err := env.ExecuteActivity(a.ApplyBrokerIncremental, BrokerApplyParams{BrokerParams: bp, Link: link, Concurrency: 1})
			return err
		}},
		{"prune after a rotation", producerKey(store), func(a *Activities, env *testsuite.TestActivityEnvironment) error {
			_, err := env.ExecuteActivity(a.PruneChain, PruneParams{Store: store, Policy: retention.Policy{KeepSegments: 1}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(time.Now().UnixNano())
			tr := health.NewTracker(nil, func() time.Time { return time.Unix(0, clock.Load()) })
			tr.Polled(tc.key, false) // the run polled before: the worker knows it
			held := &heldStore{Store: base, blocked: make(chan struct{}), release: make(chan struct{})}
			a := &Activities{Health: tr, OpenStore: func(context.Context, StoreRef) (blobstore.Store, error) { return held, nil }}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			env.RegisterActivity(a)
			done := make(chan error, 1)
			go func() { done <- tc.run(a, env) }()
			select {
			case <-held.blocked:
			case err := <-done:
				t.Fatalf("the activity ended without reading the store: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the activity never reached the store")
			}
			clock.Add(int64(health.DefaultNotRunning + time.Minute))
			verdict := ""
			for _, s := range tr.Statuses() {
				if s.Key == tc.key {
					verdict = s.Verdict
				}
			}
			close(held.release)
			<-done
			if verdict == health.NotRunning || verdict == "" {
				t.Fatalf("blocked on the store past the not-running threshold, the %s run read %q; want it stalled (its worker still runs it)", tc.key.Role, verdict)
			}
		})
	}
}
