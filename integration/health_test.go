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
		t.Fatalf("/status does not list broker %s: %+v", stream, st.Runs)
	}
	if found.Verdict != health.Healthy || found.PollAgeSeconds > 60 || found.DeliveryAgeSecs <= 0 {
		t.Fatalf("want a healthy broker with a recent poll and delivery, got %+v", *found)
	}
	if found.Changes == 0 || found.LinksBehind != 0 {
		t.Fatalf("want the applied changes counted and nothing behind, got %+v", *found)
	}
	var metrics string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		// The producer reports its slot when its first window ends.
		if metrics = adminGet(t, "/metrics"); strings.Contains(metrics, `sluice_slot_wal_status{name="`+chainURL) {
			break
		}
	}
	for _, want := range []string{
		fmt.Sprintf(`sluice_run_health{name="%s",role="broker",verdict="healthy"} 1`, stream),
		fmt.Sprintf(`sluice_run_changes_total{name="%s",role="broker"} %d`, stream, found.Changes),
		fmt.Sprintf(`sluice_broker_links_behind{name="%s",role="broker"} 0`, stream),
		fmt.Sprintf(`sluice_slot_wal_status{name="%s",role="producer",status="reserved"} 1`, chainURL),
		fmt.Sprintf(`sluice_slot_retained_bytes{name="%s",role="producer"}`, chainURL),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
