package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html/charset"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/h1"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
)

// The exit statuses of a check (SPEC 12): a source that did not answer
// or map, and sources that all mapped with a warning standing.
const (
	exitCheckFailed  exitStatus = 1
	exitCheckWarning exitStatus = 3
)

// checkResult is what the check of one source found.
type checkResult uint8

const (
	checkOK checkResult = iota
	checkWarned
	checkFailed
)

// maxRecordedRequest bounds a request body that the check records.
const maxRecordedRequest = 1 << 20

// bodyStart is how much of each answer's body is shown.
const bodyStart = 2 << 10

const checkUsage = `usage: aggregator sources check -config FILE [-source ID]... (-domain PLATE | -id CUIT/DNI | -infraction ID) [-record DIR]

Calls each selected source once (all of them without -source), outside the
breakers and the rate limiter, and prints the request sent (secrets masked),
the status and headers, the start of the body, every item as mapped, every
field that did not map (with its selector) and every value that did not
normalise. Exit status 0 when every selected source answered and mapped,
1 when one failed or a value did not normalise, 2 for a command line that
cannot be run, 3 when everything mapped but a warning stands (an items
pointer that drops elements, text with U+FFFD or mojibake, a status not in
status_map, an xml source without a no-results marker).
With -record DIR, every request of each source's call (token and session
requests included) and its answer are also written to DIR/<source>.har
(HAR 1.2), every secret masked as *** as in what is printed, the subject in
log.comment: for sources test. The file holds the subject and the portal's
answer, personal data: it is written with mode 0600.

`

// sourcesUsage is the usage of `aggregator sources`: its subcommands'.
const sourcesUsage = checkUsage + testUsage

// sourcesCmd is `aggregator sources SUBCOMMAND`: check or test.
func sourcesCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return sourcesCheck(ctx, args[1:], getenv, stdout, stderr)
		case "test":
			return sourcesTest(ctx, args[1:], getenv, stdout, stderr)
		case "-h", "-help", "--help":
			fmt.Fprint(stdout, sourcesUsage)
			return nil
		}
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, "aggregator sources: a subcommand is required (check, test)\n\n")
	} else {
		fmt.Fprintf(stderr, "aggregator sources: unknown subcommand %q (known: check, test)\n\n", args[0])
	}
	fmt.Fprint(stderr, sourcesUsage)
	return exitUsage
}

// checkFlags are what `sources check` was asked.
type checkFlags struct {
	config                     string
	sources                    []string
	domain, id, infraction     string
	hasDomain, hasID, hasInfID bool
	record                     string // a directory, or ""
}

func sourcesCheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f checkFlags
	fs := sourcesFlags("check", checkUsage, stderr, &f.config, &f.sources, "check only source `ID` (repeat it, or separate ids with commas; default: every source)")
	fs.StringVar(&f.domain, "domain", "", "look up a `plate` (by_domain)")
	fs.StringVar(&f.id, "id", "", "look up a `CUIT or DNI` (by_id)")
	fs.StringVar(&f.infraction, "infraction", "", "fetch the voucher of infraction `ID` (voucher)")
	fs.StringVar(&f.record, "record", "", "also write each source's exchanges, secrets masked, to `DIR`/<source>.har (personal data: mode 0600)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitUsage
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "domain":
			f.hasDomain = true
		case "id":
			f.hasID = true
		case "infraction":
			f.hasInfID = true
		}
	})
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "aggregator sources check: "+format+"\n\n", a...)
		fs.Usage()
		return exitUsage
	}
	n := 0
	for _, b := range []bool{f.hasDomain, f.hasID, f.hasInfID} {
		if b {
			n++
		}
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected arguments: %s", safeText(strings.Join(fs.Args(), " ")))
	case f.config == "":
		return usageErr("-config FILE is required")
	case n != 1:
		return usageErr("give exactly one of -domain, -id and -infraction")
	}
	if f.record != "" {
		if st, err := os.Stat(f.record); err == nil && !st.IsDir() {
			return usageErr("-record: %s is not a directory", safeText(f.record))
		}
	}
	var q aggregator.Query
	op := aggregator.Voucher
	switch {
	case f.hasDomain:
		d, err := aggregator.ParseDomain(f.domain)
		if err != nil {
			return usageErr("-domain: not a plate (AB123CD, A123BCD or ABC123)")
		}
		q, op = aggregator.Query{Domain: d}, aggregator.ByDomain
	case f.hasID:
		id, kind, err := aggregator.ParseID(f.id)
		if err != nil {
			return usageErr("-id: not a CUIT (11 digits, valid check digit) or a DNI (7 or 8 digits)")
		}
		q, op = aggregator.Query{ID: id, IDKind: kind}, aggregator.ByID
	case f.infraction == "":
		return usageErr("-infraction: empty")
	}

	cfg, err := config.Load(f.config, getenv)
	if err != nil {
		return reportConfig(safeWriter{stderr}, err)
	}
	selected, err := selectSources(cfg.Sources, f.sources)
	if err != nil {
		return usageErr("%v", err)
	}
	failed, warned, recorded, unrecorded := 0, 0, 0, 0
	for i, sc := range selected {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		// What a source's check prints is held until the call is over,
		// when every secret it used is known, and is then written masked
		// and escaped whole: nothing is printed that the masker did not
		// see, whatever printed it.
		m := newMasker(sc)
		var out strings.Builder
		result, exs := checkSource(sources.WithSecrets(ctx, m.learn), &out, m, sc, op, q, f.infraction)
		switch result {
		case checkFailed:
			failed++
		case checkWarned:
			warned++
		}
		io.WriteString(stdout, safeLines(m.mask(out.String())))
		if f.record != "" && len(exs) > 0 {
			if err := recordHAR(f.record, sc.ID, checkCommand(sc.ID, op, q, f.infraction), m, exs); err != nil {
				fmt.Fprintf(stderr, "aggregator sources check: %s not recorded: %s\n", sc.ID, safeText(m.mask(err.Error())))
				unrecorded++
			} else {
				fmt.Fprintf(stderr, "aggregator sources check: recorded %s (mode 0600)\n", safeText(filepath.Join(f.record, sc.ID+".har")))
				recorded++
			}
		}
	}
	if recorded > 0 {
		fmt.Fprint(stderr, personalData)
	}
	fmt.Fprintf(stdout, "\n%d of %d source(s) answered and mapped", len(selected)-failed, len(selected))
	if warned > 0 {
		fmt.Fprintf(stdout, ", %d with warnings", warned)
	}
	fmt.Fprintln(stdout)
	switch {
	case failed > 0, unrecorded > 0:
		return exitCheckFailed
	case warned > 0:
		return exitCheckWarning
	}
	return nil
}

