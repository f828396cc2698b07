package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/multas/aggregator/metrics"
)

// commands are the subcommands aggregator help must list.
var commands = []string{"run", "validate", "query", "watch", "sources check", "sources test", "version", "help"}

// The command line: help on stdout with exit 0; an unknown command, flag
// or argument, a non-loopback demo, is exit 2 with the usage on stderr,
// and nothing starts; a configuration with an unset secret refuses to
// start. run gets an ended context, so a demo that started by mistake
// would print its banner and return at once rather than hang the test.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	unset := filepath.Join(dir, "unset.yaml")
	writeFile(t, unset, `
server: {listen: "127.0.0.1:0", admin_token: "${NO_SUCH_TOKEN}"}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: http://127.0.0.1:9101
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {items: /actas, fields: {id: /nro}}
`)
	usage := append([]string{"usage: aggregator", "-config", "-listen", "-version"}, commands...)
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr []string
	}{
		{"help", []string{"help"}, 0, usage, nil},
		{"-h", []string{"-h"}, 0, usage, nil},
		{"--help", []string{"--help"}, 0, usage, nil},
		{"-help", []string{"-help"}, 0, usage, nil},
		{"version", []string{"version"}, 0, []string{"aggregator ", "revision", runtime.Version()}, nil},
		{"-version", []string{"-version"}, 0, []string{"aggregator ", "revision", runtime.Version()}, nil},
		{"unknown command", []string{"serve"}, 2, nil, append([]string{`unknown command "serve"`}, usage...)},
		{"unknown command with flags", []string{"demo", "-config", unset}, 2, nil, []string{`unknown command "demo"`}},
		{"unknown flag", []string{"-bogus"}, 2, nil, append([]string{"flag provided but not defined: -bogus"}, usage...)},
		{"misspelt flag", []string{"-confg", unset}, 2, nil, []string{"flag provided but not defined: -confg"}},
		{"flag without its value", []string{"-config"}, 2, nil, []string{"flag needs an argument: -config"}},
		{"stray argument", []string{"-listen", "127.0.0.1:0", "extra"}, 2, nil, []string{"unexpected arguments: extra"}},
		{"run with a stray argument", []string{"run", "extra"}, 2, nil, []string{"unexpected arguments: extra"}},
		{"bad log level", []string{"-log-level", "loud"}, 2, nil, []string{"-log-level"}},
		{"version with arguments", []string{"version", "short"}, 2, nil, []string{"unexpected arguments: short", "usage: aggregator version"}},
		{"version with a flag", []string{"version", "--short"}, 2, nil, []string{"flag provided but not defined: -short", "usage: aggregator version"}},
		{"validate, unknown flag", []string{"validate", "-bogus"}, 2, nil, []string{"flag provided but not defined: -bogus", "usage: aggregator validate"}},
		{"validate, stray argument", []string{"validate", "-config", unset, "x"}, 2, nil, []string{"unexpected arguments: x"}},
		{"validate -h", []string{"validate", "-h"}, 0, nil, []string{"usage: aggregator validate"}},
		{"demo on every interface", []string{"-listen", "0.0.0.0:0"}, 2, nil, []string{`-listen "0.0.0.0:0"`, "loopback only", "-config"}},
		{"demo on every interface, v6", []string{"-listen", "[::]:0"}, 2, nil, []string{"loopback only"}},
		{"demo without a host", []string{"-listen", ":0"}, 2, nil, []string{"loopback only"}},
		{"demo on a LAN address", []string{"-listen", "192.168.1.10:8080"}, 2, nil, []string{"loopback only"}},
		{"demo on a host name", []string{"-listen", "aggregator.example:8080"}, 2, nil, []string{"loopback only"}},
		{"demo on a localhost look-alike", []string{"-listen", "localhost.example:8080"}, 2, nil, []string{"loopback only"}},
		// With a configuration the operator chose the address: the config
		// is read (and here, refused for its unset secret), exit 1.
		{"any address with -config", []string{"-config", filepath.Join(dir, "none.yaml"), "-listen", "0.0.0.0:0"}, 1, nil, nil},
		{"unset secret refuses to start", []string{"-config", unset}, 1, nil,
			[]string{"server.admin_token: ${NO_SUCH_TOKEN} is not set", "1 problem(s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr syncBuffer
			err := run(ctx, tt.args, noEnv, &stdout, &stderr)
			if strings.Contains(stderr.String()+fmt.Sprint(err), "listens on loopback only") != strings.Contains(strings.Join(tt.stderr, " "), "loopback only") {
				t.Errorf("refused for loopback (or not) against expectations: %v\n%s", err, stderr.String())
			}
			if got := exitCode(err); got != tt.code {
				t.Errorf("aggregator %s: exit %d (%v), want %d\nstdout:\n%s\nstderr:\n%s",
					strings.Join(tt.args, " "), got, err, tt.code, stdout.String(), stderr.String())
			}
			for _, w := range tt.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if tt.code != 0 && stdout.String() != "" {
				t.Errorf("exit %d with output on stdout (a demo banner?):\n%s", tt.code, stdout.String())
			}
			if strings.Contains(stderr.String(), `"msg":"listening"`) {
				t.Errorf("the server started:\n%s", stderr.String())
			}
		})
	}
}

