package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/problem"
)

// exitStatus ends the program with its code; what happened has already
// been written for the user. It counts as errReported.
type exitStatus int

// The exit statuses of `aggregator query` (and exitUsage, for a command
// line that cannot be run: the same 2 as a partial result, told apart by
// the usage on stderr).
const (
	exitPartial exitStatus = 2 // a result, but some sources did not succeed
	exitFailed  exitStatus = 1 // no result
)

func (s exitStatus) Error() string        { return "exit status " + strconv.Itoa(int(s)) }
func (s exitStatus) Is(target error) bool { return target == errReported }

// exitCode is the process exit status for run's error.
func exitCode(err error) int {
	var s exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &s):
		return int(s)
	}
	return 1
}

const queryUsage = `usage: aggregator query (--domain PLATE | --id CUIT/DNI) [flags]

Looks up infractions through a running aggregator; with --stream, each
source's part is printed as soon as it has answered. Exit status:
  0  every source answered
  1  no result: the server refused the query (its problem is printed on
     stderr) or could not be reached
  2  a partial result (some sources did not answer; printed on stdout), or a
     command line that cannot be run (an unknown flag, a bad or missing
     argument), in which case nothing is asked and this usage is printed on
     stderr

`

// query is `aggregator query`: one synchronous query through the client
// package, printed as tables (or the JSON document).
func query(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, queryUsage)
		fs.PrintDefaults()
	}
	domain := fs.String("domain", "", "vehicle domain (plate), e.g. AB123CD")
	id := fs.String("id", "", "person's CUIT/CUIL or DNI")
	sources := fs.String("sources", "", "comma-separated source `ids` to restrict the query to")
	timeout := fs.Duration("timeout", 0, "the query's budget on the server, e.g. 2.5s (default: the server's query.deadline)")
	server := fs.String("server", "http://127.0.0.1:8080", "the aggregator's base `URL`")
	apiKey := fs.String("api-key", "", "X-API-Key to send (default: $AGGREGATOR_API_KEY)")
	output := fs.String("o", "table", "output `format`: table or json")
	stream := fs.Bool("stream", false, "print each source's part as it arrives (json: one event a line), then the summary")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitUsage // flag printed the error and the usage
	}
	usage := func(msg string) error {
		fmt.Fprintf(stderr, "aggregator query: %s\n\n", msg)
		fs.Usage()
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return usage("unexpected arguments: " + strings.Join(fs.Args(), " "))
	case (*domain == "") == (*id == ""):
		return usage("exactly one of --domain and --id is required")
	case *output != "table" && *output != "json":
		return usage(fmt.Sprintf("-o %q: want table or json", *output))
	case *timeout < 0:
		return usage("--timeout must be positive")
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
	var qopts []client.QueryOption
	if *sources != "" {
		qopts = append(qopts, client.WithSources(strings.Split(*sources, ",")...))
	}
	if *timeout > 0 {
		qopts = append(qopts, client.WithTimeout(*timeout))
	}
	// The server bounds the query; this only guards against a server that
	// never answers.
	ctx, cancel := context.WithTimeout(ctx, max(time.Minute, *timeout+10*time.Second))
	defer cancel()
	if *stream {
		return queryStream(ctx, c, *domain, *id, *output, qopts, stdout, stderr)
	}
	var res *aggregator.Result
	if *domain != "" {
		res, err = c.ByDomain(ctx, *domain, qopts...)
	} else {
		res, err = c.ByID(ctx, *id, qopts...)
	}

	if err != nil {
		return reportQueryError(stdout, stderr, *output, err, true)
	}
	if *output == "json" {
		if err := printJSON(stdout, res); err != nil {
			return err
		}
	} else {
		printResult(stdout, res)
	}
	return resultStatus(res)
}

// resultStatus is the exit status of a result: 0 complete, 2 partial.
func resultStatus(res *aggregator.Result) error {
	if !res.Complete {
		return exitPartial
	}
	return nil
}

// queryStream is `aggregator query --stream`: each source's part printed
// as it arrives (a few lines each, or with -o json one event a line, as
// the server's NDJSON), then the summary. Exit statuses are the same.
func queryStream(ctx context.Context, c *client.Client, domain, id, output string, qopts []client.QueryOption, stdout, stderr io.Writer) error {
	each := func(p aggregator.Part) error {
		if output == "json" {
			return json.NewEncoder(stdout).Encode(aggregator.SourceEvent{Type: aggregator.EventSource, Part: p})
		}
		printPart(stdout, p)
		return nil
	}
	var res *aggregator.Result
	var err error
	if domain != "" {
		res, err = c.StreamByDomain(ctx, domain, each, qopts...)
	} else {
		res, err = c.StreamByID(ctx, id, each, qopts...)
	}
	var u *client.Unavailable
	switch {
	case errors.As(err, &u) && output == "json":
		// The stream's last line is its summary, the problem in it.
		q, _ := aggregator.NewQuery(domain, id, domain != "", id != "")
		sum := aggregator.NewSummaryEvent(aggregator.NewResult(q, u.Sources, nil))
		sum.Problem = u.Problem
		if err := json.NewEncoder(stdout).Encode(sum); err != nil {
			return err
		}
		return reportQueryError(io.Discard, stderr, output, err, false)
	case err != nil:
		// The sources were printed as they came.
		return reportQueryError(stdout, stderr, output, err, false)
	}
	if output == "json" {
		if err := json.NewEncoder(stdout).Encode(aggregator.NewSummaryEvent(*res)); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout)
		printHeadline(stdout, res)
	}
	return resultStatus(res)
}

