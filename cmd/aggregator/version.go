package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/multas/aggregator/metrics"
)

// version is the release, set at build time:
//
//	go build -ldflags "-X main.version=v1.4.2" ./cmd/aggregator
//
// Empty, the module version the Go toolchain stamped is used, or "devel".
var version string

// buildInfo identifies this binary: the version (the one given, else the
// main module's, else "devel"), the VCS revision the toolchain stamped
// ("-dirty" when the tree had changes; "unknown" without VCS
// information) and the Go version that built it.
func buildInfo(version string, read func() (*debug.BuildInfo, bool)) metrics.BuildInfo {
	b := metrics.BuildInfo{Version: version, Revision: "unknown", GoVersion: runtime.Version()}
	if bi, ok := read(); ok && bi != nil {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			b.GoVersion = bi.GoVersion
		}
		revision, modified := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if revision != "" {
			b.Revision = revision
			if modified {
				b.Revision += "-dirty"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// printVersion writes b, one field a line.
func printVersion(w io.Writer, b metrics.BuildInfo) {
	fmt.Fprintf(w, "aggregator %s\nrevision   %s\ngo         %s\n", b.Version, b.Revision, b.GoVersion)
}

const versionUsage = `usage: aggregator version

Prints the version, the VCS revision and the Go version of this build
(also: aggregator -version).
`

// versionCmd is `aggregator version`: no flags, no arguments.
func versionCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), versionUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitUsage // flag printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "aggregator version: unexpected arguments: %s\n\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return exitUsage
	}
	printVersion(stdout, buildInfo(version, debug.ReadBuildInfo))
	return nil
}
