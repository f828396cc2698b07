package api_test

// The checks of SPEC 10 that need the pinned Node tools (see
// clients_test.go): redocly lint, and the TypeScript types of
// openapi-typescript compiled by tsc --strict.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// nodeTools is the directory scripts/provision-node-tools.sh installed the
// pinned Node tools in.
func nodeTools(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGGREGATOR_NODE_TOOLS")
	if dir == "" {
		missing(t, "AGGREGATOR_NODE_TOOLS is not set: run scripts/provision-node-tools.sh and set it to the directory it prints (scripts/test.sh does both)")
	}
	for _, tool := range []string{"redocly", "openapi-typescript", "tsc"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", tool)); err != nil {
			missing(t, "AGGREGATOR_NODE_TOOLS=%s lacks %s: %v", dir, tool, err)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node is not on PATH: %v", err)
	}
	return dir
}

// nodeEnv keeps the Node tools quiet and offline: no usage report, no
// update notice.
var nodeEnv = []string{"REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_NOTIFICATIONS=true", "NO_UPDATE_NOTIFIER=1"}

type lintReport struct {
	Totals struct {
		Errors   int `json:"errors"`
		Warnings int `json:"warnings"`
	} `json:"totals"`
	Problems []struct {
		RuleID   string `json:"ruleId"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
		Location []struct {
			Pointer string `json:"pointer"`
		} `json:"location"`
	} `json:"problems"`
}

func (r lintReport) String() string {
	var b strings.Builder
	for _, p := range r.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		fmt.Fprintf(&b, "\n  %s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
	return b.String()
}

// lint runs redocly lint with config and returns its report. redocly
// exits 1 when it finds an error; the report says which. A mistake in the
// configuration itself stops the test.
func lint(t *testing.T, tools, config string) lintReport {
	t.Helper()
	spec, err := filepath.Abs("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(tools, "node_modules", ".bin", "redocly"),
		"lint", "--config", config, "--lint-config", "error", "--format", "json", spec)
	cmd.Dir = filepath.Dir(config)
	cmd.Env = append(os.Environ(), nodeEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var report lintReport
	if jerr := json.Unmarshal(stdout.Bytes(), &report); jerr != nil {
		t.Fatalf("redocly lint --config %s: %v; its report does not decode: %v\nstdout:\n%s\nstderr:\n%s",
			config, err, jerr, stdout.Bytes(), stderr.Bytes())
	}
	return report
}

// TestRedoclyLint lints the document with redocly's recommended rules as
// they are, where SPEC 10 wants no error, then with the repository's
// redocly.yaml (recommended, less the rules it turns off and says why),
// where it wants nothing at all.
func TestRedoclyLint(t *testing.T) {
	t.Parallel()
	tools := nodeTools(t)

	recommended := filepath.Join(t.TempDir(), "redocly.yaml")
	if err := os.WriteFile(recommended, []byte("extends:\n  - recommended\ntelemetry: off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := lint(t, tools, recommended); r.Totals.Errors != 0 {
		t.Errorf("redocly lint (recommended): %d errors:%s", r.Totals.Errors, r)
	}

	project, err := filepath.Abs(filepath.Join("..", "redocly.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if r := lint(t, tools, project); r.Totals.Errors != 0 || r.Totals.Warnings != 0 {
		t.Errorf("redocly lint --config redocly.yaml: %d errors, %d warnings:%s", r.Totals.Errors, r.Totals.Warnings, r)
	}
}

// TestTypeScriptClient generates the TypeScript types with the pinned
// openapi-typescript and compiles them with tsc --strict, together with
// clienttest/testdata/usage.ts, which reads members of the answers and
// asserts their exact types (an any would satisfy a plain read). It also
// checks that no member of a schema is typed unknown.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	tools := nodeTools(t)
	spec, err := filepath.Abs("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyFile(t, filepath.Join("clienttest", "testdata", "usage.ts"), filepath.Join(dir, "usage.ts"))
	copyFile(t, filepath.Join("clienttest", "testdata", "tsconfig.json"), filepath.Join(dir, "tsconfig.json"))
	generated := filepath.Join(dir, "api.ts")
	bin := filepath.Join(tools, "node_modules", ".bin")

	run(t, dir, nodeEnv, filepath.Join(bin, "openapi-typescript"), spec, "--output", generated)
	src, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range untypedTS(string(src)) {
		t.Errorf("generated TypeScript: %s", u)
	}
	for _, name := range schemaNames(t) {
		if !strings.Contains(string(src), "\n        "+name+": ") {
			t.Errorf("generated TypeScript has no components[\"schemas\"][%q]", name)
		}
	}
	run(t, dir, nodeEnv, filepath.Join(bin, "tsc"), "--project", "tsconfig.json", "--strict", "--noEmit")
}

// headerIndex is the index signature openapi-typescript gives every
// response's headers: an answer may carry headers the document does not
// name. The ones it names are typed.
const headerIndex = "[name: string]: unknown;"

var (
	untypedWord   = regexp.MustCompile(`\b(unknown|any)\b`)
	stringLiteral = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// untypedTS lists the lines of generated TypeScript, comments and string
// literals aside, that type something unknown or any.
func untypedTS(src string) []string {
	var out []string
	inComment := false
	for i, line := range strings.Split(src, "\n") {
		code := strings.TrimSpace(line)
		if inComment {
			if strings.Contains(code, "*/") {
				inComment = false
			}
			continue
		}
		if strings.HasPrefix(code, "/*") {
			inComment = !strings.Contains(code, "*/")
			continue
		}
		if strings.HasPrefix(code, "//") || strings.HasPrefix(code, "*") || code == headerIndex {
			continue
		}
		if untypedWord.MatchString(stringLiteral.ReplaceAllString(code, `""`)) {
			out = append(out, fmt.Sprintf("line %d: %s", i+1, code))
		}
	}
	return out
}

func TestUntypedTSFindsUnknownMembers(t *testing.T) {
	t.Parallel()
	src := `export interface components {
    schemas: {
        /** @description not unknown here */
        A: {
            invalid_params: unknown[];
            extra?: any;
            /**
             * unknown in a comment
             */
            status: "unpaid" | "paid" | "in_process" | "unknown";
        } & (unknown | unknown);
    };
    responses: {
        B: {
            headers: {
                [name: string]: unknown;
            };
        };
    };
}`
	got := untypedTS(src)
	want := []string{"line 5: invalid_params: unknown[];", "line 6: extra?: any;", "line 11: } & (unknown | unknown);"}
	if !slices.Equal(got, want) {
		t.Errorf("untypedTS found %q, want %q", got, want)
	}
}