// Every subcommand (SPEC 10) refuses an unknown flag and a bad argument
// the same way: exit 2, its usage on stderr, nothing on stdout, nothing
// started or asked. The query command's 2 is also its partial result: the
// usage on stderr tells them apart. run gets an ended context, and query a
// server that cannot be reached: a command that went ahead would fail
// otherwise, not with 2 and the usage.
func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "ok.yaml")
	writeFile(t, cfg, `
server: {listen: "127.0.0.1:0"}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: http://127.0.0.1:1
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {items: /actas, fields: {id: /nro}}
`)
	const (
		runUsage     = "usage: aggregator [command] [flags]"
		validUsage   = "usage: aggregator validate"
		queryUsage   = "usage: aggregator query"
		checkUsage   = "usage: aggregator sources check"
		testUsage    = "usage: aggregator sources test"
		versionUsage = "usage: aggregator version"
	)
	noServer := []string{"--server", "http://127.0.0.1:1"}
	tests := []struct {
		command string
		args    []string
		stderr  []string // the reason, then the usage
	}{
		{"unknown", []string{"serve"}, []string{`unknown command "serve"`, runUsage}},
		{"run", []string{"run", "-bogus"}, []string{"flag provided but not defined: -bogus", runUsage}},
		{"run", []string{"-config", cfg, "-bogus"}, []string{"flag provided but not defined: -bogus", runUsage}},
		{"run", []string{"run", "-config"}, []string{"flag needs an argument: -config", runUsage}},
		{"run", []string{"run", "-config", cfg, "extra"}, []string{"unexpected arguments: extra", runUsage}},
		{"run", []string{"-config", cfg, "-log-level", "loud"}, []string{`-log-level "loud"`, runUsage}},
		{"run", []string{"-config", cfg, "-listen", "nowhere"}, []string{"-listen", runUsage}},
		{"run", []string{"-listen", "0.0.0.0:8080"}, []string{"loopback only", runUsage}},
		{"validate", []string{"validate", "-bogus"}, []string{"flag provided but not defined: -bogus", validUsage}},
		{"validate", []string{"validate"}, []string{"-config FILE is required", validUsage}},
		{"validate", []string{"validate", "-config", cfg, "extra"}, []string{"unexpected arguments: extra", validUsage}},
		{"query", append([]string{"query", "--plate", "AB123CD"}, noServer...), []string{"flag provided but not defined: -plate", queryUsage}},
		{"query", append([]string{"query", "--domain", "AB123CD", "extra"}, noServer...), []string{"unexpected arguments: extra", queryUsage}},
		{"query", append([]string{"query"}, noServer...), []string{"exactly one of --domain and --id", queryUsage}},
		{"query", append([]string{"query", "--domain", "AB123CD", "--id", "20314159269"}, noServer...), []string{"exactly one of --domain and --id", queryUsage}},
		{"query", append([]string{"query", "--domain", "AB123CD", "-o", "yaml"}, noServer...), []string{`-o "yaml"`, queryUsage}},
		{"query", append([]string{"query", "--domain", "AB123CD", "--timeout", "soon"}, noServer...), []string{`invalid value "soon" for flag -timeout`, queryUsage}},
		{"query", []string{"query", "--domain", "AB123CD", "--server", "ftp://127.0.0.1:1"}, []string{"want an absolute http or https URL", queryUsage}},
		{"watch", []string{"watch"}, []string{"a subcommand is required", "usage: aggregator watch create"}},
		{"watch", []string{"watch", "pause"}, []string{`unknown subcommand "pause"`, "usage: aggregator watch create"}},
		{"watch", append([]string{"watch", "create", "--plate", "AB123CD"}, noServer...), []string{"flag provided but not defined: -plate", "usage: aggregator watch create"}},
		{"watch", append([]string{"watch", "create", "--domain", "AB123CD"}, noServer...), []string{"--callback is required", "usage: aggregator watch create"}},
		{"watch", append([]string{"watch", "get"}, noServer...), []string{"the watch id is required", "usage: aggregator watch create"}},
		{"sources", []string{"sources"}, []string{"a subcommand is required", checkUsage}},
		{"sources", []string{"sources", "list"}, []string{`unknown subcommand "list"`, checkUsage}},
		{"sources check", []string{"sources", "check", "-config", cfg, "-nope"}, []string{"flag provided but not defined: -nope", checkUsage}},
		{"sources check", []string{"sources", "check", "-domain", "AB123CD"}, []string{"-config FILE is required", checkUsage}},
		{"sources check", []string{"sources", "check", "-config", cfg, "-domain", "AB123CD", "extra"}, []string{"unexpected arguments: extra", checkUsage}},
		{"sources check", []string{"sources", "check", "-config", cfg, "-domain", "AB123CD", "-id", "20314159269"}, []string{"exactly one of -domain, -id and -infraction", checkUsage}},
		{"sources check", []string{"sources", "check", "-config", cfg, "-domain", "ZZ"}, []string{"-domain: not a plate", checkUsage}},
		{"sources check", []string{"sources", "check", "-config", cfg, "-domain", "AB123CD", "-source", "atlantis"}, []string{"atlantis", checkUsage}},
		{"sources check", []string{"sources", "check", "-config", cfg, "-domain", "AB123CD", "-record", cfg}, []string{"-record: " + cfg + " is not a directory", checkUsage}},
		{"sources test", []string{"sources", "test", "-config", cfg}, []string{"the directory of recordings DIR is required", testUsage}},
		{"sources test", []string{"sources", "test", "-config", cfg, "-bogus", "."}, []string{"flag provided but not defined: -bogus", testUsage}},
		{"sources test", []string{"sources", "test", "-config", cfg, "-id", "20314159269", "."}, []string{"-domain and -id go with -update", testUsage}},
		{"version", []string{"version", "--short"}, []string{"flag provided but not defined: -short", versionUsage}},
		{"version", []string{"version", "short"}, []string{"unexpected arguments: short", versionUsage}},
		{"help", []string{"help", "-bogus"}, []string{"flag provided but not defined: -bogus", runUsage}},
		{"help", []string{"help", "nosuch"}, []string{`unknown command "nosuch"`, runUsage}},
		{"help", []string{"help", "query", "--domain"}, []string{`unknown command "query --domain"`, runUsage}},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.command] = true
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr syncBuffer
			err := run(ctx, tt.args, noEnv, &stdout, &stderr)
			if got := exitCode(err); got != 2 {
				t.Errorf("exit %d (%v), want 2\nstderr:\n%s", got, err, stderr.String())
			}
			if stdout.String() != "" {
				t.Errorf("output on stdout:\n%s", stdout.String())
			}
			// The reason first, then the usage.
			at := 0
			for _, w := range tt.stderr {
				i := strings.Index(stderr.String()[at:], w)
				if i < 0 {
					t.Errorf("stderr lacks %q after offset %d:\n%s", w, at, stderr.String())
					break
				}
				at += i + len(w)
			}
		})
	}
	for _, c := range append(commands, "unknown") {
		if !covered[c] {
			t.Errorf("no usage error tested for %q", c)
		}
	}
}