// printPart writes one source's part: a line for its entry, then one per
// infraction, indented.
func printPart(w io.Writer, p aggregator.Part) {
	line := p.Source + ": " + p.Status
	if p.Count != nil {
		line += fmt.Sprintf(", %d found", *p.Count)
	}
	if p.DurationMS != nil && p.Remembered == nil {
		line += fmt.Sprintf(" in %v", time.Duration(*p.DurationMS)*time.Millisecond)
	}
	if p.Problem != nil {
		line += ", " + string(p.Problem.Slug)
		if d, ok := client.RetryAfter(p.Problem); ok {
			line += fmt.Sprintf(" (retry after %v)", d)
		}
	}
	if p.Remembered != nil {
		line += "; remembered, as of " + p.Remembered.AsOf.Format(time.RFC3339)
	}
	fmt.Fprintln(w, line)
	for _, in := range p.Infractions {
		fields := []string{in.ID, dash(in.Date), dash(strings.TrimSpace(in.Amount + " " + in.Currency)), string(in.Status), dash(in.Description)}
		if in.Stale {
			fields = append(fields, "(stale)")
		}
		fmt.Fprintln(w, "  "+strings.Join(fields, "  "))
	}
}

// reportQueryError prints a failed query: the problem on stderr and, for
// no-source-available, the sources table when withSources (or, with -o
// json, the problem document on stdout).
func reportQueryError(stdout, stderr io.Writer, output string, err error, withSources bool) error {
	var p *problem.Problem
	if !errors.As(err, &p) {
		fmt.Fprintln(stderr, "aggregator query:", err)
		return exitFailed
	}
	var u *client.Unavailable
	isUnavailable := errors.As(err, &u)
	if output == "json" {
		var doc any = p
		if isUnavailable {
			doc = u
		}
		if err := printJSON(stdout, doc); err != nil {
			return err
		}
	} else if isUnavailable && withSources {
		printSources(stdout, u.Sources)
	}
	fmt.Fprintf(stderr, "aggregator query: %s (%d %s)\n", p.Error(), p.Status, p.Slug)
	for _, ip := range p.InvalidParams {
		fmt.Fprintf(stderr, "  %s: %s\n", ip.Name, ip.Reason)
	}
	if d, ok := client.RetryAfter(err); ok {
		fmt.Fprintf(stderr, "  retry after %v\n", d)
	}
	return exitFailed
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printResult writes a result as two tables: the sources, then the
// infractions.
func printResult(w io.Writer, res *aggregator.Result) {
	printHeadline(w, res)
	fmt.Fprintln(w)
	printSources(w, res.Sources)
	fmt.Fprintln(w)
	if len(res.Infractions) == 0 {
		fmt.Fprintln(w, "No infractions found.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tID\tDATE\tAMOUNT\tSTATUS\tDESCRIPTION")
	for _, in := range res.Infractions {
		amount := strings.TrimSpace(in.Amount + " " + in.Currency)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n",
			in.Source, in.ID, dash(in.Date), dash(amount), in.Status, dash(in.Description))
	}
	tw.Flush()
}

// printHeadline writes what a result comes to, in one line.
func printHeadline(w io.Writer, res *aggregator.Result) {
	subject := res.Query.Domain
	if subject == "" {
		subject = res.Query.ID
	}
	state := "complete"
	if !res.Complete {
		state = "partial"
	}
	s := res.Summary
	fmt.Fprintf(w, "%s: %s, %d of %d sources succeeded (%d failed, %d skipped)\n",
		subject, state, s.Succeeded, s.Total, s.Failed, s.Skipped)
}

// printSources writes one row per source.
func printSources(w io.Writer, entries []aggregator.SourceResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tSTATUS\tCOUNT\tPROBLEM\tRETRY AFTER\tDURATION")
	for _, e := range entries {
		count, slug, retry, duration := "-", "-", "-", "-"
		if e.Count != nil {
			count = strconv.Itoa(*e.Count)
		}
		if e.DurationMS != nil {
			duration = (time.Duration(*e.DurationMS) * time.Millisecond).String()
		}
		if e.Problem != nil {
			slug = string(e.Problem.Slug)
			if d, ok := client.RetryAfter(e.Problem); ok {
				retry = d.String()
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Source, e.Status, count, slug, retry, duration)
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
