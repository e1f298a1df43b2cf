package telemetry

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/testenv"
)

// exported returns every sluice series a worker's /metrics shows once each
// instrument has a value: a scrape of a Telemetry whose tracker holds a run
// in every verdict and whose traffic instruments were used. Names come from
// the scrape itself, so a rule can only name what the code really emits.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	tel, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(t.Context()) })
	now := time.Now()
	tr := health.NewTracker(nil, func() time.Time { return now })
	if err := tel.TrackRuns(tr); err != nil {
		t.Fatal(err)
	}
	stalled := health.Key{Role: "broker", Name: "b"}
	tr.Delivered(stalled)
	tr.Behind(stalled, 2, 30)
	tr.Counted(stalled, 10)
	tr.Failed(stalled, health.CauseTargetRefusing, "x")
	producer := health.Key{Role: "producer", Name: "file:///c"}
	tr.Polled(producer, false)
	tr.Slot(producer, 1024, "reserved")
	tr.Refused("SLUICE-E-SOURCE-LOG-LOST")
	tel.Wrote("data/a/t.zst", 1)
	tel.Fetched("data/a/t.zst", 1, time.Millisecond)
	tel.ApplyBatch("b", time.Millisecond)
	tel.RowsRestored(1)
	tel.AdminRequest("/metrics", 200)
	tel.ObserveAdminClients(func() int { return 1 })
	out := map[string]bool{}
	for _, line := range strings.Split(scrape(t, tel), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			fields := strings.Fields(name)
			if strings.HasPrefix(fields[0], "sluice_") {
				out[fields[0]] = true
				if len(fields) > 1 && fields[1] == "histogram" {
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						out[fields[0]+suffix] = true
					}
				}
			}
		}
	}
	return out
}

var seriesName = regexp.MustCompile(`\b((?:sluice|temporal)_[a-z0-9_]+)\b`)

// referenced returns the sluice_* and temporal_* names an expression uses.
func referenced(expr string) []string {
	var out []string
	for _, m := range seriesName.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	return out
}

func checkExpr(t *testing.T, emitted map[string]bool, where, expr string) int {
	t.Helper()
	names := referenced(expr)
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, TemporalPrefix):
			// The Temporal SDK's own series; a typo here is caught by the
			// list of names the SDK documents, checked below for the ones used.
			if !knownTemporal[n] {
				t.Errorf("%s uses %s, which is not a Temporal SDK series the worker exports", where, n)
			}
		case !emitted[n]:
			t.Errorf("%s uses %s, which the worker does not export", where, n)
		}
	}
	return len(names)
}

// knownTemporal lists the Temporal SDK series the rules and dashboard use.
var knownTemporal = map[string]bool{
	"temporal_request_failure_total": true,
}

func TestDeployRulesAndDashboard(t *testing.T) {
	emitted := exported(t)
	for _, name := range []string{MetricRunHealth, MetricRunStallCause, MetricStoreFetch, MetricRefusals, MetricSlotWalStatus} {
		if !emitted[name] {
			t.Fatalf("the scrape lacks %s: the list of exported series is incomplete", name)
		}
	}
	raw, err := os.ReadFile("../../deploy/prometheus/sluice-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alert rules do not parse: %v", err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("group %s has a rule without alert or expr", g.Name)
			}
			n += checkExpr(t, emitted, "alert "+r.Alert, r.Expr)
		}
	}
	if n == 0 {
		t.Fatal("the alert rules reference no series")
	}

	raw, err = os.ReadFile("../../deploy/grafana/sluice-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query string `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard does not parse: %v", err)
	}
	n = 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			n += checkExpr(t, emitted, "panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		n += checkExpr(t, emitted, "variable", v.Query)
	}
	if n == 0 {
		t.Fatal("the dashboard references no series")
	}
}

// The rules and every dashboard query go through promtool, Prometheus's own
// checker, so a PromQL syntax error fails here and not in production. The
// dashboard's queries are checked as recording rules of a scratch file.
func TestDeployPromQLChecks(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testenv.Missing(t, "promtool is not on PATH (deploy/dev/services.sh unpacks it into ~/.cache/sluice/bin)")
	}
	check := func(file string) {
		t.Helper()
		out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
		if err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", file, err, out)
		}
	}
	check("../../deploy/prometheus/sluice-alerts.yml")

	raw, err := os.ReadFile("../../deploy/grafana/sluice-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", len(rules)), Expr: tg.Expr})
		}
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	check(file)
}
