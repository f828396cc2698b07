// Command aggregator runs the multi-jurisdiction infractions aggregator.
//
//	aggregator [run]                   demo: simulated portals on loopback, API on 127.0.0.1:8080
//	aggregator [run] -config FILE [-listen ADDR]
//	aggregator validate -config FILE   list every problem of a config, exit 1 if any
//	aggregator query --domain PLATE    look a query up through a running aggregator
//	aggregator watch create|get|list|delete
//	                                   manage an API key's watches on a running aggregator
//	aggregator sources check -config FILE (-domain P | -id N | -infraction ID) [-record DIR]
//	                                   call each source once and show what maps
//	aggregator sources test -config FILE [-update] DIR
//	                                   replay recorded answers offline against golden files
//	aggregator version                 the build: version, VCS revision, Go version
//	aggregator help [COMMAND]          the commands, or one command's flags
//
// An unknown command, flag or argument exits 2 with the usage on stderr,
// and nothing starts (SPEC 10).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/correlation"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/server"
	"github.com/multas/aggregator/tracing"
)

func main() {
	if pct, ok := gcPercent(os.Getenv); ok {
		debug.SetGCPercent(pct)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal starts a graceful shutdown; a second one ends the
	// process at once, as without a handler.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintln(os.Stderr, "aggregator:", err)
		}
		os.Exit(exitCode(err))
	}
}

// errReported means the details were already written for the user.
var errReported = errors.New("reported")

// exitUsage is the exit status of a command line that cannot be run: an
// unknown command, flag or argument. Nothing was started.
const exitUsage exitStatus = 2

const usage = `usage: aggregator [command] [flags]

Commands:
  run            serve the API (the default command): over the portals of -config FILE,
                 or, without -config, a demo over simulated portals on loopback
  validate       check a configuration file and list every problem in it (-config FILE)
  query          look up infractions through a running aggregator (--domain or --id)
  watch          manage an API key's watches on a running aggregator: watch create, get,
                 list, delete (SPEC 15; the changes are posted to a callback)
  sources check  call each configured source once, outside the breakers, and show the
                 exchange and how every item maps (-config FILE, -domain, -id or -infraction;
                 -record DIR also writes it as DIR/<source>.har, secrets masked)
  sources test   replay DIR/<source>.har files offline through their sources and compare the
                 infractions with DIR/<source>.golden.json (-config FILE DIR; -update writes them)
  version        print the version, the VCS revision and the Go version
  help [COMMAND] print this help, or the usage and flags of COMMAND

An unknown command, flag or argument exits 2 with the usage on stderr.
'aggregator help COMMAND' (or 'aggregator COMMAND -h') lists a command's flags.
The flags of run:
`

// run is the whole program, testable: it returns when ctx ends (after a
// graceful shutdown) or on a start-up error.
// defaultGCPercent is the collector's target when GOGC is not set: a heap
// may grow to three times what is live between collections, not twice.
// A replica's live heap is small (tens of MB) and almost all it allocates
// dies with its query, so collecting half as often costs little memory
// (peak RSS 86 -> 102 MB under compare.sh's load) and about 15% of the
// CPU a query takes (docs/benchmarks.md). GOGC, when set, decides.
const defaultGCPercent = 200

// gcPercent is the GC target to set: defaultGCPercent unless the
// environment sets GOGC, which the runtime has read already.
func gcPercent(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return defaultGCPercent, true
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd, rest := "run", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, rest = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return serve(ctx, rest, getenv, stdout, stderr)
	case "validate":
		return validate(rest, getenv, stdout, stderr)
	case "query":
		return query(ctx, rest, getenv, stdout, stderr)
	case "watch":
		return watchCmd(ctx, rest, getenv, stdout, stderr)
	case "sources":
		return sourcesCmd(ctx, rest, getenv, stdout, stderr)
	case "version":
		return versionCmd(rest, stdout, stderr)
	case "help":
		return help(ctx, rest, getenv, stdout, stderr)
	}
	fmt.Fprintf(stderr, "aggregator: unknown command %q\n\n", cmd)
	printUsage(stderr)
	return exitUsage
}

// help is `aggregator help [COMMAND]`: the commands, or the usage of
// one, on stdout. An unknown command or a flag is a usage error.
func help(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		printUsage(stdout)
		return nil
	}
	topic := strings.Join(args, " ")
	switch topic {
	case "run", "validate", "query", "sources", "sources check", "sources test", "version", "help",
		"watch", "watch create", "watch get", "watch list", "watch delete":
		// What COMMAND -h prints, on stdout; -h never runs anything.
		return run(ctx, append(slices.Clone(args), "-h"), getenv, stdout, stdout)
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "aggregator help: flag provided but not defined: %s\n\n", args[0])
	} else {
		fmt.Fprintf(stderr, "aggregator help: unknown command %q\n\n", topic)
	}
	printUsage(stderr)
	return exitUsage
}

