package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/multas/aggregator"
)

// request is one request to a replica and what its answer must be.
type request struct {
	label   string // what the tally counts it as: its op, or "recovery"
	op      aggregator.Operation
	replica int
	path    string // with its query
	budget  time.Duration
	// domain and id are the query as the answer must echo it: normalised.
	domain, id string
}

// randomRequest is what a worker asks next: by plate, by CUIT, or a
// voucher, of a random replica, with the data the portals hold.
func (r *run) randomRequest(rng *rand.Rand, label string) request {
	replica := rng.IntN(len(r.replicas))
	switch n := rng.IntN(100); {
	case n < 50:
		return r.domainRequest(rng, replica, label)
	case n < 85:
		return r.idRequest(rng, replica, label)
	}
	v := r.people.vouchers[rng.IntN(len(r.people.vouchers))]
	return r.voucherRequest(v, replica, label)
}

func (r *run) domainRequest(rng *rand.Rand, replica int, label string) request {
	plate := r.people.plates[rng.IntN(len(r.people.plates))]
	forms := plateForms(plate)
	return request{label: label, op: aggregator.ByDomain, replica: replica, budget: r.opts.QueryTimeout, domain: plate,
		path: "/v1/infractions?domain=" + url.QueryEscape(forms[rng.IntN(len(forms))]) + "&timeout=" + r.opts.QueryTimeout.String()}
}

func (r *run) idRequest(rng *rand.Rand, replica int, label string) request {
	c := r.people.cuits[rng.IntN(len(r.people.cuits))]
	form := c
	if rng.IntN(2) == 0 {
		form = dashedCUIT(c)
	}
	return request{label: label, op: aggregator.ByID, replica: replica, budget: r.opts.QueryTimeout, id: c,
		path: "/v1/infractions?id=" + url.QueryEscape(form) + "&timeout=" + r.opts.QueryTimeout.String()}
}

func (r *run) voucherRequest(v voucherRef, replica int, label string) request {
	return request{label: label, op: aggregator.Voucher, replica: replica, budget: maxDeadline,
		path: "/v1/sources/" + v.source + "/infractions/" + url.PathEscape(v.id) + "/voucher"}
}