// sourcesFlags is the flag set of `sources SUBCOMMAND`, with the flags
// every subcommand takes: -config, and -source (sourceHelp says what it
// selects), repeated or comma-separated, into ids.
func sourcesFlags(subcommand, usage string, stderr io.Writer, config *string, ids *[]string, sourceHelp string) *flag.FlagSet {
	fs := flag.NewFlagSet("sources "+subcommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(config, "config", "", "YAML configuration `file` (required)")
	fs.Func("source", sourceHelp, func(s string) error {
		for id := range strings.SplitSeq(s, ",") {
			if id = strings.TrimSpace(id); id != "" {
				*ids = append(*ids, id)
			}
		}
		return nil
	})
	return fs
}

// selectSources returns the configured sources named in ids (all when
// ids is empty), in the configuration's order.
func selectSources(all []config.Source, ids []string) ([]config.Source, error) {
	if len(ids) == 0 {
		return all, nil
	}
	known := make(map[string]bool, len(all))
	for _, s := range all {
		known[s.ID] = true
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !known[id] {
			return nil, fmt.Errorf("-source: unknown source %q (configured: %s)", id, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
		want[id] = true
	}
	var out []config.Source
	for _, s := range all {
		if want[s.ID] {
			out = append(out, s)
		}
	}
	return out, nil
}

// checkSource calls one source and prints what it saw, masked by m. It
// returns what it found and the exchanges the call made.
func checkSource(ctx context.Context, w io.Writer, m *masker, sc config.Source, op aggregator.Operation, q aggregator.Query, infractionID string) (checkResult, []exchange) {
	fmt.Fprintf(w, "== %s (%s): %s\n", sc.ID, sc.Jurisdiction, op)
	if sc.Type != config.HTTPType {
		fmt.Fprintf(w, "FAILED: type %q is a Go adapter; only type http sources can be checked\n", sc.Type)
		return checkFailed, nil
	}
	spec := app.SourceSpec(sc)
	limit := spec.MaxResponseBytes
	if limit <= 0 {
		limit = sources.DefaultMaxResponseBytes
	}
	transport := app.NewTransport()
	defer transport.CloseIdleConnections()
	rec := &recorder{next: transport, limit: limit + 1}
	src, err := sources.New(spec, &http.Client{Transport: rec}, nil)
	if err != nil {
		fmt.Fprintf(w, "FAILED: %s\n", safeText(err.Error()))
		return checkFailed, nil
	}
	if !src.Supports(op, q.IDKind) {
		fmt.Fprintf(w, "skipped: the source has no %s operation for this query\n", op)
		return checkOK, nil
	}
	timeout := time.Duration(sc.Timeout)
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if op == aggregator.Voucher {
		v, err := src.Voucher(ctx, infractionID)
		var size int64
		if err == nil {
			size, err = io.Copy(io.Discard, v.Body)
			v.Body.Close()
		}
		exs := rec.exchanges()
		printExchanges(w, m, exs, false)
		if err != nil {
			fmt.Fprintf(w, "FAILED: %s\n", m.mask(describe(err)))
			return checkFailed, exs
		}
		fmt.Fprintf(w, "voucher: status %s, type %s, %d bytes\n", safeText(exs[len(exs)-1].statusText), safeText(v.ContentType), size)
		return checkOK, exs
	}

	answer, lookupErr := src.Lookup(ctx, q)
	exs := rec.exchanges()
	printExchanges(w, m, exs, true)
	rep := report{w: w, m: m}
	var items []mapping.InspectedItem
	for i, e := range exs {
		if e.err != nil || e.auth {
			continue
		}
		ins, err := src.Inspect(ctx, e.status, e.body, e.header.Get("Content-Type"), q)
		var re *mapping.RuleError
		switch {
		case errors.Is(err, mapping.ErrNoRule):
			continue // the status decides
		case errors.As(err, &re):
			rep.info("answer %d: response.errors[%d] matched: outcome %s", i+1, re.Rule, re.Outcome)
			rep.fail()
		case err != nil:
			rep.line("answer %d not readable: %s", i+1, err.Error())
			rep.fail()
		case ins.NotFound && ins.Rule >= 0:
			rep.info("answer %d: response.errors[%d] matched: outcome not_found: no infractions", i+1, ins.Rule)
		case ins.NotFound:
			rep.info("answer %d: response.not_found matched: no infractions", i+1)
		}
		if ins.Dropped > 0 {
			rep.info("answer %d: match kept %d of %d item(s), dropping %d of other subjects", i+1, ins.Selected-ins.Dropped, ins.Selected, ins.Dropped)
		}
		for _, warning := range ins.Warnings {
			rep.warn("%s", warning)
		}
		items = append(items, ins.Items...)
	}
	if spec.Response.Format == "xml" && spec.Response.NotFound == "" && !hasNotFoundRule(spec.Response) {
		rep.warn("an xml source without a no-results marker: set response.not_found (or an errors rule with outcome: not_found), " +
			"or a page without items (an error page that parses) reads as no infractions")
	}
	rep.items(src, items)
	switch {
	case lookupErr != nil:
		fmt.Fprintf(w, "FAILED: %s\n", m.mask(describe(lookupErr)))
		return checkFailed, exs
	case rep.failed:
		fmt.Fprintf(w, "FAILED: the answer came, but did not map cleanly (see above); the lookup found %d infraction(s)\n", len(answer.Infractions))
		return checkFailed, exs
	case rep.warned:
		fmt.Fprintf(w, "WARNING: %d infraction(s), but see the warnings above\n", len(answer.Infractions))
		return checkWarned, exs
	}
	fmt.Fprintf(w, "OK: %d infraction(s)\n", len(answer.Infractions))
	return checkOK, exs
}

// hasNotFoundRule reports whether an errors rule says "no infractions".
func hasNotFoundRule(r mapping.Response) bool {
	return slices.ContainsFunc(r.Errors, func(ru mapping.Rule) bool { return ru.Outcome == string(mapping.NotFound) })
}

// report prints what the check found in the answers, and keeps count of
// failures and warnings.
type report struct {
	w              io.Writer
	m              *masker
	failed, warned bool
}

func (r *report) line(format string, a ...any) {
	fmt.Fprintf(r.w, "%s\n", r.m.mask(safeText(fmt.Sprintf(format, a...))))
}

func (r *report) info(format string, a ...any) { r.line("info: "+format, a...) }

func (r *report) warn(format string, a ...any) {
	r.line("warning: "+format, a...)
	r.warned = true
}

func (r *report) fail() { r.failed = true }

// items prints every item as mapped, with what did not map or normalise.
func (r *report) items(src *sources.Source, items []mapping.InspectedItem) {
	fmt.Fprintf(r.w, "items: %d\n", len(items))
	for i, it := range items {
		inf := it.Infraction
		units := "-"
		if inf.Units != nil {
			units = inf.Units.Value + " " + inf.Units.Code
		}
		fmt.Fprintf(r.w, "  [%d] id=%s date=%s amount=%s currency=%s units=%s status=%s status_raw=%s\n",
			i, quoteText(inf.ID), quoteText(inf.Date), quoteText(inf.Amount), quoteText(inf.Currency), quoteText(units), inf.Status, quoteText(inf.StatusRaw))
		fmt.Fprintf(r.w, "      description=%s place=%s\n", quoteText(inf.Description), quoteText(inf.Place))
		for _, p := range it.Problems {
			mark := "not normalised"
			switch p.Reason {
			case mapping.ReasonMissing:
				mark = "not mapped"
			case mapping.ReasonSuspectText:
				mark = "suspect text"
				r.warned = true
			case mapping.ReasonUnknownStatus:
				r.warned = true
			}
			r.line("      ! %s: %s%s", mark, p.String(), hint(p))
		}
		if it.Refused {
			r.failed = true
		}
	}
	// A configured selector that matched in no item is a mapping to fix,
	// even when the aggregator would take the answer without the field.
	if len(items) == 0 {
		return
	}
	for _, name := range src.Mapped() {
		never := true
		for _, it := range items {
			if !slices.ContainsFunc(it.Problems, func(p mapping.FieldProblem) bool { return p.Field == name && p.Reason == mapping.ReasonMissing }) {
				never = false
				break
			}
		}
		if never {
			fmt.Fprintf(r.w, "field %s: its selector matched in no item\n", name)
			r.failed = true
		}
	}
}

// hint says how to fix a value that did not normalise, where it is known.
func hint(p mapping.FieldProblem) string {
	if strings.Contains(p.Detail, "ambiguous") {
		return " (set response.decimal, or the field's decimal, to \",\" or \".\")"
	}
	return ""
}

// describe says what a failed call's outcome is.
func describe(err error) string {
	var e *sources.Error
	if errors.As(err, &e) {
		s := string(e.Outcome.Slug())
		if e.Status != 0 {
			s += fmt.Sprintf(" (HTTP %d)", e.Status)
		}
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
		return safeText(s)
	}
	return safeText(err.Error())
}

// exchange is one request sent and what came back.
type exchange struct {
	// auth: a token request or a session page (sources.IsAuthRequest),
	// whose answer is not shown.
	auth              bool
	method, url, host string
	reqHeader         http.Header
	reqBody           []byte
	status            int
	statusText        string
	proto             string
	header            http.Header
	body              []byte // at most the recorder's limit
	cut               bool   // the body was longer
	err               error
	start             time.Time
	took              time.Duration // until the answer's headers
}

// recorder is a RoundTripper that keeps every exchange it carries.
type recorder struct {
	next  http.RoundTripper
	limit int64

	mu  sync.Mutex
	all []*exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.via(r.next, req)
}

// WithTLS records the calls of a source with tls settings, carried by a
// copy of the next transport that they configure.
func (r *recorder) WithTLS(apply func(*tls.Config)) http.RoundTripper {
	next, ok := h1.WithTLS(r.next, apply)
	if !ok {
		return r
	}
	return &recorderVia{r: r, next: next}
}

// recorderVia is a recorder whose calls go through a transport of their own.
type recorderVia struct {
	r    *recorder
	next http.RoundTripper
}

func (v *recorderVia) RoundTrip(req *http.Request) (*http.Response, error) {
	return v.r.via(v.next, req)
}

// via carries req on next and keeps the exchange.
func (r *recorder) via(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	e := &exchange{auth: sources.IsAuthRequest(req.Context()), method: req.Method, url: req.URL.String(), host: req.Host, reqHeader: req.Header.Clone(), start: time.Now()}
	if req.Body != nil && req.Body != http.NoBody {
		// Bodies come from the source's templates: small. One that is not
		// is refused rather than sent cut short.
		b, err := io.ReadAll(io.LimitReader(req.Body, maxRecordedRequest+1))
		req.Body.Close()
		switch {
		case err != nil:
			return nil, err
		case len(b) > maxRecordedRequest:
			return nil, fmt.Errorf("request body larger than %d bytes", maxRecordedRequest)
		}
		e.reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	r.mu.Lock()
	r.all = append(r.all, e)
	r.mu.Unlock()
	resp, err := next.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	e.took = time.Since(e.start)
	if err != nil {
		e.err = err
		return nil, err
	}
	e.status, e.statusText, e.proto, e.header = resp.StatusCode, resp.Status, resp.Proto, resp.Header.Clone()
	resp.Body = &capture{ReadCloser: resp.Body, r: r, e: e}
	return resp, nil
}

// exchanges are the exchanges so far.
func (r *recorder) exchanges() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]exchange, len(r.all))
	for i, e := range r.all {
		out[i] = *e
	}
	return out
}

// capture keeps what is read of a body, up to the recorder's limit.
type capture struct {
	io.ReadCloser
	r *recorder
	e *exchange
}

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.r.mu.Lock()
	room := c.r.limit - int64(len(c.e.body))
	if room > 0 {
		c.e.body = append(c.e.body, p[:min(int64(n), room)]...)
	}
	if int64(n) > room {
		c.e.cut = true
	}
	c.r.mu.Unlock()
	return n, err
}

