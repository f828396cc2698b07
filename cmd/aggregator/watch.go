package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/problem"
)

const watchUsage = `usage: aggregator watch create (--domain PLATE | --id CUIT/DNI) --callback URL [flags]
       aggregator watch get ID [flags]
       aggregator watch list [--cursor C] [--limit N] [--all] [flags]
       aggregator watch delete ID [flags]
       aggregator watch receive [--listen ADDR] [--secret WHSEC]

Manages the watches of an API key on a running aggregator (SPEC 15): a
vehicle or a person checked every interval, whose changes (a new
infraction, one paid) are posted to the callback, signed with the key's
webhook secret. The aggregator needs a watches block and API keys.
watch receive is such a callback, for trying watches out: it verifies each
delivery's signature and prints what changed, until interrupted.
Exit status: 0 done; 1 the server refused (its problem is printed on
stderr) or could not be reached; 2 a command line that cannot be run
(nothing is asked, this usage is printed on stderr).

`

// watchCmd is `aggregator watch SUBCOMMAND`: the client package's watch
// methods, printed as tables (or the JSON documents).
func watchCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "create", "get", "list", "delete":
	case "receive":
		return watchReceive(ctx, args, getenv, stdout, stderr)
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, watchUsage)
		return nil
	case "":
		fmt.Fprint(stderr, "aggregator watch: a subcommand is required (create, get, list, delete, receive)\n\n")
		fmt.Fprint(stderr, watchUsage)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "aggregator watch: unknown subcommand %q (known: create, get, list, delete, receive)\n\n", sub)
		fmt.Fprint(stderr, watchUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("watch "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, watchUsage)
		fs.PrintDefaults()
	}
	server := fs.String("server", "http://127.0.0.1:8080", "the aggregator's base `URL`")
	apiKey := fs.String("api-key", "", "X-API-Key to send (default: $AGGREGATOR_API_KEY)")
	output := fs.String("o", "table", "output `format`: table or json")
	var domain, id, callback, sources, cursor *string
	var interval *time.Duration
	var limit *int
	var all *bool
	switch sub {
	case "create":
		domain = fs.String("domain", "", "vehicle domain (plate) to watch, e.g. AB123CD")
		id = fs.String("id", "", "person's CUIT/CUIL or DNI to watch")
		callback = fs.String("callback", "", "the `URL` the changes are posted to (required)")
		sources = fs.String("sources", "", "comma-separated source `ids` to restrict the watch to (default: every source)")
		interval = fs.Duration("interval", 0, "how often to check, e.g. 24h (default: the server's watches.default_interval)")
	case "list":
		cursor = fs.String("cursor", "", "the next_cursor of a previous page")
		limit = fs.Int("limit", 0, "watches per page, 1 to 100 (default: the server's, 50)")
		all = fs.Bool("all", false, "follow next_cursor to the last page")
	}
	// The watch id may come before the flags (watch get ID -o json) or
	// after them.
	var target string
	if (sub == "get" || sub == "delete") && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		target, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitUsage // flag printed the error and the usage
	}
	rest := fs.Args()
	if target == "" && (sub == "get" || sub == "delete") && len(rest) > 0 {
		target, rest = rest[0], rest[1:]
	}
	usage := func(msg string) error {
		fmt.Fprintf(stderr, "aggregator watch %s: %s\n\n", sub, msg)
		fs.Usage()
		return exitUsage
	}
	switch {
	case len(rest) > 0:
		return usage("unexpected arguments: " + strings.Join(rest, " "))
	case *output != "table" && *output != "json":
		return usage(fmt.Sprintf("-o %q: want table or json", *output))
	case (sub == "get" || sub == "delete") && target == "":
		return usage("the watch id is required")
	case sub == "create" && (*domain == "") == (*id == ""):
		return usage("exactly one of --domain and --id is required")
	case sub == "create" && *callback == "":
		return usage("--callback is required")
	case sub == "create" && *interval < 0:
		return usage("--interval must be positive")
	case sub == "list" && (*limit < 0 || *limit > 100):
		return usage("--limit must be between 1 and 100")
	}
	if *apiKey == "" {
		*apiKey = getenv("AGGREGATOR_API_KEY")
	}
	var opts []client.Option
	if *apiKey != "" {
		opts = append(opts, client.WithAPIKey(*apiKey))
	}
	c, err := client.New(*server, opts...)
	if err != nil {
		return usage(err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	report := func(err error) error { return reportWatchError(stderr, sub, err) }
	switch sub {
	case "create":
		r := client.WatchRequest{Domain: *domain, ID: *id, CallbackURL: *callback, Interval: *interval}
		if *sources != "" {
			r.Sources = strings.Split(*sources, ",")
		}
		w, err := c.CreateWatch(ctx, r)
		if err != nil {
			return report(err)
		}
		return printWatch(stdout, *output, w)
	case "get":
		w, err := c.GetWatch(ctx, target)
		if err != nil {
			return report(err)
		}
		return printWatch(stdout, *output, w)
	case "delete":
		if err := c.DeleteWatch(ctx, target); err != nil {
			return report(err)
		}
		if *output == "table" {
			fmt.Fprintf(stdout, "watch %s deleted\n", target)
		}
		return nil
	}
	// list
	var pages []*client.WatchList
	next := *cursor
	for {
		l, err := c.ListWatches(ctx, next, *limit)
		if err != nil {
			return report(err)
		}
		pages = append(pages, l)
		if !*all || l.NextCursor == nil {
			break
		}
		next = *l.NextCursor
	}
	if *output == "json" {
		if len(pages) == 1 {
			return printJSON(stdout, pages[0])
		}
		merged := &client.WatchList{Watches: []client.Watch{}}
		for _, p := range pages {
			merged.Watches = append(merged.Watches, p.Watches...)
		}
		return printJSON(stdout, merged)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WATCH\tSUBJECT\tINTERVAL\tNEXT CHECK\tLAST CHECK\tSOURCES")
	n := 0
	for _, p := range pages {
		for _, w := range p.Watches {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", w.WatchID, watchSubject(w), w.Interval, w.NextCheckAt.Format(time.RFC3339),
				timeOrDash(w.LastCheckAt), len(w.Sources))
			n++
		}
	}
	tw.Flush()
	if n == 0 {
		fmt.Fprintln(stdout, "No watches.")
	}
	if last := pages[len(pages)-1]; last.NextCursor != nil {
		fmt.Fprintf(stdout, "More: aggregator watch list --cursor %s (or --all)\n", *last.NextCursor)
	}
	return nil
}

// printWatch writes one watch: its members, then one row per source.
func printWatch(w io.Writer, output string, wt *client.Watch) error {
	if output == "json" {
		return printJSON(w, wt)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range [][2]string{
		{"watch", wt.WatchID}, {"subject", watchSubject(*wt)}, {"callback", wt.CallbackURL}, {"interval", wt.Interval.String()},
		{"created", wt.CreatedAt.Format(time.RFC3339)}, {"next check", wt.NextCheckAt.Format(time.RFC3339)},
		{"last check", timeOrDash(wt.LastCheckAt)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tLAST SUCCESS\tPROBLEM")
	for _, s := range wt.Sources {
		slug := "-"
		if s.Problem != nil {
			slug = string(s.Problem.Slug)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Source, timeOrDash(s.LastSuccessAt), slug)
	}
	return tw.Flush()
}

// watchSubject is the plate or id a watch is about.
func watchSubject(w client.Watch) string {
	if w.Subject.Domain != "" {
		return w.Subject.Domain
	}
	return w.Subject.ID
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// reportWatchError prints a refused request: its problem and what was
// wrong with each parameter.
func reportWatchError(stderr io.Writer, sub string, err error) error {
	var p *problem.Problem
	if !errors.As(err, &p) {
		fmt.Fprintf(stderr, "aggregator watch %s: %v\n", sub, err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "aggregator watch %s: %s (%d %s)\n", sub, p.Error(), p.Status, p.Slug)
	for _, ip := range p.InvalidParams {
		fmt.Fprintf(stderr, "  %s: %s\n", ip.Name, ip.Reason)
	}
	return exitFailed
}
