package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/portalsim"
)

const composeDir = "compose"

// loadCompose loads compose.yaml with the Compose specification's own
// loader, schema validation on, in the environment env.
func loadCompose(t *testing.T, file string, env map[string]string) (*types.Project, error) {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	// The loader writes into the environment (COMPOSE_PROJECT_NAME): give
	// it its own copy.
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: maps.Clone(env),
	})
}

func composeProject(t *testing.T) *types.Project {
	t.Helper()
	p, err := loadCompose(t, path("deploy", composeDir, "compose.yaml"), testEnv)
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("compose.yaml: no service %s", name)
	}
	return s
}

// abs is a repository path made absolute, as the loader resolves paths.
func abs(t *testing.T, parts ...string) string {
	t.Helper()
	a, err := filepath.Abs(path(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// bind is the service's bind mount at target.
func bind(s types.ServiceConfig, target string) (types.ServiceVolumeConfig, bool) {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == target {
			return v, true
		}
	}
	return types.ServiceVolumeConfig{}, false
}

// wantBind checks that the service mounts the repository file source,
// read-only, at target.
func wantBind(t *testing.T, s types.ServiceConfig, target string, source ...string) {
	t.Helper()
	v, ok := bind(s, target)
	if !ok {
		t.Errorf("%s: no bind mount at %s", s.Name, target)
		return
	}
	if want := abs(t, source...); v.Source != want {
		t.Errorf("%s: %s mounted from %s, want %s", s.Name, target, v.Source, want)
	}
	if !v.ReadOnly {
		t.Errorf("%s: %s mounted read-write", s.Name, target)
	}
}

// TestCompose: three aggregator replicas built from the Dockerfile over
// one Redis, the demo portals, a load balancer, Prometheus with the alert
// rules, Grafana with the dashboard.
func TestCompose(t *testing.T) {
	t.Parallel()
	p := composeProject(t)
	df := loadDockerfile(t)

	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s: bind mount of a missing file: %v", s.Name, err)
			}
		}
		if s.Build != nil {
			if s.Build.Context != abs(t) || s.Build.Dockerfile != "Dockerfile" {
				t.Errorf("%s: build %s %s, want the repository's Dockerfile", s.Name, s.Build.Context, s.Build.Dockerfile)
			}
			if _, at := df.stage(s.Build.Target); at < 0 {
				t.Errorf("%s: build target %q is no stage of the Dockerfile", s.Name, s.Build.Target)
			}
		}
	}

	agg := service(t, p, "aggregator")
	if agg.Deploy == nil || agg.Deploy.Replicas == nil {
		t.Fatal("aggregator: no deploy.replicas, want 3")
	}
	if n := *agg.Deploy.Replicas; n != 3 {
		t.Errorf("aggregator: deploy.replicas %d, want 3", n)
	}
	if agg.Build == nil || agg.Build.Target != "aggregator" {
		t.Errorf("aggregator: build %+v, want the Dockerfile's aggregator stage", agg.Build)
	}
	if len(agg.Ports) > 0 {
		t.Errorf("aggregator: ports %v: the replicas are reached through the load balancer", agg.Ports)
	}
	wantBind(t, agg, "/etc/aggregator/aggregator.yaml", "deploy", composeDir, "aggregator.yaml")
	for _, name := range envRefs(read(t, "deploy", composeDir, "aggregator.yaml")) {
		if v, ok := agg.Environment[name]; !ok || v == nil || *v != testEnv[name] {
			t.Errorf("aggregator: the configuration refers to ${%s}, which the service does not pass from the environment", name)
		}
	}
	if !agg.ReadOnly || !slices.Equal(agg.CapDrop, []string{"ALL"}) {
		t.Errorf("aggregator: read_only %v cap_drop %v, want a read-only root and no capability", agg.ReadOnly, agg.CapDrop)
	}
	if g := agg.StopGracePeriod; g == nil || time.Duration(*g) <= 20*time.Second {
		t.Errorf("aggregator: stop_grace_period %v, want more than server.shutdown_delay + server.shutdown_timeout (20s)", fmtPtr(g))
	}
	if dep, ok := agg.DependsOn["redis"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("aggregator: depends_on redis %+v, want service_healthy", dep)
	}

	sim := service(t, p, "portalsim")
	if sim.Build == nil || sim.Build.Target != "portalsim" {
		t.Errorf("portalsim: build %+v, want the Dockerfile's portalsim stage", sim.Build)
	}

	redis := service(t, p, "redis")
	if !strings.HasPrefix(redis.Image, "redis:") || redis.HealthCheck == nil || len(redis.HealthCheck.Test) == 0 {
		t.Errorf("redis: image %q healthcheck %v, want a Redis with a health check", redis.Image, redis.HealthCheck)
	}

	lb := service(t, p, "lb")
	wantBind(t, lb, "/usr/local/etc/haproxy/haproxy.cfg", "deploy", composeDir, "haproxy.cfg")
	if !slices.ContainsFunc(lb.Ports, func(pc types.ServicePortConfig) bool { return pc.Target == 8080 && pc.Published == "8080" }) {
		t.Errorf("lb: ports %+v, want 8080 published", lb.Ports)
	}

	prom := service(t, p, "prometheus")
	wantBind(t, prom, "/etc/prometheus/prometheus.yml", "deploy", composeDir, "prometheus.yml")
	wantBind(t, prom, "/etc/prometheus/alerts.yml", "deploy", "prometheus", "alerts.yml")
	if !slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("prometheus: command %q, want --config.file=/etc/prometheus/prometheus.yml", prom.Command)
	}

	grafana := service(t, p, "grafana")
	wantBind(t, grafana, "/etc/grafana/provisioning/datasources/datasources.yaml", "deploy", composeDir, "grafana", "datasources.yaml")
	wantBind(t, grafana, "/etc/grafana/provisioning/dashboards/dashboards.yaml", "deploy", composeDir, "grafana", "dashboards.yaml")
	wantBind(t, grafana, "/etc/grafana/dashboards/aggregator.json", "deploy", "grafana", "aggregator.json")
}