// minSecret is the length under which a value is not hidden by value: it
// would hide everything and protect nothing.
const minSecret = 3

// masker hides one source's secrets in what its check prints (SPEC 9).
// It knows them by name (headers and parameters that carry credentials)
// and by value: the source's configured header values, its OAuth2 client
// credentials, every value that came from the environment, and what the
// call turned out to use (learn: the access token, the session's values;
// the cookies its exchanges carried). A value is hidden wherever it
// appears (URLs, headers, bodies sent and received, errors, mapped items,
// values a portal echoes back) in the forms a request or an echo gives
// it: as written, percent-encoded for a path or a query, escaped for JSON,
// XML or HTML, and as printed (control characters escaped).
type masker struct {
	headers map[string]bool // canonical names whose values are hidden
	params  map[string]bool // query and form parameters whose values are hidden
	opaque  bool            // request bodies carry session values: hidden whole

	mu    sync.Mutex
	forms []string // of every secret value, longest first
}

func newMasker(sc config.Source) *masker {
	m := &masker{
		headers: map[string]bool{"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Set-Cookie": true},
		params:  map[string]bool{"client_secret": true, "access_token": true, "refresh_token": true, "id_token": true, "token": true, "password": true},
	}
	secretHeaders := func(h map[string]string) {
		for k, v := range h {
			m.headers[http.CanonicalHeaderKey(k)] = true
			m.learn(v)
		}
	}
	sessionParams := func(q map[string]string) {
		for k, v := range q {
			if strings.Contains(v, "{session.") {
				m.params[k] = true
			}
		}
	}
	secretHeaders(sc.Headers)
	for _, o := range sc.Operations {
		secretHeaders(o.Headers)
		sessionParams(o.Query)
		sessionParams(o.Body.Form)
		if _, inline, ok := strings.Cut(o.Path, "?"); ok {
			for pair := range strings.SplitSeq(inline, "&") {
				if k, v, _ := strings.Cut(pair, "="); strings.Contains(v, "{session.") {
					m.params[k] = true
				}
			}
		}
		if strings.Contains(o.Body.Text, "{session.") || (o.Body.JSON != nil && bytes.Contains(o.Body.JSON.Raw, []byte("{session."))) {
			m.opaque = true
		}
	}
	if o := sc.Auth.OAuth2; o != nil {
		m.learn(o.ClientSecret)
		m.learn(o.ClientID)
		// As golang.org/x/oauth2 sends them (RFC 6749 section 2.3.1).
		m.learn(base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(o.ClientID) + ":" + url.QueryEscape(o.ClientSecret))))
	}
	for _, v := range sc.FromEnv {
		m.learn(v)
	}
	return m
}

