package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/html/charset"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/har"
	"github.com/multas/aggregator/sources"
)

const testUsage = `usage: aggregator sources test -config FILE [-source ID]... [-update [-domain PLATE | -id CUIT/DNI]] DIR

Replays, with no network at all, every DIR/<source>.har (recorded by
sources check -record, or saved from a browser's developer tools) through
the source's adapter, and compares the infractions it maps with
DIR/<source>.golden.json ({"subject": {"domain" | "id"}, "operation",
"infractions"}), looking up the golden file's subject. The recorded entries
answer the adapter's requests matched by method, path, query parameters in
any order, and body; *** (a masked value) matches anything; headers are
ignored; equal requests take the recorded answers in order; other entries
are ignored. Every ${NAME} of the configuration that has no value is taken
as ***, and no TLS file is read: it runs in CI without the portals'
secrets. With -update, the golden files are written instead, for the
subject of -domain or -id, else the one the HAR's log.comment names (as
sources check -record writes it), else the golden file's own.
Exit status 0 when every source replays as its golden file says, 1 when one
differs (each difference is printed, field by field, per infraction id),
fails, or makes a request the HAR has no answer for, 2 for a command line
that cannot be run.

`

// testFlags are what `sources test` was asked.
type testFlags struct {
	config           string
	sources          []string
	domain, id       string
	hasDomain, hasID bool
	update           bool
	dir              string
}

// The files of a recordings directory.
const (
	harExt    = ".har"
	goldenExt = ".golden.json"
)

func sourcesTest(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f testFlags
	fs := sourcesFlags("test", testUsage, stderr, &f.config, &f.sources, "replay only source `ID` (repeat it, or separate ids with commas; default: every DIR/<source>.har)")
	fs.StringVar(&f.domain, "domain", "", "with -update: the `plate` the recordings looked up")
	fs.StringVar(&f.id, "id", "", "with -update: the `CUIT or DNI` the recordings looked up")
	fs.BoolVar(&f.update, "update", false, "write the golden files from the replays instead of comparing")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitUsage
	}
	fs.Visit(func(fl *flag.Flag) {
		f.hasDomain = f.hasDomain || fl.Name == "domain"
		f.hasID = f.hasID || fl.Name == "id"
	})
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "aggregator sources test: "+format+"\n\n", a...)
		fs.Usage()
		return exitUsage
	}
	var subject *aggregator.Query
	switch {
	case fs.NArg() == 0:
		return usageErr("the directory of recordings DIR is required")
	case fs.NArg() > 1:
		return usageErr("unexpected arguments: %s", safeText(strings.Join(fs.Args()[1:], " ")))
	case f.config == "":
		return usageErr("-config FILE is required")
	case (f.hasDomain || f.hasID) && !f.update:
		return usageErr("-domain and -id go with -update: the subject replayed is the golden file's")
	case f.hasDomain && f.hasID:
		return usageErr("give at most one of -domain and -id")
	case f.hasDomain || f.hasID:
		q, err := parseSubject(goldenSubject{Domain: f.domain, ID: f.id})
		if err != nil {
			return usageErr("%s", err)
		}
		subject = &q
	}
	f.dir = fs.Arg(0)
	files, err := os.ReadDir(f.dir)
	if err != nil {
		return usageErr("%s is not a directory", safeText(f.dir))
	}
	// The sources to replay: those asked for, each with its HAR, else
	// every HAR's; and the golden files.
	var ids, goldens []string
	for _, e := range files {
		switch name := e.Name(); {
		case e.IsDir():
		case strings.HasSuffix(name, harExt):
			ids = append(ids, strings.TrimSuffix(name, harExt))
		case strings.HasSuffix(name, goldenExt):
			goldens = append(goldens, strings.TrimSuffix(name, goldenExt))
		}
	}
	cfg, err := config.LoadOffline(f.config, getenv)
	if err != nil {
		return reportConfig(safeWriter{stderr}, err)
	}
	configured := map[string]config.Source{}
	for _, sc := range cfg.Sources {
		configured[sc.ID] = sc
	}
	if len(f.sources) > 0 {
		if _, err := selectSources(cfg.Sources, f.sources); err != nil {
			return usageErr("%v", err)
		}
		for _, id := range f.sources {
			if !slices.Contains(ids, id) {
				return usageErr("-source %s: no %s in %s", safeText(id), safeText(id+harExt), safeText(f.dir))
			}
		}
		ids = slices.Compact(slices.Sorted(slices.Values(f.sources)))
	} else if len(ids) == 0 {
		return usageErr("no *%s file in %s", harExt, safeText(f.dir))
	}

	passed, failed := 0, 0
	for i, id := range ids {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		sc, ok := configured[id]
		if !ok {
			fmt.Fprintf(stdout, "== %s\nFAILED: the configuration has no source %q (a HAR is named after the source it replays: <source>%s)\n",
				safeText(id+harExt), safeText(id), harExt)
			failed++
			continue
		}
		m := newMasker(sc)
		var out strings.Builder
		if testSource(sources.WithSecrets(ctx, m.learn), &out, sc, f, subject) {
			passed++
		} else {
			failed++
		}
		io.WriteString(stdout, safeLines(m.mask(out.String())))
	}
	if len(f.sources) == 0 {
		for _, id := range goldens {
			if !slices.Contains(ids, id) {
				fmt.Fprintf(stdout, "\n== %s\nFAILED: no %s to replay it\n", safeText(id+goldenExt), safeText(id+harExt))
				failed++
			}
		}
	}
	what := "replayed as their golden files say"
	if f.update {
		what = "replayed, their golden files written"
	}
	fmt.Fprintf(stdout, "\n%d of %d source(s) %s\n", passed, len(ids), what)
	if failed > 0 {
		return exitCheckFailed
	}
	return nil
}

