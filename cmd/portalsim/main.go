// Command portalsim runs simulated jurisdiction portals with fault
// injection, for benchmarks, tests and demos:
//
//	portalsim [-listen 127.0.0.1:9100] [-demo | -jurisdictions FILE] [-only ID,…] [-config-out FILE] [-gain-after 2m]
//
// The demo (the default) is portalsim.DemoAll: the seven JSON portals of
// portalsim.Demo, then one portal in each dialect of SPEC 8 (neuquen SOAP,
// tucuman an HTML table in windows-1252, chubut a paginated JSON API,
// entrerios behind OAuth2 client credentials, misiones behind a session
// page), then four real-portal shapes of SPEC 12 (sanjuan JSON in an HTML
// attribute, saopaulo a DETRAN page in windows-1252, montevideo {"error": …}
// bodies with fines in UR, cdmx HTML inside JSON with fines in UMA; the
// other shapes of portalsim.RealShapes are served from a -jurisdictions
// file). -only serves some of them, e.g. one dialect standalone:
//
//	portalsim -only tucuman
//
// The -listen address serves an index (GET / lists the portals and their
// current faults, GET /sources.yaml the aggregator's `sources:` config);
// the portals listen on the following ports, one each (9101, 9102, …), or
// on free ports when the port is 0. It prints each portal's id, dialect,
// behaviour and base URL, then the `sources:` YAML (or writes it to
// -config-out); the sources of the SPEC 8 dialects use SPEC 8's keys, those
// of SPEC 12's shapes SPEC 12's.
// Each portal's behaviour can be changed while it runs:
//
//	curl -X PUT -d '{"mode":"flaky","fail_rate":0.3,"retry_after":"5s"}' http://127.0.0.1:9101/_sim/fault
//	curl -X PUT -d '{"mode":"maintenance"}' http://127.0.0.1:9109/_sim/fault
//	curl -X PUT -d '{"mode":"captcha"}' http://127.0.0.1:9113/_sim/fault     # the portal's captcha challenge
//	curl -X PUT -d '{"mode":"busy"}' http://127.0.0.1:9113/_sim/fault        # "demasiadas consultas", in a 200
//	curl -X POST http://127.0.0.1:9111/_sim/tokens/revoke      # OAuth2: every token invalid
//	curl -X POST http://127.0.0.1:9112/_sim/sessions/expire    # session: every session ended
//	curl http://127.0.0.1:9111/_sim/calls                      # counts, tokens issued included
//
// In the demo, caba gains one more infraction for portalsim.DemoPlate
// -gain-after (default 2m) after start: a watch of that vehicle (SPEC 15)
// reports it as added.
//
// SIGINT or SIGTERM shuts it down gracefully.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/multas/aggregator/portalsim"
)

func main() {
	if err := run(context.Background(), os.Args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "portalsim:", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds the graceful shutdown.
const shutdownTimeout = 5 * time.Second

// run serves the portals until ctx is done or a signal arrives.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9100", "address of the index; the portals take the following ports (port 0: free ports)")
	demo := fs.Bool("demo", false, "serve the demo jurisdictions, one in each dialect among them (what is served without -jurisdictions)")
	file := fs.String("jurisdictions", "", "serve the jurisdictions of this JSON `file` (an array) instead of the demo")
	only := fs.String("only", "", "serve only these jurisdictions of the set, by comma-separated `ids` (e.g. tucuman)")
	configOut := fs.String("config-out", "", "write the aggregator `sources:` YAML to this `file` instead of stdout")
	gainAfter := fs.Duration("gain-after", 2*time.Minute, "with the demo, caba gains an infraction of the demo car this long after start, for a watch to notice (0: never)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *demo && *file != "" {
		return errors.New("-demo and -jurisdictions exclude each other")
	}
	if *gainAfter < 0 {
		return errors.New("-gain-after must not be negative")
	}
	js := portalsim.WithGain(portalsim.DemoAll(), *gainAfter)
	if *file != "" {
		var err error
		if js, err = readJurisdictions(*file); err != nil {
			return err
		}
	}
	if *only != "" {
		var err error
		if js, err = selectJurisdictions(js, *only); err != nil {
			return err
		}
	}

	indexLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	portalsAddr, err := nextPort(indexLn.Addr().String(), *listen)
	if err != nil {
		indexLn.Close()
		return err
	}
	sims, err := portalsim.StartAt(portalsAddr, js)
	if err != nil {
		indexLn.Close()
		return err
	}
	sources := portalsim.AggregatorYAML(js, sims.URLs())
	index := &http.Server{
		Handler:           indexHandler(sims, sources),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(stderr, "portalsim: ", 0),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- index.Serve(indexLn) }()

	if err := printBanner(stdout, "http://"+indexLn.Addr().String()+"/", sims); err != nil {
		return errors.Join(err, shutdown(index, sims))
	}
	if *file == "" && *gainAfter > 0 && sims.URL("caba") != "" {
		fmt.Fprintf(stdout, "\ncaba gains one more infraction of the demo car (%s) at %s, -gain-after %s after start: a watch of that car reports it as added.\n",
			portalsim.DemoGainID, time.Now().Add(*gainAfter).Format(time.TimeOnly), *gainAfter)
	}
	if *configOut != "" {
		if err := os.WriteFile(*configOut, []byte(sources), 0o644); err != nil {
			return errors.Join(err, shutdown(index, sims))
		}
		fmt.Fprintf(stdout, "\nAggregator sources written to %s\n", *configOut)
	} else {
		fmt.Fprintf(stdout, "\n# Aggregator config, sources section:\n%s", sources)
	}

	select {
	case <-ctx.Done():
		return shutdown(index, sims)
	case err := <-serveErr:
		return errors.Join(err, shutdown(index, sims))
	}
}

// shutdown stops the index and the portals gracefully, within
// shutdownTimeout.
func shutdown(index *http.Server, sims *portalsim.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var errs []error
	if err := index.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := sims.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// nextPort is where the portals listen: the port after the index's, or
// free ports (port 0) when the index itself asked for a free port.
func nextPort(bound, asked string) (string, error) {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return "", err
	}
	if _, askedPort, err := net.SplitHostPort(asked); err == nil && askedPort == "0" {
		return net.JoinHostPort(host, "0"), nil
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1)), nil
}

