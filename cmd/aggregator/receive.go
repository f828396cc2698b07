package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/client"
)

// watchReceive is `aggregator watch receive`: a webhook receiver for
// trying watches out. Each delivery is verified (Standard Webhooks, with
// the API key's secret), deduplicated on its webhook-id, and printed; a
// delivery that does not verify is refused with 401.
func watchReceive(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("watch receive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, watchUsage)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:9999", "`address` to receive deliveries on")
	secret := fs.String("secret", "", "the API key's webhook secret, whsec_… (default: $AGGREGATOR_WEBHOOK_SECRET)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitUsage
	}
	if *secret == "" {
		*secret = getenv("AGGREGATOR_WEBHOOK_SECRET")
	}
	usage := func(msg string) error {
		fmt.Fprintf(stderr, "aggregator watch receive: %s\n\n", msg)
		fs.Usage()
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return usage("unexpected arguments: " + strings.Join(fs.Args(), " "))
	case *secret == "":
		return usage("--secret (or $AGGREGATOR_WEBHOOK_SECRET) is required: deliveries are verified")
	}
	if _, err := client.SignWebhook(*secret, "x", time.Now(), nil); err != nil {
		return usage("--secret: " + err.Error())
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	r := &receiver{secret: *secret, out: stdout, seen: map[string]bool{}}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "receiving deliveries on http://%s/ (Ctrl-C stops)\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-done:
		return err
	}
}

// receiver verifies and prints deliveries.
type receiver struct {
	secret string
	out    io.Writer

	mu   sync.Mutex
	seen map[string]bool // webhook-ids printed
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	id := r.Header.Get(client.HeaderWebhookID)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := client.VerifyWebhook(rc.secret, r.Header, body, 0, time.Now()); err != nil {
		fmt.Fprintf(rc.out, "\n%s refused: %v\n", time.Now().Format(time.TimeOnly), err)
		http.Error(w, "not verified", http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusNoContent)
	if rc.seen[id] {
		fmt.Fprintf(rc.out, "\n%s %s again (a retry, or a check run twice): already shown\n", time.Now().Format(time.TimeOnly), id)
		return
	}
	rc.seen[id] = true
	var typ struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &typ)
	if typ.Type != client.EventInfractionsChanged {
		fmt.Fprintf(rc.out, "\n%s %s verified: %s\n", time.Now().Format(time.TimeOnly), id, typ.Type)
		return
	}
	var ev client.WatchEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		fmt.Fprintf(rc.out, "\n%s %s verified, but not a watch event: %v\n", time.Now().Format(time.TimeOnly), id, err)
		return
	}
	printWatchEvent(rc.out, id, ev)
}

// printWatchEvent writes what a watch's delivery says.
func printWatchEvent(w io.Writer, id string, ev client.WatchEvent) {
	d := ev.Data
	subject := d.Subject.Domain
	if subject == "" {
		subject = d.Subject.ID
	}
	kind := "changes"
	if d.Baseline {
		kind = "baseline"
	}
	fmt.Fprintf(w, "\n%s %s verified: watch %s, %s, %s checked at %s\n", time.Now().Format(time.TimeOnly), id, d.WatchID,
		subject, kind, d.CheckedAt.Format(time.RFC3339))
	if len(d.BaselineSources) > 0 {
		fmt.Fprintf(w, "  first read of: %s\n", strings.Join(d.BaselineSources, ", "))
	}
	line := func(mark string, in aggregator.Infraction) {
		amount := strings.TrimSpace(in.Amount + " " + in.Currency)
		fmt.Fprintf(w, "  %s %s %s %s %s %s\n", mark, in.Source, in.ID, dash(in.Date), dash(amount), in.Status)
	}
	for _, in := range d.Changes.Added {
		line("+", in)
	}
	for _, in := range d.Changes.Removed {
		line("-", in)
	}
	for _, c := range d.Changes.Changed {
		line("~", c.After)
		fmt.Fprintf(w, "      was %s %s %s\n", dash(c.Before.Date), dash(strings.TrimSpace(c.Before.Amount+" "+c.Before.Currency)), c.Before.Status)
	}
	if len(d.Changes.Added)+len(d.Changes.Removed)+len(d.Changes.Changed) == 0 {
		fmt.Fprintln(w, "  no infractions")
	}
}
