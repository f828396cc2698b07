// Command chaos runs the aggregator's chaos suite in its long mode: faults
// that change on a schedule under steady load, against three replicas,
// independent and sharing state through Redis, with every invariant of
// package chaos checked as it goes. It prints a summary table per variant
// and exits 1 when any invariant was broken.
//
//	go run ./cmd/chaos -duration 5m -variant both
//
// An interrupt ends the chaos phase early; the recovery check and the
// summary still come.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/multas/aggregator/chaos"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errBroken) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

// errBroken is returned when a run broke an invariant (the summary says
// which); other errors are a run that could not be made.
var errBroken = errors.New("invariants broken")

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := getenv("AGGREGATOR_TEST_REDIS")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	var (
		duration = fs.Duration("duration", 5*time.Minute, "how long the faults change under load, per variant")
		variant  = fs.String("variant", "both", "memory (independent replicas), redis (shared state) or both")
		redis    = fs.String("redis", redisURL, "Redis of the redis variant ($AGGREGATOR_TEST_REDIS when set)")
		portals  = fs.Int("portals", 20, "simulated portals")
		replicas = fs.Int("replicas", 3, "aggregator replicas")
		workers  = fs.Int("workers", 4, "clients sending requests, one at a time each")
		think    = fs.Duration("think", 100*time.Millisecond, "mean pause between a worker's requests")
		timeout  = fs.Duration("timeout", time.Second, "the timeout parameter of every query")
		margin   = fs.Duration("margin", 500*time.Millisecond, "how far past its budget an answer may come")
		seed     = fs.Uint64("seed", 0, "seed of the data and the fault schedule (0: random)")
		quiet    = fs.Bool("quiet", false, "print the summaries only, not the progress")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("chaos: unexpected arguments: %v", fs.Args())
	}
	var variants []chaos.Variant
	switch *variant {
	case "both":
		variants = []chaos.Variant{chaos.Memory, chaos.Redis}
	case string(chaos.Memory), string(chaos.Redis):
		variants = []chaos.Variant{chaos.Variant(*variant)}
	default:
		return fmt.Errorf("chaos: -variant %q: want memory, redis or both", *variant)
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := func(format string, args ...any) {
		if !*quiet {
			fmt.Fprintf(stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		}
	}
	broken := false
	for _, v := range variants {
		if ctx.Err() != nil {
			break
		}
		rep, err := chaos.Run(ctx, chaos.Options{
			Variant: v, RedisURL: *redis, Duration: *duration, Portals: *portals, Replicas: *replicas,
			Workers: *workers, Think: *think, QueryTimeout: *timeout, Margin: *margin, Seed: *seed, Progress: progress,
		})
		if rep != nil {
			rep.WriteSummary(stdout)
			fmt.Fprintln(stdout)
			broken = broken || rep.Failed()
		}
		if err != nil {
			return err
		}
	}
	if broken {
		return errBroken
	}
	return nil
}