// readJurisdictions reads a JSON array of portalsim.Jurisdiction.
func readJurisdictions(name string) ([]portalsim.Jurisdiction, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var js []portalsim.Jurisdiction
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&js); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(js) == 0 {
		return nil, fmt.Errorf("%s: no jurisdictions", name)
	}
	return js, nil
}

// selectJurisdictions keeps the jurisdictions of js named in ids (comma
// separated), in the order of js; an id js lacks is an error.
func selectJurisdictions(js []portalsim.Jurisdiction, ids string) ([]portalsim.Jurisdiction, error) {
	want := make(map[string]bool)
	for _, id := range strings.Split(ids, ",") {
		if id = strings.TrimSpace(id); id != "" {
			want[id] = true
		}
	}
	var kept []portalsim.Jurisdiction
	for _, j := range js {
		if want[j.ID] {
			kept = append(kept, j)
			delete(want, j.ID)
		}
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for id := range want {
			missing = append(missing, id)
		}
		slices.Sort(missing)
		return nil, fmt.Errorf("-only: no jurisdiction %s", strings.Join(missing, ", "))
	}
	if len(kept) == 0 {
		return nil, errors.New("-only: no ids")
	}
	return kept, nil
}

func printBanner(w io.Writer, indexURL string, sims *portalsim.Server) error {
	fmt.Fprintf(w, "portalsim: index %s (GET / lists the portals, GET /sources.yaml the aggregator config)\n\n", indexURL)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tJURISDICTION\tSHAPE\tBEHAVIOUR\tBASE URL")
	for _, p := range sims.Portals() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.ID(), p.Name(), p.Shape(), p.Fault(), sims.URL(p.ID()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if ps := sims.Portals(); len(ps) > 0 {
		_, err := fmt.Fprintf(w, "\nChange a portal's behaviour while it runs:\n  curl -X PUT -d '{\"mode\":\"down\"}' %s/_sim/fault\n", sims.URL(ps[0].ID()))
		return err
	}
	return nil
}

// portalInfo is one entry of the index.
type portalInfo struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Shape portalsim.Shape `json:"shape"`
	Fault portalsim.Fault `json:"fault"`
	URL   string          `json:"url"`
}

// indexHandler serves GET / (the portals, with their current faults) and
// GET /sources.yaml.
func indexHandler(sims *portalsim.Server, sources string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		var list struct {
			Portals []portalInfo `json:"portals"`
		}
		for _, p := range sims.Portals() {
			list.Portals = append(list.Portals, portalInfo{ID: p.ID(), Name: p.Name(), Shape: p.Shape(), Fault: p.Fault(), URL: sims.URL(p.ID())})
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		json.NewEncoder(w).Encode(list)
	})
	mux.HandleFunc("GET /sources.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
		io.WriteString(w, sources)
	})
	return mux
}
