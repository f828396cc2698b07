// Command aggregator runs the multi-jurisdiction infractions aggregator.
//
//	aggregator                         demo: simulated portals on loopback, API on 127.0.0.1:8080
//	aggregator -config FILE [-listen ADDR]
//	aggregator validate -config FILE   list every problem of a config, exit 1 if any
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
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintln(os.Stderr, "aggregator:", err)
		}
		os.Exit(exitCode(err))
	}
}

// errReported means the details were already written for the user.
var errReported = errors.New("reported")

// run is the whole program, testable: it returns when ctx ends (after a
// graceful shutdown) or on a start-up error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "validate" {
		return validate(args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "query" {
		return query(ctx, args[1:], getenv, stdout, stderr)
	}
	fs := flag.NewFlagSet("aggregator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "YAML configuration `file`; without it, a demo with simulated portals")
	listen := fs.String("listen", "", "listen `address`, overriding server.listen")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return errReported
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	// go-redis reports reconnection attempts through a process-wide logger;
	// our stores already say once when Redis goes and comes back.
	redis.SetLogger(redisLog{logger})

	var cfg *config.Config
	var demo *portalsim.Server
	if *cfgPath == "" {
		var err error
		demo, cfg, err = startDemo(*listen, getenv)
		if err != nil {
			return err
		}
		defer demo.Close()
	} else {
		var err error
		cfg, err = config.Load(*cfgPath, getenv)
		if err != nil {
			return reportConfig(stderr, err)
		}
		if *listen != "" {
			if err := cfg.SetListen(*listen); err != nil {
				return fmt.Errorf("-listen: %w", err)
			}
		}
	}

	a, err := app.New(cfg, app.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	srv := server.HTTPServer(cfg.Server.Listen, a.Server, time.Duration(cfg.Query.MaxDeadline))
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
	// In-flight queries finish within their budget.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Query.MaxDeadline)+2*time.Second)
	defer cancel()
	logger.Info("shutting down")
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func validate(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "YAML configuration `file` to check")
	if err := fs.Parse(args); err != nil {
		return errReported
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "validate: -config FILE is required")
		return errReported
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
	sim, err := portalsim.Start(portalsim.Demo())
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
	fmt.Fprintf(&b, "server: {listen: %q, admin_token: %q}\n", listen, token)
	fmt.Fprintf(&b, "problems: {base_uri: %q}\n", "http://"+listen+"/problems/")
	b.WriteString("query: {deadline: 3s, max_deadline: 10s}\n")
	b.WriteString("defaults:\n  breaker: {window: 60s, min_calls: 4, failure_ratio: 0.5, open_for: 20s}\n")
	b.WriteString(portalsim.AggregatorYAML(portalsim.Demo(), sim.URLs()))
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
	fmt.Fprintf(w, "  curl -s '%s/v1/infractions?domain=%s'                        # partial: some portals are down, slow or throttling\n", api, portalsim.DemoPlate)
}

// redisLog sends go-redis's own messages to our logger at debug level.
type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}