// serveFlags are the flags of run.
type serveFlags struct {
	fs       *flag.FlagSet
	config   *string
	listen   *string
	logLevel *string
	version  *bool
}

func newServeFlags(out io.Writer) serveFlags {
	fs := flag.NewFlagSet("aggregator", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {} // printed by the caller, to stdout for -h
	return serveFlags{
		fs:       fs,
		config:   fs.String("config", "", "YAML configuration `file`; without it, a demo with simulated portals"),
		listen:   fs.String("listen", "", "listen `address`, overriding server.listen (the demo: loopback only)"),
		logLevel: fs.String("log-level", "info", "log level: debug, info, warn, error"),
		version:  fs.Bool("version", false, "print the version, the VCS revision and the Go version, and exit"),
	}
}

// printUsage writes the commands and the flags of run.
func printUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	f := newServeFlags(w)
	f.fs.PrintDefaults()
}

// serve is the run command: the API over the configured portals, or the
// demo.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newServeFlags(stderr)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return nil
		}
		fmt.Fprintln(stderr) // after flag's own message
		printUsage(stderr)
		return exitUsage
	}
	if f.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "aggregator: unexpected arguments: %s\n\n", strings.Join(f.fs.Args(), " "))
		printUsage(stderr)
		return exitUsage
	}
	if *f.version {
		printVersion(stdout, buildInfo(version, debug.ReadBuildInfo))
		return nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*f.logLevel)); err != nil {
		fmt.Fprintf(stderr, "aggregator: -log-level %q: want debug, info, warn or error\n\n", *f.logLevel)
		printUsage(stderr)
		return exitUsage
	}
	if *f.config == "" && *f.listen != "" && !loopback(*f.listen) {
		fmt.Fprintf(stderr, "aggregator: -listen %q: the demo (no -config) listens on loopback only "+
			"(127.0.0.1, ::1 or localhost, with a port); to serve on other addresses, run with -config FILE\n\n", *f.listen)
		printUsage(stderr)
		return exitUsage
	}
	// Log lines written about a request carry its request_id, and its
	// trace_id when tracing is on.
	var hooks []correlation.AttrsFunc
	if tracing.Enabled(getenv) {
		hooks = append(hooks, tracing.LogAttrs)
	}
	logger := correlation.Logger(slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})), hooks...)
	// go-redis reports reconnection attempts through a process-wide logger;
	// our stores already say once when Redis goes and comes back.
	redis.SetLogger(redisLog{logger})

	var cfg *config.Config
	var demo *portalsim.Server
	if *f.config == "" {
		var err error
		demo, cfg, err = startDemo(*f.listen, getenv)
		if err != nil {
			return err
		}
		defer demo.Close()
	} else {
		var err error
		cfg, err = config.Load(*f.config, getenv)
		if err != nil {
			return reportConfig(stderr, err)
		}
		if *f.listen != "" {
			if err := cfg.SetListen(*f.listen); err != nil {
				fmt.Fprintf(stderr, "aggregator: -listen: %v\n\n", err)
				printUsage(stderr)
				return exitUsage
			}
		}
	}

	tr, err := setupTracing(ctx, getenv, logger)
	if err != nil {
		return err
	}
	defer tr.Shutdown()
	a, err := app.New(cfg, app.Options{Logger: logger, Build: buildInfo(version, debug.ReadBuildInfo),
		TracerProvider: tr.Provider, Propagator: tr.Propagator})
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	srv := server.HTTPServer(cfg.Server.Listen, a.Server, time.Duration(cfg.Server.ReadTimeout), time.Duration(cfg.Query.MaxDeadline))
	logger.Info("listening", "addr", ln.Addr().String(), "sources", len(cfg.Sources))
	if demo != nil {
		printDemo(stdout, demo, "http://"+ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return drain(logger, a.Server, srv, errc, time.Duration(cfg.Server.ShutdownDelay), time.Duration(cfg.Server.ShutdownTimeout))
}

// drain shuts the server down gracefully (SPEC 10): /readyz answers 503 at
// once while requests are still served for delay, so that load balancers
// notice; then the server stops accepting, and in-flight requests have up
// to timeout to finish. errc is the result of srv.Serve.
func drain(logger *slog.Logger, s *server.Server, srv *http.Server, errc <-chan error, delay, timeout time.Duration) error {
	s.Drain()
	logger.Info("draining: /readyz answers 503, requests are still served",
		"shutdown_delay", delay.String(), "shutdown_timeout", timeout.String())
	wait := time.NewTimer(delay)
	select {
	case <-wait.C:
	case err := <-errc:
		wait.Stop()
		return err
	}
	logger.Info("shutting down: no new connections, waiting for the requests in flight")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
		<-errc
		return fmt.Errorf("requests still in flight after server.shutdown_timeout (%v) were cut off: %w", timeout, err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}

// loopback reports whether the listen address addr is on loopback only:
// localhost or a loopback IP, with a port.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func validate(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: aggregator validate -config FILE\n\nLists every problem of a configuration; exit status 1 if there is any,\n2 for a command line that cannot be run.\n\n")
		fs.PrintDefaults()
	}
	cfgPath := fs.String("config", "", "YAML configuration `file` to check")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "aggregator validate: unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return exitUsage
	case *cfgPath == "":
		fmt.Fprintln(stderr, "aggregator validate: -config FILE is required")
		fs.Usage()
		return exitUsage
	}
	cfg, err := config.Load(*cfgPath, getenv)
	if err == nil {
		err = app.CheckSources(cfg, nil)
	}
	if err != nil {
		return reportConfig(stderr, err)
	}
	fmt.Fprintf(stdout, "%s: valid (%d sources)\n", *cfgPath, len(cfg.Sources))
	return nil
}