// golden is a DIR/<source>.golden.json file: what a source's replay must
// map. Infractions are kept as written, so that a member the product does
// not know shows as a difference.
type golden struct {
	Subject     goldenSubject        `json:"subject"`
	Operation   aggregator.Operation `json:"operation"`
	Infractions []json.RawMessage    `json:"infractions"`
}

// goldenSubject is the subject a recording looked up: a plate or a person.
type goldenSubject struct {
	Domain string `json:"domain,omitempty"`
	ID     string `json:"id,omitempty"`
}

// parseSubject is the query of a subject: exactly one of a plate and an id.
func parseSubject(s goldenSubject) (aggregator.Query, error) {
	switch {
	case s.Domain != "" && s.ID != "":
		return aggregator.Query{}, errors.New("a subject is a domain or an id, not both")
	case s.Domain != "":
		d, err := aggregator.ParseDomain(s.Domain)
		if err != nil {
			return aggregator.Query{}, errors.New("-domain: not a plate (AB123CD, A123BCD or ABC123)")
		}
		return aggregator.Query{Domain: d}, nil
	case s.ID != "":
		id, kind, err := aggregator.ParseID(s.ID)
		if err != nil {
			return aggregator.Query{}, errors.New("-id: not a CUIT (11 digits, valid check digit) or a DNI (7 or 8 digits)")
		}
		return aggregator.Query{ID: id, IDKind: kind}, nil
	}
	return aggregator.Query{}, errors.New("no subject: give a domain or an id")
}

// subjectOf is the subject a HAR's log.comment names, as checkCommand
// writes it (-domain P or -id N among its words).
func subjectOf(comment string) (aggregator.Query, bool) {
	words := strings.Fields(comment)
	for i := 0; i+1 < len(words); i++ {
		var s goldenSubject
		switch words[i] {
		case "-domain", "--domain":
			s.Domain = words[i+1]
		case "-id", "--id":
			s.ID = words[i+1]
		default:
			continue
		}
		q, err := parseSubject(s)
		return q, err == nil
	}
	return aggregator.Query{}, false
}

