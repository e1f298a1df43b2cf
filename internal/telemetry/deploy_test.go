package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// emitted is every sluice series the worker exports, as Prometheus sees them.
var emitted = map[string]bool{
	MetricWorkerInfo:            true,
	MetricAdminRequests:         true,
	MetricAdminRateLimitClients: true,
	MetricRunHealth:             true,
	MetricRunStallCause:         true,
	MetricRunPollAge:            true,
	MetricRunDeliveryAge:        true,
	MetricRunChanges:            true,
	MetricBrokerLinksBehind:     true,
	MetricBrokerSecondsBehind:   true,
	MetricSlotRetained:          true,
	MetricSlotWalStatus:         true,
	MetricRefusals:              true,
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

func checkExpr(t *testing.T, where, expr string) int {
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
			n += checkExpr(t, "alert "+r.Alert, r.Expr)
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
			n += checkExpr(t, "panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		n += checkExpr(t, "variable", v.Query)
	}
	if n == 0 {
		t.Fatal("the dashboard references no series")
	}
}