// learn makes v a secret, hidden from then on in every form it may take.
// It is the learner of sources.WithSecrets.
func (m *masker) learn(v string) {
	if len(strings.TrimSpace(v)) < minSecret {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range secretForms(v) {
		if len(f) >= minSecret && !slices.Contains(m.forms, f) {
			m.forms = append(m.forms, f)
		}
	}
	// Longest first, so that a value holding another is hidden whole.
	slices.SortStableFunc(m.forms, func(a, b string) int { return len(b) - len(a) })
}

// xmlEscaper escapes as sources writes XML text.
var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

// secretForms are the ways v may be written in what is printed: as it
// is, or as a URL path or query carries it, and each of those as it is,
// percent-encoded again, escaped for JSON (with and without <, >, &),
// HTML or XML, or escaped for a terminal; what a request sends, and what
// a portal that echoes a request back may make of it.
func secretForms(v string) []string {
	var forms []string
	for _, b := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
		quoted, _ := json.Marshal(b)
		var plain bytes.Buffer
		enc := json.NewEncoder(&plain)
		enc.SetEscapeHTML(false)
		enc.Encode(b)
		forms = append(forms, b, url.QueryEscape(b), url.PathEscape(b),
			string(quoted[1:len(quoted)-1]), strings.TrimSuffix(strings.TrimPrefix(plain.String(), `"`), "\"\n"),
			html.EscapeString(b), xmlEscaper.Replace(b), safeText(b))
	}
	return forms
}

