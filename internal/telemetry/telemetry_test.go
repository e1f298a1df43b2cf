package telemetry

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, tel *Telemetry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics answered %d", rec.Code)
	}
	b, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSeriesExposed(t *testing.T) {
	tel, err := New(Options{Version: "v9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(t.Context()) })

	tel.AdminRequest("/livez", 200)
	tel.AdminRequest("/metrics", 401)
	tel.AdminRequest("/metrics", 401)
	tel.ObserveAdminClients(func() int { return 3 })

	// What the SDK does with its handler: tagged counters, gauges and timers.
	h := tel.TemporalMetricsHandler().WithTags(map[string]string{"namespace": "default", "operation": "PollWorkflowTaskQueue"})
	h.Counter("temporal_request").Inc(2)
	h.Gauge("temporal_num_pollers").Update(4)
	h.Timer("temporal_request_latency").Record(30 * time.Millisecond)

	out := scrape(t, tel)
	for _, want := range []string{
		`sluice_worker_info{go_version="`,
		`version="v9.9.9"} 1`,
		`sluice_admin_requests_total{code="200",path="/livez"} 1`,
		`sluice_admin_requests_total{code="401",path="/metrics"} 2`,
		MetricAdminRateLimitClients + " 3",
		`# TYPE temporal_request_total counter`,
		`temporal_request_total{namespace="default",operation="PollWorkflowTaskQueue"} 2`,
		`temporal_num_pollers{namespace="default",operation="PollWorkflowTaskQueue"} 4`,
		`temporal_request_latency_seconds_bucket{namespace="default",operation="PollWorkflowTaskQueue",le="0.05"} 1`,
		`temporal_request_latency_seconds_bucket{namespace="default",operation="PollWorkflowTaskQueue",le="0.025"} 0`,
		"go_goroutines ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, name := range []string{MetricWorkerInfo, MetricAdminRequests, MetricAdminRateLimitClients} {
		if !strings.Contains(out, "# TYPE "+name+" ") {
			t.Errorf("documented metric %s is not exposed", name)
		}
	}
	if strings.Contains(out, "otel_scope_") || strings.Contains(out, "target_info") {
		t.Errorf("scope labels or target_info leaked into the exposition")
	}
	if t.Failed() {
		t.Log(out)
	}
}

func TestVersion(t *testing.T) {
	if Version() == "" {
		t.Fatal("Version is empty")
	}
}

func TestTrafficSeries(t *testing.T) {
	tel, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(t.Context()) })
	tel.Wrote("data/attempt-1/t.0001.zst", 4096)
	tel.Wrote("catalog/gen-00000000000000000002.json", 100)
	tel.Fetched("data/attempt-1/t.0001.zst", 4096, 30*time.Millisecond)
	tel.Fetched("data/attempt-1/t.0002.zst", 1024, 3*time.Second)
	tel.ApplyBatch("orders", 200*time.Millisecond)
	tel.RowsRestored(1234)

	out := scrape(t, tel)
	for _, want := range []string{
		MetricStoreWritten + `{kind="chunk"} 4096`,
		MetricStoreWritten + `{kind="metadata"} 100`,
		MetricStoreRead + `{kind="chunk"} 5120`,
		MetricStoreFetch + `_bucket{kind="chunk",le="0.05"} 1`,
		MetricStoreFetch + `_bucket{kind="chunk",le="5"} 2`,
		MetricStoreFetch + `_count{kind="chunk"} 2`,
		MetricApplyBatch + `_bucket{name="orders",role="broker",le="0.25"} 1`,
		MetricRestoreRows + " 1234",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("scraped:\n%s", out)
	}
}