// worker sends requests one at a time until ctx ends. A request under way
// then is finished and checked.
func (r *run) worker(ctx context.Context, rng *rand.Rand) {
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for ctx.Err() == nil {
		if rng.IntN(4) == 0 {
			r.burst(rng)
		} else {
			r.send(r.randomRequest(rng, ""))
		}
		t.Reset(between(rng, r.opts.Think/2, r.opts.Think*3/2))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// burstSize is how many queries a burst sends at once.
const burstSize = 3

// burst sends burstSize queries of one kind at once, for different plates
// or people: to one replica when replicas are independent, to different
// ones when they share their breakers. A breaker that turns half-open
// then sees several calls at the same instant, and must let one through.
func (r *run) burst(rng *rand.Rand) {
	op := aggregator.ByDomain
	if rng.IntN(2) == 0 {
		op = aggregator.ByID
	}
	replica := rng.IntN(len(r.replicas))
	var wg sync.WaitGroup
	for i := range burstSize {
		rep := replica
		if r.opts.Variant == Redis {
			rep = (replica + i) % len(r.replicas)
		}
		q := r.domainRequest(rng, rep, "")
		if op == aggregator.ByID {
			q = r.idRequest(rng, rep, "")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.send(q)
		}()
	}
	wg.Wait()
}

// answerDoc is the document of SPEC 3.1, and the 503 problem, as the
// invariants read them.
type answerDoc struct {
	Type  string `json:"type"`
	Query struct {
		Domain string `json:"domain"`
		ID     string `json:"id"`
	} `json:"query"`
	Complete *bool `json:"complete"`
	Summary  struct {
		Total, Succeeded, Failed, Skipped int
	} `json:"summary"`
	Sources []struct {
		Source  string `json:"source"`
		Status  string `json:"status"`
		Problem *struct {
			Type       string `json:"type"`
			Detail     string `json:"detail"`
			RetryAfter *int   `json:"retry_after"`
		} `json:"problem"`
	} `json:"sources"`
}

// send sends q, checks its answer against every invariant, and counts it.
// It returns the decoded answer of a query (nil otherwise).
func (r *run) send(q request) *answerDoc {
	label := q.label
	if label == "" {
		label = string(q.op)
	}
	u, err := url.Parse(r.replicas[q.replica].url + q.path)
	if err != nil {
		panic(err) // the paths are built above
	}
	// The client's own timeout only guards the run against a replica that
	// never answers; the invariant is checked on the latency below.
	ctx, cancel := context.WithTimeout(context.Background(), q.budget+10*time.Second)
	defer cancel()
	// net/http sends an idempotent request again, once, when a reused
	// connection closes without an answer (a replica that aborted a
	// voucher's transfer before flushing anything): the latency is the
	// last attempt's, and the replays are counted.
	// (The trace runs on the transport's goroutines.)
	var attempts atomic.Int64
	var lastAttempt atomic.Pointer[time.Time]
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() {
		attempts.Add(1)
		now := time.Now()
		lastAttempt.Store(&now)
	}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	id := r.requests.Add(1)
	req.Header.Set(requestHeader, strconv.FormatUint(id, 10))
	first := time.Now()
	lastAttempt.Store(&first)
	defer func() {
		if n := attempts.Load(); n > 1 {
			r.tally.mu.Lock()
			r.tally.clientReplays += n - 1
			r.tally.mu.Unlock()
		}
	}()
	// timing is how long the replica handled the request; the client's
	// measure when the handler's is unknown.
	timing := func(client time.Duration) (handled, bool) {
		if h, ok := r.handlerTimes.take(id, 200*time.Millisecond); ok {
			return h, true
		}
		return handled{start: *lastAttempt.Load(), d: client}, false
	}
	resp, err := r.client.Do(req)
	start := first
	if attempts.Load() > 1 {
		start = *lastAttempt.Load() // the replay's
	}
	if err != nil && q.op == aggregator.Voucher && errors.Is(err, io.EOF) {
		// A voucher streams through: when the portal breaks off, the
		// replica aborts the transfer, before its status line reached
		// the client if that was still in its buffer.
		client := time.Since(start)
		h, timed := timing(client)
		r.count(label, q.op, 0, client, h, timed, q.budget, "")
		r.outcome("voucher: transfer aborted")
		return nil
	}
	if err != nil {
		r.tally.violate(Violation{Kind: KindTransport, Detail: fmt.Sprintf("%s to replica %d: %v", q.op, q.replica+1, redactErr(err))})
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	resp.Body.Close()
	latency := time.Since(start)
	what := fmt.Sprintf("%s answer %d of replica %d", q.op, resp.StatusCode, q.replica+1)
	h, timed := timing(latency)
	r.count(label, q.op, resp.StatusCode, latency, h, timed, q.budget, what)
	if err != nil {
		if q.op == aggregator.Voucher && resp.StatusCode == http.StatusOK {
			// A voucher streams through: when the portal breaks off after
			// the status is out, an aborted transfer is the honest answer.
			r.outcome("voucher: transfer aborted")
			return nil
		}
		r.tally.violate(Violation{Kind: KindMalformed, Detail: fmt.Sprintf("%s: reading the body: %v (after %d bytes)", what, redactErr(err), len(body))})
		return nil
	}

	var vs []string
	bad := func(format string, args ...any) { vs = append(vs, fmt.Sprintf(format, args...)) }
	if err := r.contract.check(u, resp.StatusCode, resp.Header, body); err != nil {
		bad("against api/openapi.yaml: %v", firstLine(err.Error()))
	}
	var doc *answerDoc
	if q.op == aggregator.Voucher {
		r.checkVoucher(resp, body, bad)
	} else {
		doc = r.checkQuery(q, resp, body, bad)
	}
	for _, v := range vs {
		r.tally.violate(Violation{Kind: KindMalformed, Detail: what + ": " + v})
	}
	return doc
}

// count tallies one answer and checks its status and its latency: the
// time the replica's handler took (the client's own when that is unknown),
// less the time the process could not run, must be within budget + margin.
func (r *run) count(label string, op aggregator.Operation, status int, client time.Duration, h handled, timed bool, budget time.Duration, what string) {
	t := r.tally
	t.mu.Lock()
	t.requests[label]++
	if status == 0 {
		t.statuses[fmt.Sprintf("%s aborted", op)]++
	} else {
		t.statuses[fmt.Sprintf("%s %d", op, status)]++
	}
	t.latencies = append(t.latencies, client)
	t.clientMaxOver = max(t.clientMaxOver, client-budget)
	if timed {
		t.handlerMax = max(t.handlerMax, h.d)
	}
	over := h.d - budget
	if over > 0 {
		t.overBudget++
		t.maxOver = max(t.maxOver, over)
	}
	t.mu.Unlock()
	if over > r.opts.Margin {
		// Time the process could not run is no one's budget.
		stalled := r.stalls.during(h.start, h.start.Add(h.d))
		if over-stalled > r.opts.Margin {
			t.violate(Violation{Kind: KindLatency, Detail: fmt.Sprintf(
				"%s after %s (%s at the client): %s over its budget of %s (margin %s), %s of it with the process stalled",
				what, h.d.Round(time.Millisecond), client.Round(time.Millisecond), over.Round(time.Millisecond),
				budget, r.opts.Margin, stalled.Round(time.Millisecond))})
		} else {
			t.mu.Lock()
			t.excused++
			t.maxExcused = max(t.maxExcused, over)
			t.mu.Unlock()
		}
	}
	allowed := map[int]bool{http.StatusOK: true, http.StatusServiceUnavailable: true}
	if op == aggregator.Voucher {
		allowed[http.StatusBadGateway] = true
		allowed[http.StatusGatewayTimeout] = true
	}
	if op == aggregator.Voucher && status == 0 {
		return // an aborted transfer: see send
	}
	if !allowed[status] {
		t.violate(Violation{Kind: KindStatus, Detail: what + ": a status this request may not answer"})
	}
}

func (r *run) outcome(key string) {
	r.tally.mu.Lock()
	r.tally.outcomes[key]++
	r.tally.mu.Unlock()
}

// slug is the problem slug of a type URI of this run's base.
func slug(typ string) (string, bool) { return strings.CutPrefix(typ, problemBaseURI) }

func (r *run) checkQuery(q request, resp *http.Response, body []byte, bad func(string, ...any)) *answerDoc {
	if !strings.Contains(resp.Header.Get("Cache-Control"), "no-store") {
		bad("Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
	}
	var doc answerDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		bad("not JSON: %v", err)
		return nil
	}
	if n := len(doc.Sources); n != len(r.portals) {
		bad("%d sources, want %d", n, len(r.portals))
	}
	succeeded, failed, skipped := 0, 0, 0
	for _, s := range doc.Sources {
		switch s.Status {
		case aggregator.EntrySucceeded:
			succeeded++
			r.outcome("succeeded")
			if s.Problem != nil {
				bad("source %s succeeded with a problem", s.Source)
			}
			continue
		case aggregator.EntryFailed:
			failed++
		case aggregator.EntrySkipped:
			skipped++
		default:
			bad("source %s has status %q", s.Source, s.Status)
		}
		if s.Problem == nil {
			bad("source %s is %s without a problem", s.Source, s.Status)
			continue
		}
		sl, ok := slug(s.Problem.Type)
		if !ok {
			bad("source %s: problem type %q is not of base %s", s.Source, s.Problem.Type, problemBaseURI)
		}
		r.outcome(sl)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if doc.Query.Domain != q.domain || doc.Query.ID != q.id {
			bad("query echoed as %+v", doc.Query)
		}
		if doc.Summary.Total != len(doc.Sources) || doc.Summary.Succeeded != succeeded ||
			doc.Summary.Failed != failed || doc.Summary.Skipped != skipped {
			bad("summary %+v does not count the %d sources (%d succeeded, %d failed, %d skipped)",
				doc.Summary, len(doc.Sources), succeeded, failed, skipped)
		}
		if doc.Complete == nil || *doc.Complete != (succeeded == len(doc.Sources)) {
			bad("complete is %v with %d of %d sources succeeded", doc.Complete, succeeded, len(doc.Sources))
		}
		if succeeded == 0 {
			bad("200 without any source succeeded")
		}
	case http.StatusServiceUnavailable:
		if sl, _ := slug(doc.Type); sl != "no-source-available" {
			bad("503 of type %q, want no-source-available", doc.Type)
		}
		if succeeded > 0 {
			bad("503 with %d sources succeeded", succeeded)
		}
		r.outcome("(503 no-source-available)")
	}
	return &doc
}

func (r *run) checkVoucher(resp *http.Response, body []byte, bad func(string, ...any)) {
	if !strings.Contains(resp.Header.Get("Cache-Control"), "no-store") {
		bad("Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
	}
	if resp.StatusCode == http.StatusOK {
		r.outcome("voucher: delivered")
		// Whatever the portal sends goes through with its content type (a
		// portal answering garbage included); a PDF must be whole.
		whole := bytes.HasPrefix(body, []byte("%PDF-")) && bytes.HasSuffix(bytes.TrimRight(body, "\r\n"), []byte("%%EOF"))
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/pdf") && !whole {
			bad("a voucher that is not a whole PDF (%d bytes)", len(body))
		}
		return
	}
	var p struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		bad("not a problem: %v", err)
		return
	}
	sl, ok := slug(p.Type)
	if !ok {
		bad("problem type %q is not of base %s", p.Type, problemBaseURI)
	}
	r.outcome("voucher: " + sl)
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		bad("503 %s without Retry-After", sl)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// redactErr writes err without the URL a client error quotes: it holds
// the query, plate or CUIT included.
func redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}
