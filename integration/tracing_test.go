package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/testenv"
)

// receivedSpan is one span an OTLP request carried, with its service.
type receivedSpan struct {
	service, name     string
	trace, id, parent string
	attrs             map[string]string
}

// otlpReceiver is an in-process OTLP/HTTP collector: it accepts POST
// /v1/traces with a protobuf body, gzip or not, and keeps what it got.
type otlpReceiver struct {
	url string
	mu  sync.Mutex
	raw [][]byte
	got []receivedSpan
	bad []string
	// gzipped counts the requests sent compressed.
	gzipped int
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &otlpReceiver{url: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(rc.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return rc
}

func (rc *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		rc.fail(w, http.StatusNotFound, "%s %s", r.Method, r.URL.Path)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			rc.fail(w, http.StatusBadRequest, "gzip: %v", err)
			return
		}
		defer zr.Close()
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		rc.fail(w, http.StatusBadRequest, "read: %v", err)
		return
	}
	var req collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		rc.fail(w, http.StatusBadRequest, "decode (%s): %v", r.Header.Get("Content-Type"), err)
		return
	}
	var spans []receivedSpan
	for _, rs := range req.GetResourceSpans() {
		service := attrMap(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				spans = append(spans, receivedSpan{
					service: service, name: sp.GetName(),
					trace: hex.EncodeToString(sp.GetTraceId()), id: hex.EncodeToString(sp.GetSpanId()),
					parent: hex.EncodeToString(sp.GetParentSpanId()), attrs: attrMap(sp.GetAttributes()),
				})
			}
		}
	}
	rc.mu.Lock()
	if r.Header.Get("Content-Encoding") == "gzip" {
		rc.gzipped++
	}
	rc.raw = append(rc.raw, data)
	rc.got = append(rc.got, spans...)
	rc.mu.Unlock()
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (rc *otlpReceiver) fail(w http.ResponseWriter, status int, format string, args ...any) {
	rc.mu.Lock()
	rc.bad = append(rc.bad, fmt.Sprintf(format, args...))
	rc.mu.Unlock()
	http.Error(w, "refused", status)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	return m
}

// spans returns a copy of the spans received so far.
func (rc *otlpReceiver) spans() []receivedSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedSpan(nil), rc.got...)
}