// operationOf is the lookup of a query.
func operationOf(q aggregator.Query) aggregator.Operation {
	if q.Domain != "" {
		return aggregator.ByDomain
	}
	return aggregator.ByID
}

// describeSubject is a query for a heading: "by_domain AB123CD".
func describeSubject(q aggregator.Query) string {
	if q.Domain != "" {
		return string(aggregator.ByDomain) + " " + string(q.Domain)
	}
	return string(aggregator.ByID) + " " + q.ID
}

// testSource replays one source's HAR and compares (or, with -update,
// writes) its golden file, printing what it found; it reports whether the
// source passed.
func testSource(ctx context.Context, w io.Writer, sc config.Source, f testFlags, subject *aggregator.Query) bool {
	harPath := filepath.Join(f.dir, sc.ID+harExt)
	goldenPath := filepath.Join(f.dir, sc.ID+goldenExt)
	fmt.Fprintf(w, "== %s (%s)", sc.ID, sc.Jurisdiction)
	fail := func(format string, a ...any) bool {
		fmt.Fprintf(w, "FAILED: "+format+"\n", a...)
		return false
	}
	hf, err := readHAR(harPath)
	if err != nil {
		fmt.Fprintln(w)
		return fail("%s: %s", filepath.Base(harPath), err)
	}
	var want golden
	var q aggregator.Query
	switch {
	case f.update && subject != nil:
		q = *subject
	case f.update:
		// The HAR's comment, else the golden file being rewritten.
		var ok bool
		if q, ok = subjectOf(hf.Log.Comment); !ok {
			old, _ := readGolden(goldenPath)
			var err error
			if q, err = parseSubject(old.Subject); err != nil {
				fmt.Fprintln(w)
				return fail("%s does not say what it looked up (a browser's HAR does not): give -domain or -id", filepath.Base(harPath))
			}
		}
	default:
		if want, err = readGolden(goldenPath); err != nil {
			fmt.Fprintln(w)
			return fail("%s", err)
		}
		if q, err = parseSubject(want.Subject); err != nil {
			fmt.Fprintln(w)
			return fail("%s: subject: %s", filepath.Base(goldenPath), err)
		}
		if op := operationOf(q); want.Operation != "" && want.Operation != op {
			fmt.Fprintln(w)
			return fail("%s: operation %q does not look up its subject (%s does)", filepath.Base(goldenPath), want.Operation, op)
		}
	}
	entries := "entries"
	if len(hf.Log.Entries) == 1 {
		entries = "entry"
	}
	fmt.Fprintf(w, ": %s, %d %s in %s\n", describeSubject(q), len(hf.Log.Entries), entries, filepath.Base(harPath))

	got, misses, err := replay(ctx, sc, hf, q)
	for _, miss := range misses {
		fmt.Fprintf(w, "no recorded answer for %s %s (%s)\n", miss.Method, miss.URL, miss.Reason)
		if miss.Body != "" {
			fmt.Fprintf(w, "  body: %s\n", safeText(miss.Body))
		}
	}
	switch {
	case len(misses) > 0:
		return fail("the adapter made %d request(s) that %s has no answer for (record it again, or save the browser's session again)", len(misses), filepath.Base(harPath))
	case err != nil:
		return fail("%s", describe(err))
	case f.update:
		return writeGolden(w, goldenPath, q, got)
	}
	diffs := diffInfractions(want.Infractions, got)
	if len(diffs) == 0 {
		fmt.Fprintf(w, "OK: %d infraction(s), as in %s\n", len(got), filepath.Base(goldenPath))
		return true
	}
	fmt.Fprintf(w, "DIFFERS from %s: %d difference(s)\n", filepath.Base(goldenPath), len(diffs))
	for _, d := range diffs {
		fmt.Fprintf(w, "  %s\n", safeText(d))
	}
	return false
}

