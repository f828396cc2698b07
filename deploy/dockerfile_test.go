package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/version"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// stage is a FROM and what follows it.
type stage struct {
	base, name string
	insts      []instruction
}

// dockerfile is a parsed Dockerfile: the ARGs before the first FROM and
// the stages.
type dockerfile struct {
	globalArgs map[string]string
	stages     []stage
}

// parseDockerfile reads the Dockerfile syntax that matters here: comments
// (parser directives included), line continuations, instructions, stages.
func parseDockerfile(data []byte) (dockerfile, error) {
	df := dockerfile{globalArgs: map[string]string{}}
	var cur strings.Builder
	start := 0
	flush := func() error {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return nil
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			s := stage{}
			switch {
			case len(f) == 1:
				s.base = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				s.base, s.name = f[0], f[2]
			default:
				return fmt.Errorf("line %d: FROM %s", start, in.args)
			}
			df.stages = append(df.stages, s)
			return nil
		}
		if len(df.stages) == 0 {
			if in.cmd != "ARG" {
				return fmt.Errorf("line %d: %s before the first FROM", start, in.cmd)
			}
			name, def, _ := strings.Cut(in.args, "=")
			df.globalArgs[name] = def
			return nil
		}
		last := &df.stages[len(df.stages)-1]
		last.insts = append(last.insts, in)
		return nil
	}
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue // comments, also between continuation lines
		}
		if cur.Len() == 0 {
			if trimmed == "" {
				continue
			}
			start = i + 1
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		if err := flush(); err != nil {
			return df, err
		}
	}
	if cur.Len() > 0 {
		return df, fmt.Errorf("line %d: continuation at the end of the file", start)
	}
	if len(df.stages) == 0 {
		return df, fmt.Errorf("no FROM")
	}
	return df, nil
}

func (df dockerfile) stage(name string) (stage, int) {
	for i, s := range df.stages {
		if s.name == name {
			return s, i
		}
	}
	return stage{}, -1
}

// all lists the arguments of every cmd instruction of the stage.
func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.insts {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// exec decodes the exec (JSON) form of the stage's last cmd instruction.
func (s stage) exec(cmd string) ([]string, error) {
	all := s.all(cmd)
	if len(all) == 0 {
		return nil, fmt.Errorf("no %s", cmd)
	}
	var argv []string
	if err := json.Unmarshal([]byte(all[len(all)-1]), &argv); err != nil {
		return nil, fmt.Errorf("%s %s: want the exec form, a JSON array (no shell in the image): %v", cmd, all[len(all)-1], err)
	}
	return argv, nil
}

// uid is the numeric user of the stage's last USER.
func (s stage) uid() (int64, error) {
	users := s.all("USER")
	if len(users) == 0 {
		return 0, fmt.Errorf("no USER: the image would run as root")
	}
	user, _, _ := strings.Cut(users[len(users)-1], ":")
	uid, err := strconv.ParseInt(user, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("USER %s: want a numeric uid, which Kubernetes' runAsNonRoot can verify", users[len(users)-1])
	}
	if uid == 0 {
		return 0, fmt.Errorf("USER %s: root", users[len(users)-1])
	}
	return uid, nil
}

func loadDockerfile(t *testing.T) dockerfile {
	t.Helper()
	df, err := parseDockerfile(read(t, "Dockerfile"))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return df
}

// dockerfileUID is the user the aggregator's image runs as.
func dockerfileUID(t *testing.T) int64 {
	t.Helper()
	df := loadDockerfile(t)
	uid, err := df.stages[len(df.stages)-1].uid()
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return uid
}

// goLine is the go directive of go.mod.
var goLine = regexp.MustCompile(`(?m)^go (\S+)\s*$`)

// goBuild matches the `go build ... -o OUT ./cmd/NAME` of a RUN.
var goBuild = regexp.MustCompile(`go build ([^&;]*?)-o (\S+) (\./cmd/\w+)`)

// TestDockerfile: multi-stage, a static trimmed binary, a minimal base, a
// numeric non-root user, the config at /etc/aggregator/aggregator.yaml,
// the port of the compose fleet; and a portalsim target for it.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	df := loadDockerfile(t)
	if len(df.stages) < 2 {
		t.Fatalf("%d stage(s): want a builder and a runtime stage", len(df.stages))
	}

	type image struct {
		stage, binary, cmd string
		wantCmd            []string
		port               string
	}
	images := []image{
		{"aggregator", "/aggregator", "./cmd/aggregator", []string{"-config", "/etc/aggregator/aggregator.yaml"}, "8080"},
		{"portalsim", "/portalsim", "./cmd/portalsim", []string{"-listen", "0.0.0.0:9100"}, "9100-9107"},
	}
	if last := df.stages[len(df.stages)-1]; last.name != "aggregator" {
		t.Errorf("the last stage (the default target) is %q, want aggregator", last.name)
	}
	for _, im := range images {
		s, at := df.stage(im.stage)
		if at < 0 {
			t.Errorf("no stage %s", im.stage)
			continue
		}
		if s.base != "scratch" && !strings.HasPrefix(s.base, "gcr.io/distroless/static") {
			t.Errorf("%s: FROM %s, want a minimal base (distroless/static or scratch)", im.stage, s.base)
		}
		if _, err := s.uid(); err != nil {
			t.Errorf("%s: %v", im.stage, err)
		}
		if argv, err := s.exec("ENTRYPOINT"); err != nil || !slices.Equal(argv, []string{im.binary}) {
			t.Errorf("%s: ENTRYPOINT %q %v, want [%q]", im.stage, argv, err, im.binary)
		}
		if argv, err := s.exec("CMD"); err != nil || !slices.Equal(argv, im.wantCmd) {
			t.Errorf("%s: CMD %q %v, want %q", im.stage, argv, err, im.wantCmd)
		}
		if !slices.Contains(s.all("EXPOSE"), im.port) {
			t.Errorf("%s: EXPOSE %q, want %s", im.stage, s.all("EXPOSE"), im.port)
		}

		// The binary comes from an earlier stage that builds it static
		// and trimmed.
		var from string
		for _, c := range s.all("COPY") {
			f := strings.Fields(c)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") && f[2] == im.binary {
				from = strings.TrimPrefix(f[0], "--from=")
				checkBuild(t, df, at, from, f[1], im.cmd)
			}
		}
		if from == "" {
			t.Errorf("%s: no COPY --from=STAGE of %s", im.stage, im.binary)
		}
	}
}

