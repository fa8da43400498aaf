package chart

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The alerts the chart ships, with their severity and how long each must
// hold.
var wantAlerts = map[string]struct{ severity, hold string }{
	"ScwLbIpamPoolNearlyFull":       {"warning", "10m"},
	"ScwLbIpamServicesUnreserved":   {"critical", "10m"},
	"ScwLbIpamServicesNotConverged": {"critical", "10m"},
	"ScwLbIpamNoSweeperLeader":      {"warning", "5m"},
	"ScwLbIpamScalewayErrors":       {"warning", "10m"},
	"ScwLbIpamScalewayKeyRefused":   {"critical", "2m"},
	"ScwLbIpamPoolFileMismatch":     {"warning", "10m"},
	"ScwLbIpamReservationsStranded": {"warning", "30m"},
}

// promQL is Prometheus's own expression parser, as its rule loader runs it.
var promQL = parser.NewParser(parser.Options{})

// parseRules parses a rendered PrometheusRule's spec with Prometheus's rule
// loader, unknown fields refused: what Prometheus would load from it.
func parseRules(t *testing.T, rule *unstructured.Unstructured) *rulefmt.RuleGroups {
	t.Helper()
	spec, err := yaml.Marshal(rule.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.LegacyValidation, promQL, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("Prometheus refuses the rules: %v\n%s", errs, spec)
	}
	return groups
}

func TestRenderMonitoringOnlyWhenEnabled(t *testing.T) {
	objs := render(t, []string{"ci/self-managed-values.yaml"})
	if n := len(find(objs, "PrometheusRule")); n != 0 {
		t.Errorf("%d PrometheusRules rendered by default", n)
	}
	for _, cm := range find(objs, "ConfigMap") {
		if _, ok := cm.GetLabels()["grafana_dashboard"]; ok {
			t.Errorf("dashboard ConfigMap %s rendered by default", cm.GetName())
		}
	}
}

// TestPrometheusRuleParses: Prometheus's rule parser loads the rendered
// rules; every alert of the list is there with its severity, hold time and a
// runbook_url into its own section of docs/alerts.md; every selector stays
// within the release namespace.
func TestPrometheusRuleParses(t *testing.T) {
	objs := render(t, []string{"ci/self-managed-values.yaml"}, "prometheusRule.enabled=true",
		"prometheusRule.alertLabels.team=platform", "prometheusRule.labels.release=prometheus")
	rule := one(t, objs, "PrometheusRule")
	if rule.GetNamespace() != namespace || rule.GetName() != release || rule.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule %s/%s labels %v", rule.GetNamespace(), rule.GetName(), rule.GetLabels())
	}
	headings := alertsHeadings(t)
	seen := map[string]bool{}
	for _, g := range parseRules(t, rule).Groups {
		for _, r := range g.Rules {
			want, ok := wantAlerts[r.Alert]
			if !ok {
				t.Errorf("unexpected rule %q %q", r.Alert, r.Record)
				continue
			}
			seen[r.Alert] = true
			if r.Labels["severity"] != want.severity || r.Labels["team"] != "platform" || r.For.String() != want.hold {
				t.Errorf("%s: labels %v for %s, want severity %s, team platform, for %s", r.Alert, r.Labels, r.For, want.severity, want.hold)
			}
			anchor := strings.ToLower(r.Alert)
			if url := r.Annotations["runbook_url"]; url != "https://github.com/scw-lb-ipam/scw-lb-ipam/blob/main/docs/alerts.md#"+anchor {
				t.Errorf("%s: runbook_url %q", r.Alert, url)
			}
			if !headings[anchor] {
				t.Errorf("%s: docs/alerts.md has no section ## %s for its runbook_url", r.Alert, r.Alert)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: annotations %v", r.Alert, r.Annotations)
			}
			expr, err := promQL.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			for _, sel := range parser.ExtractSelectors(expr) {
				if !slices.ContainsFunc(sel, func(m *labels.Matcher) bool {
					return m.Name == "namespace" && m.Type == labels.MatchEqual && m.Value == namespace
				}) {
					t.Errorf("%s: selector %v reads other namespaces than the release's", r.Alert, sel)
				}
			}
		}
	}
	for name := range wantAlerts {
		if !seen[name] {
			t.Errorf("alert %s missing", name)
		}
	}
	// Every runbook section of docs/alerts.md belongs to an alert.
	for h := range headings {
		if strings.HasPrefix(h, "scwlbipam") && !slices.ContainsFunc(sortedKeys(wantAlerts), func(a string) bool { return strings.ToLower(a) == h }) {
			t.Errorf("docs/alerts.md section %q is the runbook of no alert", h)
		}
	}

	// A runbook base of one's own replaces docs/alerts.md.
	own := one(t, render(t, []string{"ci/self-managed-values.yaml"}, "prometheusRule.enabled=true",
		"prometheusRule.runbookBaseURL=https://wiki.example.com/runbooks/scw-lb-ipam"), "PrometheusRule")
	for _, g := range parseRules(t, own).Groups {
		for _, r := range g.Rules {
			if want := "https://wiki.example.com/runbooks/scw-lb-ipam#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
		}
	}
	// severity is the chart's per alert: alertLabels may not set it (a
	// duplicate key), and a runbook base carries no fragment.
	for set, want := range map[string]string{
		"prometheusRule.alertLabels.severity=page":                    "each alert sets its own severity",
		"prometheusRule.runbookBaseURL=https://wiki.example.com/rb#x": "runbookBaseURL",
	} {
		if out, err := renderRaw(t, []string{"ci/self-managed-values.yaml"}, "prometheusRule.enabled=true", set); err == nil || !strings.Contains(out, want) {
			t.Errorf("--set %s: %v, want a refusal saying %q:\n%.300s", set, err, want, out)
		}
	}
}

