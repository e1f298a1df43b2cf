package apply

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chain/chaintest"
	"github.com/sluicehq/sluice/internal/target"
)

// nopLanes is a fake target whose lanes apply nothing, so a benchmark
// measures the dispatcher alone: reading chunks, skipping, routing,
// copying changes to lanes.
type nopLanes struct{ *fakeTarget }

type nopLane struct{}

func (nopLanes) OpenLane(context.Context, target.LaneConfig) (target.Lane, error) {
	return nopLane{}, nil
}
func (nopLane) Apply(context.Context, *chain.Change) error  { return nil }
func (nopLane) Track(*chain.Change)                         {}
func (nopLane) Commit(context.Context, target.Commit) error { return nil }
func (nopLane) Close(context.Context) error                 { return nil }

// BenchmarkDispatch reports the dispatcher's own cost per change with 1
// and 4 lanes (go test -bench Dispatch ./internal/apply/).
func BenchmarkDispatch(b *testing.B) {
	recs := txns(200, 1000, 50_000)
	ch, m := chaintest.WriteIncremental(b, recs, 20000)
	for _, lanes := range []int{1, 4} {
		b.Run(map[int]string{1: "lanes=1", 4: "lanes=4"}[lanes], func(b *testing.B) {
			for range b.N {
				f := newFakeTarget()
				row, err := Row(Token{Engine: EngineBroker, Stream: "s", ChainID: "c", LastApplied: "full-1", Owner: "run-1"})
				if err != nil {
					b.Fatal(err)
				}
				f.state["s"] = row
				if _, err := ApplyIncremental(context.Background(), ch, m, testSchema(), nopLanes{f}, opts("run-1", lanes)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(200_000*b.N), "ns/change")
		})
	}
}