// checkBuild: stage from, before stage at, builds out from cmd with
// CGO_ENABLED=0 and -trimpath, on a Go at least go.mod's.
func checkBuild(t *testing.T, df dockerfile, at int, from, out, cmd string) {
	t.Helper()
	b, i := df.stage(from)
	if i < 0 || i >= at {
		t.Errorf("COPY --from=%s: no such earlier stage", from)
		return
	}
	var built bool
	for _, run := range b.all("RUN") {
		for _, m := range goBuild.FindAllStringSubmatchIndex(run, -1) {
			if run[m[4]:m[5]] != out || run[m[6]:m[7]] != cmd {
				continue
			}
			built = true
			// The environment of this go build: what precedes it up to
			// the previous command separator.
			prefix := run[:m[0]]
			if j := strings.LastIndexAny(prefix, "&;"); j >= 0 {
				prefix = prefix[j+1:]
			}
			if !strings.Contains(prefix, "CGO_ENABLED=0") && !slices.Contains(b.all("ENV"), "CGO_ENABLED=0") {
				t.Errorf("%s: go build of %s without CGO_ENABLED=0: not a static binary", from, cmd)
			}
			if !strings.Contains(run[m[2]:m[3]], "-trimpath") {
				t.Errorf("%s: go build of %s without -trimpath", from, cmd)
			}
		}
	}
	if !built {
		t.Errorf("stage %s: no RUN go build ... -o %s %s", from, out, cmd)
	}

	// FROM golang:${GO_VERSION}: at least the go line of go.mod.
	goVersion := b.base
	for name, def := range df.globalArgs {
		goVersion = strings.ReplaceAll(goVersion, "${"+name+"}", def)
	}
	tag, ok := strings.CutPrefix(goVersion, "golang:")
	if !ok {
		t.Errorf("stage %s: FROM %s, want golang:VERSION", from, b.base)
		return
	}
	tag, _, _ = strings.Cut(tag, "-")
	m := goLine.FindSubmatch(read(t, "go.mod"))
	if m == nil {
		t.Fatal("go.mod: no go line")
	}
	if !version.IsValid("go"+tag) || version.Compare("go"+tag, "go"+string(m[1])) < 0 {
		t.Errorf("stage %s: Go %s, want at least go.mod's %s", from, tag, m[1])
	}
}

func TestParseDockerfile(t *testing.T) {
	t.Parallel()
	df, err := parseDockerfile([]byte("# syntax=docker/dockerfile:1\nARG V=1\nFROM golang:${V} AS build\nRUN a \\\n  # a comment\n  b\nFROM scratch\nUSER 10:10\nCMD [\"x\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(df.stages) != 2 || df.stages[0].name != "build" || df.globalArgs["V"] != "1" {
		t.Fatalf("parsed %+v", df)
	}
	if got := df.stages[0].all("RUN"); len(got) != 1 || strings.Join(strings.Fields(got[0]), " ") != "a b" {
		t.Errorf("RUN %q, want the continued line joined", got)
	}
	if uid, err := df.stages[1].uid(); uid != 10 || err != nil {
		t.Errorf("uid %d %v", uid, err)
	}
	for _, bad := range []string{"RUN x\n", "FROM a b c d\n", "FROM a\nRUN x \\", ""} {
		if _, err := parseDockerfile([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	for _, user := range []string{"FROM a\n", "FROM a\nUSER root\n", "FROM a\nUSER 0:0\n", "FROM a\nUSER nonroot\n"} {
		df, err := parseDockerfile([]byte(user))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := df.stages[0].uid(); err == nil {
			t.Errorf("%q: accepted as a numeric non-root user", user)
		}
	}
}

// TestDockerignore: the build context leaves out the repository's history
// and keeps every file the images' go build reads: go.mod, go.sum, the Go
// files and embedded files of every package of the module that the two
// commands import.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	patterns, err := ignorefile.ReadAll(bytes.NewReader(read(t, ".dockerignore")))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	ignored := func(file string) bool {
		m, err := pm.MatchesOrParentMatches(file)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, f := range []string{".git", ".git/config"} {
		if !ignored(f) {
			t.Errorf("%s is in the build context", f)
		}
	}

	list := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`,
		"./cmd/aggregator", "./cmd/portalsim")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mod := exec.Command("go", "list", "-m", "-f", "{{.Dir}}")
	mod.Dir = root
	dirOut, err := mod.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	modDir := strings.TrimSpace(string(dirOut)) + "/"
	files := []string{"go.mod", "go.sum"}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		files = append(files, strings.TrimPrefix(f, modDir))
	}
	if len(files) < 20 {
		t.Fatalf("go list found %d files: %q", len(files), files)
	}
	for _, f := range files {
		if ignored(f) {
			t.Errorf("%s: left out of the build context by .dockerignore, and the build needs it", f)
		}
	}
}
