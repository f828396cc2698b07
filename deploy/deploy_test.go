package deploy_test

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// update rewrites the generated parts of the packaging (the compose
// fleet's sources) instead of checking them.
var update = flag.Bool("update", false, "rewrite generated deploy files")

// root is the repository's root: the tests run in deploy/.
const root = ".."

// path is a file of the repository, from its root.
func path(parts ...string) string { return filepath.Join(append([]string{root}, parts...)...) }

// read returns a file of the repository, failing the test if it is missing.
func read(t *testing.T, parts ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(path(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// envRef is a ${NAME} or ${NAME:-default} reference of our configuration
// (config/expand.go), $$ being a literal $.
var envRef = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}`)

// envRefs lists the variables a configuration file refers to, sorted.
func envRefs(config []byte) []string {
	var names []string
	for _, m := range envRef.FindAllSubmatch(config, -1) {
		if len(m[1]) > 0 && !slices.Contains(names, string(m[1])) {
			names = append(names, string(m[1]))
		}
	}
	slices.Sort(names)
	return names
}

// testEnv is the environment the tests give the configurations: a value
// of the right form for each secret they use.
var testEnv = map[string]string{
	"AGGREGATOR_ADMIN_TOKEN": "deploy-test-admin-token",
	"WEBHOOK_SECRET":         "whsec_ZGVwbG95IHRlc3Qgd2ViaG9vayBzaWduaW5nIGtleQ==",
	"AGGREGATOR_REDIS_URL":   "redis://redis.example:6379/0",
	"CABA_TOKEN":             "deploy-test-caba-token",
}

// getenv reads testEnv, failing the test on a variable it does not know:
// a configuration that needs a new secret must say so here.
func getenv(t *testing.T) func(string) string {
	return func(name string) string {
		v, ok := testEnv[name]
		if !ok {
			t.Errorf("the configuration refers to ${%s}, which the tests do not know", name)
		}
		return v
	}
}

func TestEnvRefs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a: $$NOT", nil},
		{`a: "${A}" b: "${B:-x}" c: "${A}"`, []string{"A", "B"}},
		{"a: $PLAIN", nil},
	}
	for _, tt := range tests {
		if got := envRefs([]byte(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("envRefs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
