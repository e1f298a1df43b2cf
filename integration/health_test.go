package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The worker's /status and /metrics show each run it hosts with its verdict:
// a broker that just applied an incremental is healthy, its poll loop turning.
func TestWorkerReportsRunHealth(t *testing.T) {
	// A producer streaming on the fixture's chain reports the chain slot (a
	// one-shot `backup incremental` leaves the worker's runs when it ends).
	src, chainURL, fullID, incID := brokerFixture(t)
	mustSluice(t, "backup", "stream", "run", "--source", testenv.DSN(src), "--target", chainURL, "--rollover-window", "1s", "--detach")
	defer func() {
		mustSluice(t, "backup", "stream", "stop", "--target", chainURL)
		waitWorkflowEnd(t, "producer/"+chainURL, time.Minute)
	}()
	dst := testenv.CreateDB(t, "dst")
	mustSluice(t, "restore", "--backup-target", chainURL, "--target", testenv.DSN(dst), "--through", fullID)
	stream := fmt.Sprintf("health-%d", time.Now().UnixNano()%1e6)
	if r := sluice(t, "sync", "from-backup", "run", "--backup-target", chainURL, "--target", testenv.DSN(dst),
		"--stream-id", stream, "--at-chain-id", fullID, "--poll-interval", "300ms", "--detach"); r.exit != 0 {
		t.Fatal(r)
	}
	defer stopBroker(t, chainURL, stream)
	waitBrokerAt(t, stream, incID, time.Minute)

	// The broker's lag is measured when it polls, so read until it has
	// polled since it reached incID: healthy, changes counted, nothing
	// behind, and /metrics saying the same of the same run.
	var found *health.Status
	var missing []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
		found, missing = brokerAndMetrics(t, stream, chainURL)
		if found != nil && found.Verdict == health.Healthy && found.Changes > 0 && found.LinksBehind == 0 && len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			if found == nil {
				t.Fatalf("/status does not list broker %s", stream)
			}
			t.Fatalf("want a healthy broker with its changes counted and nothing behind, and /metrics saying so; got %+v, /metrics lacks %q", *found, missing)
		}
	}
	if found.PollAgeSeconds > 60 || found.DeliveryAgeSecs <= 0 {
		t.Fatalf("want a recent poll and a delivery, got %+v", *found)
	}
}

// brokerAndMetrics reads the worker's /status entry for the broker stream and
// names the lines /metrics lacks for it and for the producer on chainURL.
func brokerAndMetrics(t *testing.T, stream, chainURL string) (*health.Status, []string) {
	t.Helper()
	var st struct {
		Runs []health.Status `json:"runs"`
	}
	if err := json.Unmarshal([]byte(adminGet(t, "/status")), &st); err != nil {
		t.Fatal(err)
	}
	var found *health.Status
	for i := range st.Runs {
		if st.Runs[i].Role == "broker" && st.Runs[i].Name == stream {
			found = &st.Runs[i]
		}
	}
	if found == nil {
		return nil, nil
	}
	metrics := adminGet(t, "/metrics")
	var missing []string
	for _, want := range []string{
		fmt.Sprintf(`sluice_run_health{name="%s",role="broker",verdict="healthy"} 1`, stream),
		fmt.Sprintf(`sluice_run_changes_total{name="%s",role="broker"} %d`, stream, found.Changes),
		fmt.Sprintf(`sluice_broker_links_behind{name="%s",role="broker"} 0`, stream),
		// The producer reports its slot when its first window ends.
		fmt.Sprintf(`sluice_slot_wal_status{name="%s",role="producer",status="reserved"} 1`, chainURL),
		fmt.Sprintf(`sluice_slot_retained_bytes{name="%s",role="producer"}`, chainURL),
	} {
		if !strings.Contains(metrics, want) {
			missing = append(missing, want)
		}
	}
	return found, missing
}