// TestTracingSpansReachCollector runs a backup and a restore through a
// worker and a CLI that both export to an in-process OTLP/HTTP receiver, and
// checks that the spans of the workflows and their activities arrive in one
// trace per command, rooted at the CLI's StartWorkflow span, with no
// password in them.
func TestTracingSpansReachCollector(t *testing.T) {
	rc := startOTLPReceiver(t)
	// The worker takes the collector from the environment (the base-URL
	// form, to which /v1/traces is appended) and compresses, as the
	// exporter's own variable asks; the CLI takes it from its flag.
	w := ownWorker(t, "tracing", "OTEL_EXPORTER_OTLP_ENDPOINT="+rc.url, "OTEL_EXPORTER_OTLP_COMPRESSION=gzip")
	queue, wlog := w.queue, w.log
	if !strings.Contains(wlog.String(), "exporting trace spans") {
		t.Errorf("the worker does not say it exports spans:\n%s", wlog)
	}

	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, passwordRole()+`
		CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT i, 'v' || i FROM generate_series(1, 500) i;
		GRANT SELECT ON a TO sluice_pw_user;`)
	t.Cleanup(func() { testenv.Exec(t, src, `DROP OWNED BY sluice_pw_user`) })
	dsn := asPasswordUser(testenv.DSN(src))
	dst := testenv.CreateDB(t, "dst")
	chainURL := fileChain(t)

	common := []string{"--task-queue", queue, "--otlp-endpoint", rc.url}
	mustSluice(t, append([]string{"backup", "full", "--source", dsn, "--source-password-env", sourcePasswordEnv, "--target", chainURL}, common...)...)
	mustSluice(t, append([]string{"restore", "--backup-target", chainURL, "--target", testenv.DSN(dst)}, common...)...)
	// The worker sends what it still buffers when it stops.
	w.stop()
	if !strings.Contains(wlog.String(), "sluice worker stopped") {
		t.Errorf("the worker did not stop cleanly:\n%s", tail(wlog.String(), 2048))
	}

	// service -> names wanted, per command.
	want := map[string][]string{
		"sluice": {"StartWorkflow:FullBackupWorkflow", "StartWorkflow:RestoreWorkflow"},
		"sluice-worker": {
			"RunWorkflow:FullBackupWorkflow", "StartActivity:FullBackup", "RunActivity:FullBackup",
			"RunWorkflow:RestoreWorkflow", "RunActivity:PlanRestore", "RunActivity:PrepareTarget",
			"RunActivity:LoadTable", "RunActivity:FinishTarget",
		},
	}
	var spans []receivedSpan
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans = rc.spans()
		if missing := missingSpans(spans, want); len(missing) == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("spans missing: %v\nreceived: %v\nrefused requests: %v\nworker log:\n%s",
				missing, spanNames(spans), rc.bad, tail(wlog.String(), 4096))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("span names: %v", spanNames(spans))

	// Each command is one trace rooted at the CLI's StartWorkflow span.
	byName := map[string]receivedSpan{}
	byID := map[string]receivedSpan{}
	for _, s := range spans {
		byName[s.name] = s
		byID[s.id] = s
	}
	for wf, children := range map[string][]string{
		"FullBackupWorkflow": {"RunWorkflow:FullBackupWorkflow", "StartActivity:FullBackup", "RunActivity:FullBackup"},
		"RestoreWorkflow":    {"RunWorkflow:RestoreWorkflow", "RunActivity:PlanRestore", "RunActivity:LoadTable", "RunActivity:FinishTarget"},
	} {
		root := byName["StartWorkflow:"+wf]
		if root.parent != "" {
			t.Errorf("StartWorkflow:%s has a parent %s; the CLI's span should be the root", wf, root.parent)
		}
		if run := byName["RunWorkflow:"+wf]; run.parent != root.id {
			t.Errorf("RunWorkflow:%s's parent is %s, want the CLI's StartWorkflow span %s", wf, run.parent, root.id)
		}
		for _, name := range children {
			if s := byName[name]; s.trace != root.trace {
				t.Errorf("%s is in trace %s, not in the CLI's trace %s", name, s.trace, root.trace)
			}
		}
	}
	// A RunActivity span descends from its StartActivity span.
	if run, start := byName["RunActivity:FullBackup"], byName["StartActivity:FullBackup"]; run.parent != start.id {
		t.Errorf("RunActivity:FullBackup's parent is %s (%s), want StartActivity:FullBackup %s", run.parent, byID[run.parent].name, start.id)
	}
	if got := byName["RunWorkflow:FullBackupWorkflow"].attrs["temporalWorkflowID"]; got != "backup-full/"+chainURL {
		t.Errorf("RunWorkflow:FullBackupWorkflow temporalWorkflowID = %q", got)
	}

	// The worker resolved the source password to connect; no span, attribute
	// or resource carries it.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, raw := range rc.raw {
		if bytes.Contains(raw, []byte(sourcePassword)) {
			t.Fatal("an exported span batch contains the source password")
		}
	}
	if len(rc.bad) > 0 {
		t.Errorf("the receiver refused requests: %v", rc.bad)
	}
	if rc.gzipped == 0 || rc.gzipped == len(rc.raw) {
		t.Errorf("%d of %d requests gzipped; want the worker's (OTEL_EXPORTER_OTLP_COMPRESSION=gzip) and not the CLI's", rc.gzipped, len(rc.raw))
	}
	if strings.Contains(wlog.String(), "trace export failed") {
		t.Errorf("the worker reports export failures:\n%s", tail(wlog.String(), 4096))
	}
}

func missingSpans(spans []receivedSpan, want map[string][]string) []string {
	have := map[string]bool{}
	for _, s := range spans {
		have[s.service+" "+s.name] = true
	}
	var missing []string
	for service, names := range want {
		for _, n := range names {
			if !have[service+" "+n] {
				missing = append(missing, service+" "+n)
			}
		}
	}
	sort.Strings(missing)
	return missing
}

func spanNames(spans []receivedSpan) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range spans {
		k := s.service + " " + s.name
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