// learnCookies makes secrets of the cookies the exchanges carried.
func (m *masker) learnCookies(exs []exchange) {
	for _, e := range exs {
		for _, line := range e.reqHeader.Values("Cookie") {
			if cs, err := http.ParseCookie(line); err == nil {
				for _, c := range cs {
					m.learn(c.Value)
				}
			}
		}
		for _, line := range e.header.Values("Set-Cookie") {
			if c, err := http.ParseSetCookie(line); err == nil {
				m.learn(c.Value)
			}
		}
	}
}

// mask hides every known secret value in s.
func (m *masker) mask(s string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.forms {
		s = strings.ReplaceAll(s, f, "***")
	}
	return s
}

// maskURL hides the user information and the secret parameters of a URL,
// and every secret value in it.
func (m *masker) maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "***"
	}
	u.User = nil
	u.RawQuery = m.maskPairs(u.RawQuery, false)
	return m.mask(u.String())
}

// maskPairs hides the values of the secret parameters (all of them when
// all is set) of an application/x-www-form-urlencoded text, keeping the
// rest as written.
func (m *masker) maskPairs(raw string, all bool) string {
	if raw == "" {
		return ""
	}
	pairs := strings.Split(raw, "&")
	for i, p := range pairs {
		k, _, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if hasValue && (all || err != nil || m.params[name]) {
			pairs[i] = k + "=***"
		}
	}
	return strings.Join(pairs, "&")
}

// maskHeader hides the values of secret headers, and every secret value.
func (m *masker) maskHeader(name, value string) string {
	if m.headers[http.CanonicalHeaderKey(name)] {
		return "***"
	}
	return m.mask(value)
}

// maskRequestBody hides the secrets of a request body; auth says it is a
// token request's or a session page's, all of whose values are hidden.
func (m *masker) maskRequestBody(h http.Header, b []byte, auth bool) string {
	text, whole := m.maskBody(h, b, auth)
	if whole {
		return "*** (not shown: it holds secrets)"
	}
	return text
}

// maskBody is a request body with its secrets hidden, or "***" with whole
// set when it is hidden whole: a body not a form that holds session values
// or is an auth request's.
func (m *masker) maskBody(h http.Header, b []byte, auth bool) (text string, whole bool) {
	if len(b) == 0 {
		return "", false
	}
	if mt, _, _ := mime.ParseMediaType(h.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
		return m.mask(m.maskPairs(string(b), auth)), false
	}
	if m.opaque || auth {
		return "***", true
	}
	return m.mask(string(b)), false
}