// dashboardJSON is what the tests read of a Grafana dashboard.
type dashboardJSON struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// grafanaVars stands in for the dashboard's variables, which Grafana
// substitutes before a query reaches Prometheus.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$namespace", "scw-lb-ipam")

// renderDashboard renders the dashboard ConfigMap and decodes its JSON.
func renderDashboard(t *testing.T, sets ...string) (*unstructured.Unstructured, dashboardJSON) {
	t.Helper()
	objs := render(t, []string{"ci/self-managed-values.yaml"}, append([]string{"grafanaDashboard.enabled=true"}, sets...)...)
	cm := named(t, objs, "ConfigMap", release+"-dashboard")
	data, _ := field(t, cm, "data").(map[string]any)
	raw, _ := data["scw-lb-ipam.json"].(string)
	var d dashboardJSON
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v\n%.500s", err, raw)
	}
	if dec.More() {
		t.Fatal("the dashboard has more than one JSON value")
	}
	return cm, d
}

// TestGrafanaDashboard: the ConfigMap carries the sidecar's label and a
// valid dashboard whose panels cover what docs/alerts.md promises, each query
// a PromQL expression on the selected namespace.
func TestGrafanaDashboard(t *testing.T) {
	cm, d := renderDashboard(t)
	if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetNamespace() != namespace {
		t.Errorf("ConfigMap %s/%s labels %v", cm.GetNamespace(), cm.GetName(), cm.GetLabels())
	}
	if d.UID != "scw-lb-ipam" || d.Title != "scw-lb-ipam" {
		t.Errorf("uid %q title %q", d.UID, d.Title)
	}
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			q := grafanaVars.Replace(tg.Expr)
			if strings.Contains(q, "$") {
				t.Errorf("panel %q: %q uses a variable the dashboard does not define", p.Title, tg.Expr)
			}
			expr, err := promQL.ParseExpr(q)
			if err != nil {
				t.Errorf("panel %q: %q: %v", p.Title, tg.Expr, err)
				continue
			}
			for _, sel := range parser.ExtractSelectors(expr) {
				if !slices.ContainsFunc(sel, func(m *labels.Matcher) bool { return m.Name == "namespace" && m.Value == namespace }) {
					t.Errorf("panel %q: selector %v ignores the namespace variable", p.Title, sel)
				}
			}
		}
	}
	for _, want := range []string{"Pool occupancy", "Admissions by result", "Scaleway latency", "Scaleway error ratio", "Convergence"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q among %q", want, titles)
		}
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["namespace"] != "query" {
		t.Errorf("variables %v, want datasource and namespace", vars)
	}

	// The sidecar's namespace, labels and folder annotation.
	cm, _ = renderDashboard(t, "grafanaDashboard.namespace=monitoring", "grafanaDashboard.labels.team=platform",
		"grafanaDashboard.labels.grafana_dashboard=scw", "grafanaDashboard.annotations.grafana_folder=Networking")
	if cm.GetNamespace() != "monitoring" || cm.GetLabels()["team"] != "platform" || cm.GetLabels()["grafana_dashboard"] != "scw" ||
		cm.GetAnnotations()["grafana_folder"] != "Networking" {
		t.Errorf("ConfigMap %s/%s labels %v annotations %v", cm.GetNamespace(), cm.GetName(), cm.GetLabels(), cm.GetAnnotations())
	}
}