// readHAR reads a HAR file.
func readHAR(path string) (*har.File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return har.Read(fh)
}

// maxGoldenBytes bounds a golden file.
const maxGoldenBytes = 16 << 20

// readGolden reads a golden file.
func readGolden(path string) (golden, error) {
	var g golden
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return g, fmt.Errorf("no %s: write it with -update", filepath.Base(path))
	}
	if err != nil {
		return g, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxGoldenBytes+1))
	switch {
	case err != nil:
		return g, err
	case len(data) > maxGoldenBytes:
		return g, fmt.Errorf("%s: larger than %d MiB", filepath.Base(path), maxGoldenBytes>>20)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return g, fmt.Errorf("%s: not a golden file ({\"subject\", \"operation\", \"infractions\"}): %s", filepath.Base(path), jsonMessage(err))
	}
	return g, nil
}

// jsonMessage says what is wrong with a JSON document, without its text.
func jsonMessage(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	return err.Error()
}

// writeGolden writes the golden file of a replay, mode 0600 (it holds the
// subject's infractions), and says whether it changed.
func writeGolden(w io.Writer, path string, q aggregator.Query, got []aggregator.Infraction) bool {
	g := struct {
		Subject     goldenSubject           `json:"subject"`
		Operation   aggregator.Operation    `json:"operation"`
		Infractions []aggregator.Infraction `json:"infractions"`
	}{goldenSubject{Domain: string(q.Domain), ID: q.ID}, operationOf(q), got}
	if g.Infractions == nil {
		g.Infractions = []aggregator.Infraction{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(g); err != nil {
		fmt.Fprintf(w, "FAILED: %s\n", err)
		return false
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, buf.Bytes()) {
		fmt.Fprintf(w, "unchanged: %s, %d infraction(s)\n", filepath.Base(path), len(got))
		return true
	}
	if err := writePrivate(path, buf.Bytes()); err != nil {
		fmt.Fprintf(w, "FAILED: %s\n", err)
		return false
	}
	fmt.Fprintf(w, "written: %s, %d infraction(s)\n", filepath.Base(path), len(got))
	return true
}

// replay looks q up through sc's adapter over a Replay of hf: no request
// leaves the process. It returns the infractions mapped, the requests the
// HAR had no answer for, and the lookup's error.
func replay(ctx context.Context, sc config.Source, hf *har.File, q aggregator.Query) ([]aggregator.Infraction, []har.Miss, error) {
	if sc.Type != config.HTTPType {
		return nil, nil, fmt.Errorf("type %q is a Go adapter; only type http sources can be replayed", sc.Type)
	}
	spec := app.SourceSpec(sc)
	spec.TLS = sources.TLS{} // no key file is read: nothing is dialled
	opts := har.Options{MaxBody: spec.MaxResponseBytes}
	if opts.MaxBody <= 0 {
		opts.MaxBody = sources.DefaultMaxResponseBytes
	}
	if label := spec.Response.Charset; label != "" {
		if enc, name := charset.Lookup(label); enc != nil && name != "utf-8" {
			opts.Encoding = enc
		}
	}
	rp := har.NewReplay(hf, opts)
	recordedAt := time.Now()
	if len(hf.Log.Entries) > 0 {
		if t, err := time.Parse(time.RFC3339Nano, hf.Log.Entries[0].StartedDateTime); err == nil {
			recordedAt = t
		}
	}
	// The clock stands at the recording's start: what the mapping reads
	// relative to today (two-digit years) reads as it did then.
	src, err := sources.New(spec, &http.Client{Transport: rp}, func() time.Time { return recordedAt })
	if err != nil {
		return nil, nil, err
	}
	op := operationOf(q)
	if !src.Supports(op, q.IDKind) {
		return nil, nil, fmt.Errorf("the source has no %s operation for this subject", op)
	}
	timeout := time.Duration(sc.Timeout)
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	answer, err := src.Lookup(ctx, q)
	return answer.Infractions, rp.Misses(), err
}