// printExchanges writes every request and answer; showBody says whether
// answers' bodies are shown (not a voucher's). Token requests' and
// session pages' answers are never shown.
func printExchanges(w io.Writer, m *masker, exs []exchange, showBody bool) {
	m.learnCookies(exs)
	for _, e := range exs {
		fmt.Fprintf(w, "> %s %s\n", safeText(e.method), safeText(m.maskURL(e.url)))
		if e.host != "" && !strings.Contains(e.url, "://"+e.host) {
			fmt.Fprintf(w, "> Host: %s\n", safeText(m.mask(e.host)))
		}
		printHeaders(w, ">", e.reqHeader, m)
		if b := m.maskRequestBody(e.reqHeader, e.reqBody, e.auth); b != "" {
			fmt.Fprintln(w, ">")
			printLines(w, ">", b)
		}
		if e.err != nil {
			fmt.Fprintf(w, "< no answer: %s\n", safeText(m.mask(e.err.Error())))
			continue
		}
		fmt.Fprintf(w, "< %s\n", safeText(m.mask(e.statusText)))
		printHeaders(w, "<", e.header, m)
		switch {
		case len(e.body) == 0:
		case e.auth:
			fmt.Fprintf(w, "<\n< *** (%d bytes, not shown: a token answer or session page holds secrets)\n", len(e.body))
		case !showBody:
			fmt.Fprintf(w, "<\n< (%d bytes read, not shown)\n", len(e.body))
		default:
			// Masked whole before it is cut, so that no secret shows in
			// part at the cut.
			text := m.mask(decodeText(e.body, e.header.Get("Content-Type")))
			more := len(text) > bodyStart
			if more {
				text = strings.ToValidUTF8(text[:bodyStart], "")
			}
			fmt.Fprintln(w, "<")
			printLines(w, "<", text)
			if more {
				fmt.Fprintf(w, "< … (%d bytes in all)\n", len(e.body))
			}
		}
	}
}

// printLines writes text line by line after prefix, each line escaped.
func printLines(w io.Writer, prefix, text string) {
	for l := range strings.SplitSeq(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		fmt.Fprintf(w, "%s %s\n", prefix, safeText(l))
	}
}

func printHeaders(w io.Writer, prefix string, h http.Header, m *masker) {
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			fmt.Fprintf(w, "%s %s: %s\n", prefix, safeText(k), safeText(m.maskHeader(k, v)))
		}
	}
}

// decodeText is body decoded as text, from the charset the Content-Type or
// the document declares (as it is when that fails).
func decodeText(body []byte, contentType string) string {
	if r, err := charset.NewReader(bytes.NewReader(body), contentType); err == nil {
		if d, err := io.ReadAll(r); err == nil {
			return string(d)
		}
	}
	return string(body)
}

// safeText is s for one line of a terminal: every character a terminal
// could act on is shown escaped (escapeText), line breaks included.
func safeText(s string) string { return escapeText(s, false) }

// safeLines is s for a terminal, its line breaks kept (a CR before one
// dropped) and every other character a terminal could act on escaped.
func safeLines(s string) string { return escapeText(s, true) }

// escapeText shows escaped, as \t, \r, \n, \u202e or \U000e0001, the
// characters a terminal could act on or that change how text reads:
// control characters (Unicode Cc: ESC, BEL, NUL, DEL, the C1 controls),
// format characters (Cf: the bidirectional embeddings, overrides and
// isolates U+202A–202E and U+2066–2069, the marks U+200E, U+200F, U+061C,
// the zero-width characters U+200B–200D, U+2060, U+FEFF, the tags) and the
// line and paragraph separators; bytes that are not UTF-8 as \xNN. With
// keepNewlines, \n is kept and a CR before it dropped.
func escapeText(s string, keepNewlines bool) string {
	clean := true
	for i := 0; i < len(s) && clean; i++ {
		c := s[i]
		clean = c >= 0x20 && c < 0x7f || c == '\n' && keepNewlines
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepNewlines && r == '\n':
			b.WriteByte('\n')
		case keepNewlines && r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r > 0xffff && unicode.In(r, unicode.Cc, unicode.Cf):
			fmt.Fprintf(&b, `\U%08x`, r)
		case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// safeWriter writes to w what it is given, escaped as safeLines does.
// Each Write must hold whole UTF-8 sequences, as fmt's do.
type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, safeLines(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// quoteText is v for an item line: "-" when empty, quoted when it holds
// spaces.
func quoteText(v string) string {
	switch {
	case v == "":
		return "-"
	case strings.ContainsAny(v, " \t\n\"="):
		return fmt.Sprintf("%q", safeText(v))
	}
	return safeText(v)
}