// TestComposeSecretsRequired: without the secrets in the environment, the
// fleet does not start (compose refuses the file) rather than running
// without an admin token.
func TestComposeSecretsRequired(t *testing.T) {
	t.Parallel()
	for _, missing := range []string{"AGGREGATOR_ADMIN_TOKEN", "WEBHOOK_SECRET"} {
		env := map[string]string{}
		for k, v := range testEnv {
			if k != missing {
				env[k] = v
			}
		}
		_, err := loadCompose(t, path("deploy", composeDir, "compose.yaml"), env)
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("without %s: error %v, want one naming it", missing, err)
		}
	}
}

// TestComposeSchema: the loader validates against the Compose schema, so
// the test above would catch a misspelt key.
func TestComposeSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc string
	}{
		{"unknown service key", "name: x\nservices:\n  a:\n    image: a\n    replica: 3\n"},
		{"wrong type", "name: x\nservices:\n  a:\n    image: a\n    deploy: {replicas: three}\n"},
		{"unknown top-level key", "name: x\nservice:\n  a:\n    image: a\n"},
	}
	for _, tt := range tests {
		file := filepath.Join(t.TempDir(), "compose.yaml")
		if err := os.WriteFile(file, []byte(tt.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadCompose(t, file, nil); err == nil {
			t.Errorf("%s: loaded without error", tt.name)
		}
	}
}

// composeSources is the `sources:` section of the compose fleet's
// configuration: the demo portals as the portalsim service serves them
// (`-listen 0.0.0.0:9100`: one port each from 9101, in Demo order).
func composeSources() string {
	urls := map[string]string{}
	for i, j := range portalsim.Demo() {
		urls[j.ID] = fmt.Sprintf("http://portalsim:%d", 9101+i)
	}
	return portalsim.AggregatorYAML(portalsim.Demo(), urls)
}

// TestComposeConfig: the fleet's aggregator.yaml passes our validation,
// shares the compose Redis, and its sources are the portalsim service's
// demo portals as portalsim describes them (regenerated with -update).
func TestComposeConfig(t *testing.T) {
	t.Parallel()
	file := path("deploy", composeDir, "aggregator.yaml")
	data := read(t, "deploy", composeDir, "aggregator.yaml")

	want := composeSources()
	head, _, found := bytes.Cut(data, []byte("\nsources:\n"))
	if *update {
		if !found {
			t.Fatal("aggregator.yaml: no sources: section to replace")
		}
		data = append(append(head, '\n'), want...)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.HasSuffix(data, []byte("\n"+want)) {
		t.Errorf("aggregator.yaml: its sources are not those of the demo portals; regenerate them: go test ./deploy -run TestComposeConfig -update")
	}

	cfg, err := config.Parse(data, file, getenv(t))
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	if cfg.Server.Listen != "0.0.0.0:8080" {
		t.Errorf("server.listen %q, want 0.0.0.0:8080 (the image's port, every interface)", cfg.Server.Listen)
	}
	if cfg.Server.AdminToken != testEnv["AGGREGATOR_ADMIN_TOKEN"] || cfg.Webhooks.SigningSecret != testEnv["WEBHOOK_SECRET"] {
		t.Error("admin_token and signing_secret: want them from the environment")
	}

	p := composeProject(t)
	u, err := url.Parse(cfg.Store.RedisURL)
	if err != nil || u.Hostname() != "redis" {
		t.Errorf("store.redis_url: want the compose service redis")
	} else if _, ok := p.Services[u.Hostname()]; !ok {
		t.Errorf("store.redis_url: no service %s", u.Hostname())
	}
	if len(cfg.Sources) != len(portalsim.Demo()) {
		t.Errorf("%d sources, want the %d demo portals", len(cfg.Sources), len(portalsim.Demo()))
	}
	for _, s := range cfg.Sources {
		u, err := url.Parse(s.BaseURL)
		if err != nil || u.Hostname() != "portalsim" {
			t.Errorf("source %s: base_url %s, want the portalsim service", s.ID, s.BaseURL)
		}
	}
}

// haproxy is haproxy.cfg as sections of directives.
type haproxy map[string][][]string

func parseHAProxy(data []byte) haproxy {
	h := haproxy{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "global", "defaults", "frontend", "backend", "listen", "resolvers":
			section = strings.Join(f, " ")
			h[section] = nil
			continue
		}
		h[section] = append(h[section], f)
	}
	return h
}

// directive is the first directive of section that starts with words.
func (h haproxy) directive(section string, words ...string) []string {
	for _, d := range h[section] {
		if len(d) >= len(words) && slices.Equal(d[:len(words)], words) {
			return d
		}
	}
	return nil
}

// TestHAProxy: the load balancer spreads over every aggregator replica on
// its port, checks /readyz, drops a replica within the shutdown delay, and
// never cuts a query short.
func TestHAProxy(t *testing.T) {
	t.Parallel()
	h := parseHAProxy(read(t, "deploy", composeDir, "haproxy.cfg"))
	p := composeProject(t)
	cfg, err := config.Parse(read(t, "deploy", composeDir, "aggregator.yaml"), "aggregator.yaml", getenv(t))
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(cfg.Server.Listen)
	replicas := *service(t, p, "aggregator").Deploy.Replicas

	fe := h.directive("frontend api", "default_backend")
	if fe == nil || len(fe) != 2 {
		t.Fatal(`haproxy.cfg: no "frontend api" with a default_backend`)
	}
	if bind := h.directive("frontend api", "bind"); bind == nil || bind[1] != ":8080" {
		t.Errorf("frontend api: bind %q, want :8080 (the port compose publishes)", bind)
	}
	be := "backend " + fe[1]
	st := h.directive(be, "server-template")
	if len(st) < 4 || st[2] != strconv.Itoa(replicas) || st[3] != "aggregator:"+port {
		t.Errorf("%s: server-template %q, want %d servers at aggregator:%s", be, st, replicas, port)
	}
	if h.directive(be, "option", "httpchk") == nil {
		t.Errorf("%s: no option httpchk", be)
	}
	if d := h.directive(be, "http-check", "send"); !slices.Equal(d, []string{"http-check", "send", "meth", "GET", "uri", "/readyz"}) {
		t.Errorf("%s: http-check send %q, want GET /readyz", be, d)
	}
	if d := h.directive(be, "http-check", "expect"); !slices.Equal(d, []string{"http-check", "expect", "status", "200"}) {
		t.Errorf("%s: http-check expect %q, want status 200", be, d)
	}
	// Out of rotation within server.shutdown_delay (5s) of SIGTERM.
	ds := h.directive(be, "default-server")
	inter, fall := time.Duration(0), 0
	for i := 1; i+1 < len(ds); i++ {
		switch ds[i] {
		case "inter":
			inter, _ = time.ParseDuration(ds[i+1])
		case "fall":
			fall, _ = strconv.Atoi(ds[i+1])
		}
	}
	if inter <= 0 || fall <= 0 || inter*time.Duration(fall) >= 5*time.Second {
		t.Errorf("%s: default-server inter %v fall %d: want a replica out within 5s", be, inter, fall)
	}
	if !slices.Contains(st, "check") && !slices.Contains(ds, "check") {
		t.Errorf("%s: servers not health-checked", be)
	}
	to := h.directive("defaults", "timeout", "server")
	if len(to) != 3 {
		t.Fatal("defaults: no timeout server")
	}
	if d, err := time.ParseDuration(to[2]); err != nil || d <= time.Duration(cfg.Query.MaxDeadline) {
		t.Errorf("timeout server %s: want more than query.max_deadline %s", to[2], cfg.Query.MaxDeadline)
	}
}

// TestComposePrometheus: Prometheus loads the alert rules at the path
// compose mounts them, and scrapes each aggregator replica on its port.
func TestComposePrometheus(t *testing.T) {
	t.Parallel()
	var prom struct {
		Global struct {
			ScrapeInterval     string `yaml:"scrape_interval"`
			EvaluationInterval string `yaml:"evaluation_interval"`
		} `yaml:"global"`
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName      string `yaml:"job_name"`
			MetricsPath  string `yaml:"metrics_path"`
			DNSSDConfigs []struct {
				Names           []string `yaml:"names"`
				Type            string   `yaml:"type"`
				Port            int      `yaml:"port"`
				RefreshInterval string   `yaml:"refresh_interval"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(read(t, "deploy", composeDir, "prometheus.yml")))
	dec.KnownFields(true)
	if err := dec.Decode(&prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	p := composeProject(t)
	if _, ok := bind(service(t, p, "prometheus"), "/etc/prometheus/alerts.yml"); !ok || !slices.Equal(prom.RuleFiles, []string{"/etc/prometheus/alerts.yml"}) {
		t.Errorf("rule_files %q: want the mounted /etc/prometheus/alerts.yml", prom.RuleFiles)
	}
	var scraped bool
	for _, sc := range prom.ScrapeConfigs {
		for _, sd := range sc.DNSSDConfigs {
			if slices.Contains(sd.Names, "aggregator") && sd.Type == "A" && sd.Port == 8080 && (sc.MetricsPath == "" || sc.MetricsPath == "/metrics") {
				scraped = true
			}
		}
	}
	if !scraped {
		t.Error("prometheus.yml: no scrape of every aggregator replica (DNS A records of the service) on :8080/metrics")
	}
}

// TestGrafana: the provisioned datasource is the compose Prometheus, the
// dashboard provider reads the folder where the dashboard is mounted,
// every panel queries that datasource, and the panels fit the grid.
func TestGrafana(t *testing.T) {
	t.Parallel()
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name      string `yaml:"name"`
			UID       string `yaml:"uid"`
			Type      string `yaml:"type"`
			Access    string `yaml:"access"`
			URL       string `yaml:"url"`
			IsDefault bool   `yaml:"isDefault"`
			Editable  bool   `yaml:"editable"`
		} `yaml:"datasources"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(read(t, "deploy", composeDir, "grafana", "datasources.yaml")))
	dec.KnownFields(true)
	if err := dec.Decode(&ds); err != nil {
		t.Fatalf("datasources.yaml: %v", err)
	}
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].UID == "" {
		t.Fatalf("datasources.yaml: %+v, want one Prometheus datasource with a uid", ds)
	}
	uid := ds.Datasources[0].UID
	if ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("datasource url %s, want the compose service prometheus", ds.Datasources[0].URL)
	}

	var providers struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name            string `yaml:"name"`
			Folder          string `yaml:"folder"`
			Type            string `yaml:"type"`
			DisableDeletion bool   `yaml:"disableDeletion"`
			AllowUIUpdates  bool   `yaml:"allowUiUpdates"`
			Options         struct {
				Path                      string `yaml:"path"`
				FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	dec = yaml.NewDecoder(bytes.NewReader(read(t, "deploy", composeDir, "grafana", "dashboards.yaml")))
	dec.KnownFields(true)
	if err := dec.Decode(&providers); err != nil {
		t.Fatalf("dashboards.yaml: %v", err)
	}
	p := composeProject(t)
	mount, ok := bind(service(t, p, "grafana"), "/etc/grafana/dashboards/aggregator.json")
	if !ok || providers.APIVersion != 1 || len(providers.Providers) != 1 || providers.Providers[0].Type != "file" ||
		providers.Providers[0].Options.Path != filepath.Dir(mount.Target) {
		t.Errorf("dashboards.yaml: %+v, want one file provider reading the folder of the mounted dashboard", providers)
	}

	var dash struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Panels        []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				Type string `json:"type"`
				UID  string `json:"uid"`
			} `json:"datasource"`
			GridPos struct{ H, W, X, Y int } `json:"gridPos"`
			Targets []struct {
				Datasource *struct {
					Type string `json:"type"`
					UID  string `json:"uid"`
				} `json:"datasource"`
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(read(t, "deploy", "grafana", "aggregator.json"), &dash); err != nil {
		t.Fatalf("aggregator.json: %v", err)
	}
	if dash.UID == "" || dash.Title == "" || dash.SchemaVersion == 0 {
		t.Errorf("dashboard uid %q title %q schemaVersion %d: want all three", dash.UID, dash.Title, dash.SchemaVersion)
	}
	ids := map[int]bool{}
	type rect struct{ x, y, w, h int }
	var placed []rect
	for _, panel := range dash.Panels {
		name := fmt.Sprintf("panel %d %q", panel.ID, panel.Title)
		if panel.ID == 0 || ids[panel.ID] {
			t.Errorf("%s: want a unique id", name)
		}
		ids[panel.ID] = true
		g := panel.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v off the 24-column grid", name, g)
		}
		r := rect{g.X, g.Y, g.W, g.H}
		for _, o := range placed {
			if r.x < o.x+o.w && o.x < r.x+r.w && r.y < o.y+o.h && o.y < r.y+r.h {
				t.Errorf("%s: gridPos %+v overlaps another panel", name, g)
			}
		}
		placed = append(placed, r)
		if panel.Type == "row" {
			continue
		}
		if len(panel.Targets) == 0 {
			t.Errorf("%s: no query", name)
		}
		if panel.Datasource == nil || panel.Datasource.UID != uid {
			t.Errorf("%s: datasource %+v, want uid %s", name, panel.Datasource, uid)
		}
		refs := map[string]bool{}
		for _, tg := range panel.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: target %q: want an expr and a unique refId", name, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource != nil && tg.Datasource.UID != uid {
				t.Errorf("%s: target %s: datasource %s, want %s", name, tg.RefID, tg.Datasource.UID, uid)
			}
		}
	}
}