// help COMMAND prints that command's usage on stdout, exit 0, as
// COMMAND -h does; plain help lists the commands.
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		topic []string
		want  string
	}{
		{nil, "usage: aggregator [command] [flags]"},
		{[]string{"-h"}, "usage: aggregator [command] [flags]"},
		{[]string{"run"}, "usage: aggregator [command] [flags]"},
		{[]string{"help"}, "usage: aggregator [command] [flags]"},
		{[]string{"validate"}, "usage: aggregator validate -config FILE"},
		{[]string{"query"}, "usage: aggregator query (--domain PLATE | --id CUIT/DNI)"},
		{[]string{"sources"}, "usage: aggregator sources check -config FILE"},
		{[]string{"sources", "check"}, "usage: aggregator sources check -config FILE"},
		{[]string{"sources", "test"}, "usage: aggregator sources test -config FILE"},
		{[]string{"version"}, "usage: aggregator version"},
	}
	for _, tt := range tests {
		var stdout, stderr syncBuffer
		err := run(context.Background(), append([]string{"help"}, tt.topic...), noEnv, &stdout, &stderr)
		if err != nil || !strings.HasPrefix(stdout.String(), tt.want) || stderr.String() != "" {
			t.Errorf("help %v: %v\nstdout:\n%s\nstderr:\n%s", tt.topic, err, stdout.String(), stderr.String())
		}
	}
}

