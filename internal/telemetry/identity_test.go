package telemetry

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/health"
)

// A producer's count of published tables without a usable replica identity
// follows its capture's latest check, and reads 0 before any.
func TestTablesWithoutReplicaIdentitySeries(t *testing.T) {
	tel, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(t.Context()) })
	tr := health.NewTracker(nil, nil)
	if err := tel.TrackRuns(tr); err != nil {
		t.Fatal(err)
	}
	k := health.Key{Role: "producer", Name: "file:///c"}
	series := func(n string) string {
		return MetricTablesWithoutIdentity + `{name="file:///c",role="producer"} ` + n
	}
	tr.Polled(k, false)
	if out := scrape(t, tel); !strings.Contains(out, series("0")) {
		t.Fatalf("/metrics lacks %s:\n%s", series("0"), out)
	}
	tr.ReplicaIdentityGaps(k, []string{"public.a", "public.b"})
	if out := scrape(t, tel); !strings.Contains(out, series("2")) {
		t.Fatalf("/metrics lacks %s:\n%s", series("2"), out)
	}
	tr.ReplicaIdentityGaps(k, nil)
	if out := scrape(t, tel); !strings.Contains(out, series("0")) {
		t.Fatalf("after the fix /metrics lacks %s:\n%s", series("0"), out)
	}
}