// reportConfig lists every problem of a config, one per line.
func reportConfig(stderr io.Writer, err error) error {
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(stderr, e.Error())
		}
		fmt.Fprintf(stderr, "%d problem(s) in the configuration\n", len(errs))
		return errReported
	}
	return err
}

// startDemo runs the simulated jurisdictions on loopback and returns the
// configuration that points the aggregator at them.
func startDemo(listen string, getenv func(string) string) (*portalsim.Server, *config.Config, error) {
	sim, err := portalsim.Start(portalsim.DemoAll())
	if err != nil {
		return nil, nil, fmt.Errorf("demo portals: %w", err)
	}
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	token := getenv("AGGREGATOR_ADMIN_TOKEN")
	if token == "" {
		token = "demo-admin-token"
	}
	var b strings.Builder
	// On loopback, no load balancer has to notice a drain: a short one.
	fmt.Fprintf(&b, "server: {listen: %q, admin_token: %q, shutdown_delay: 1s}\n", listen, token)
	fmt.Fprintf(&b, "problems: {base_uri: %q}\n", "http://"+listen+"/problems/")
	b.WriteString("query: {deadline: 3s, max_deadline: 10s}\n")
	b.WriteString("defaults:\n  breaker: {window: 60s, min_calls: 4, failure_ratio: 0.5, open_for: 20s}\n")
	b.WriteString(portalsim.AggregatorYAML(portalsim.DemoAll(), sim.URLs()))
	cfg, err := config.Parse([]byte(b.String()), "demo.yaml", getenv)
	if err != nil {
		sim.Close()
		return nil, nil, fmt.Errorf("demo config: %w", err)
	}
	return sim, cfg, nil
}

func printDemo(w io.Writer, sim *portalsim.Server, api string) {
	fmt.Fprintln(w, "Demo: simulated jurisdiction portals on loopback:")
	for _, p := range sim.Portals() {
		j := p.Jurisdiction()
		fmt.Fprintf(w, "  %-10s %-34s %-10s %s\n", j.ID, j.Name, p.Fault().Mode, sim.URL(j.ID))
	}
	fmt.Fprintf(w, "\nAPI on %s (dashboard: %s/, admin token: see AGGREGATOR_ADMIN_TOKEN or demo-admin-token)\n\n", api, api)
	fmt.Fprintln(w, "Try:")
	fmt.Fprintf(w, "  curl -s '%s/v1/infractions?domain=%s&sources=caba,cordoba'   # complete\n", api, portalsim.DemoPlate)
	fmt.Fprintf(w, "  curl -s '%s/v1/infractions?domain=%s&sources=neuquen,tucuman'   # SOAP and an HTML table in windows-1252\n", api, portalsim.DemoPlate)
	fmt.Fprintf(w, "  curl -s '%s/v1/infractions?domain=%s&sources=chubut,entrerios,misiones'   # paginated, OAuth2, session page\n", api, portalsim.DemoPlate)
	fmt.Fprintf(w, "  curl -s '%s/v1/infractions?domain=%s'                        # partial: some portals are down, slow or throttling\n", api, portalsim.DemoPlate)
}

// redisLog sends go-redis's own messages to our logger at debug level.
type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