// Every subcommand has its line in the help, with what it does.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr syncBuffer
	if err := run(context.Background(), []string{"help"}, noEnv, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		found := false
		for _, line := range strings.Split(stdout.String(), "\n") {
			if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(strings.TrimSpace(line), c+" ") {
				found = true
			}
		}
		if !found {
			t.Errorf("help has no line for %q:\n%s", c, stdout.String())
		}
	}
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.1:0", true},
		{"127.10.20.30:80", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{"LocalHost:8080", true},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{":8080", false},
		{"10.0.0.5:8080", false},
		{"[fe80::1]:8080", false},
		{"example.com:8080", false},
		{"localhost.:8080", false},
		{"127.0.0.1", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := loopback(tt.addr); got != tt.want {
			t.Errorf("loopback(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestBuildInfo(t *testing.T) {
	t.Parallel()
	read := func(bi *debug.BuildInfo) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return bi, bi != nil }
	}
	stamped := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "false"}}}
	dirty := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}
	tests := []struct {
		name    string
		version string
		read    func() (*debug.BuildInfo, bool)
		want    metrics.BuildInfo
	}{
		{"stamped by the toolchain", "", read(stamped), metrics.BuildInfo{Version: "v1.2.3", Revision: "0123abcd", GoVersion: "go1.99.1"}},
		{"-ldflags -X main.version wins", "v9.0.0", read(stamped), metrics.BuildInfo{Version: "v9.0.0", Revision: "0123abcd", GoVersion: "go1.99.1"}},
		{"devel, modified tree", "", read(dirty), metrics.BuildInfo{Version: "devel", Revision: "0123abcd-dirty", GoVersion: "go1.99.1"}},
		{"no build information", "", read(nil), metrics.BuildInfo{Version: "devel", Revision: "unknown", GoVersion: runtime.Version()}},
		{"no VCS", "", read(&debug.BuildInfo{}), metrics.BuildInfo{Version: "devel", Revision: "unknown", GoVersion: runtime.Version()}},
	}
	for _, tt := range tests {
		if got := buildInfo(tt.version, tt.read); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