// labelValuesMetric finds the metric of a Grafana label_values(metric, label) query.
var labelValuesMetric = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)

// monitoredMetrics lists the series names the alerts and the dashboard
// read, each with where it is read.
func monitoredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	add := func(where, q string) {
		expr, err := promQL.ParseExpr(grafanaVars.Replace(q))
		if err != nil {
			t.Fatalf("%s: %q: %v", where, q, err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && !slices.Contains(used[vs.Name], where) {
				used[vs.Name] = append(used[vs.Name], where)
			}
			return nil
		})
	}
	objs := render(t, []string{"ci/self-managed-values.yaml"}, "prometheusRule.enabled=true")
	for _, g := range parseRules(t, one(t, objs, "PrometheusRule")).Groups {
		for _, r := range g.Rules {
			add("alert "+r.Alert, r.Expr)
		}
	}
	_, d := renderDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			add("panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if m := labelValuesMetric.FindStringSubmatch(v.Definition); m != nil {
			used[m[1]] = append(used[m[1]], "variable "+v.Name)
		}
	}
	if len(used) < 8 {
		t.Fatalf("only %d metrics found in the alerts and the dashboard: %v", len(used), used)
	}
	return used
}

// checkMonitoredMetricsExported: every series name an alert or a panel
// reads is in scrape, the binary's /metrics (text format), so a renamed
// metric cannot leave an alert that never fires.
func checkMonitoredMetricsExported(t *testing.T, scrape string) {
	t.Helper()
	exported := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(scrape))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			exported[line[:i]] = true
		}
	}
	used := monitoredMetrics(t)
	for _, name := range sortedKeys(used) {
		if !exported[name] {
			t.Errorf("%s is read by %v but the binary exports no such series", name, used[name])
		}
	}
}

// checkMetricsDocumented: every scw_lb_ipam_ family the binary serves is
// in docs/metrics.md with the type and help it is served with. make
// generate writes that page by reading the collectors' constructors in the
// source; this holds it to what the running binary registers.
func checkMetricsDocumented(t *testing.T, scrape string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{} // name → "type|help"
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), " | ")
		if len(cells) != 5 || !strings.HasPrefix(cells[0], "| `scw_lb_ipam_") {
			continue
		}
		name := strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")
		documented[name] = cells[1] + "|" + strings.ReplaceAll(cells[3], "\x00", "|")
	}
	kinds, helps := map[string]string{}, map[string]string{}
	for _, line := range strings.Split(scrape, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(rest, " ")
			kinds[name] = kind
		}
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			helps[name] = help
		}
	}
	served := map[string]string{}
	for name, kind := range kinds {
		if strings.HasPrefix(name, "scw_lb_ipam_") {
			served[name] = kind + "|" + helps[name]
		}
	}
	if len(served) < 8 {
		t.Fatalf("only %d scw_lb_ipam_ families in the scrape", len(served))
	}
	for _, name := range sortedKeys(served) {
		if documented[name] != served[name] {
			t.Errorf("%s is served as %q (type|help) but docs/metrics.md has %q: run make generate", name, served[name], documented[name])
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// alertsHeadings are the anchors GitHub gives the second-level headings of
// docs/alerts.md, one per alert.
func alertsHeadings(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(title), ""), " ", "-")] = true
		}
	}
	return anchors
}
