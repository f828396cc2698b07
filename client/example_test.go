package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/problem"
)

// A query whose result is partial: two sources answered, the others are
// reported one by one, and the code branches on their problem types.
func ExampleClient_ByDomain() {
	base, stop := demoAggregator() // an aggregator over simulated portals
	defer stop()

	c, err := client.New(base)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.ByDomain(context.Background(), "AB-123-CD")
	if err != nil {
		fmt.Println("no result:", err)
		return
	}
	fmt.Printf("%s: complete=%v, %d infractions from %d of %d sources\n",
		res.Query.Domain, res.Complete, len(res.Infractions), res.Summary.Succeeded, res.Summary.Total)

	failed := client.SourceErrors(res)
	for _, s := range res.Sources {
		p, ok := failed[s.Source]
		switch {
		case !ok:
			fmt.Printf("%-8s %d found\n", s.Source, *s.Count)
		case errors.Is(p, problem.CircuitOpen):
			wait, _ := client.RetryAfter(p)
			fmt.Printf("%-8s not consulted (circuit open), ask again in %v\n", s.Source, wait)
		case errors.Is(p, problem.SourceUnavailable):
			fmt.Printf("%-8s unavailable, worth retrying soon\n", s.Source)
		default:
			fmt.Printf("%-8s %s\n", s.Source, p.Slug)
		}
	}
	// Output:
	// AB123CD: complete=false, 3 infractions from 2 of 5 sources
	// caba     2 found
	// cordoba  not consulted (circuit open), ask again in 30s
	// pba      rate-limited
	// rosario  unavailable, worth retrying soon
	// santafe  1 found
}

// A streamed query: each source's part is printed as soon as that source
// has answered (or failed), so a slow portal holds back only its own
// line; the Result at the end has the counts of the whole answer.
func ExampleClient_StreamByDomain() {
	base, stop := demoAggregator() // an aggregator over simulated portals
	defer stop()

	c, err := client.New(base)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.StreamByDomain(context.Background(), "AB-123-CD", func(p aggregator.Part) error {
		if p.Problem != nil {
			fmt.Printf("%s: %s, %s\n", p.Source, p.Status, p.Problem.Slug)
			return nil
		}
		fmt.Printf("%s: %d found\n", p.Source, len(p.Infractions))
		return nil
	})
	if err != nil {
		fmt.Println("no result:", err)
		return
	}
	fmt.Printf("%s: complete=%v, %d of %d sources\n", res.Query.Domain, res.Complete, res.Summary.Succeeded, res.Summary.Total)
	// Unordered output:
	// caba: 2 found
	// cordoba: skipped, circuit-open
	// pba: failed, rate-limited
	// rosario: failed, source-unavailable
	// santafe: 1 found
	// AB123CD: complete=false, 2 of 5 sources
}

// Retrying a query when the aggregator says when: here the only source's
// breaker is open for another second, so no source is available, and the
// answer's retry_after says how long to wait.
func ExampleRetryAfter() {
	base, stop := recoveringAggregator() // mendoza's breaker just opened, for 1s
	defer stop()

	c, err := client.New(base)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for attempt := 1; attempt <= 3; attempt++ {
		res, err := c.ByDomain(ctx, "AB123CD", client.WithSources("mendoza"))
		if err == nil {
			fmt.Printf("attempt %d: complete=%v, %d infraction\n", attempt, res.Complete, len(res.Infractions))
			return
		}
		wait, ok := client.RetryAfter(err)
		if !ok {
			fmt.Println("giving up:", err)
			return
		}
		var u *client.Unavailable
		if errors.As(err, &u) {
			fmt.Printf("attempt %d: %s (%s: %s), retrying in %v\n", attempt, u.Slug, u.Sources[0].Source, u.Sources[0].Problem.Slug, wait)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
	// Output:
	// attempt 1: no-source-available (mendoza: circuit-open), retrying in 1s
	// attempt 2: complete=true, 1 infraction
}

// A webhook receiver: it verifies each delivery's signature before
// trusting its body, and answers 2xx only then.
func ExampleVerifyWebhook() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // webhooks.signing_secret

	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		if err := client.VerifyWebhook(secret, r.Header, body, client.DefaultWebhookTolerance, time.Now()); err != nil {
			fmt.Println("rejected:", err)
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		var ev client.WebhookEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, "invalid event", http.StatusBadRequest)
			return
		}
		fmt.Printf("%s %s: complete=%v, %d infraction(s)\n", ev.Type, ev.Data.ID, ev.Data.Result.Complete, len(ev.Data.Result.Infractions))
		w.WriteHeader(http.StatusNoContent)
	})

	// What the aggregator sends, signed with the same secret…
	body := []byte(`{"type":"query.completed","timestamp":"2026-03-20T10:00:40-03:00","data":{"id":"q1","status":"completed",` +
		`"result":{"query":{"domain":"AB123CD"},"complete":true,"summary":{"total":1,"succeeded":1,"failed":0,"skipped":0},` +
		`"infractions":[{"source":"caba","jurisdiction":"Ciudad de Buenos Aires","id":"Q-10442","status":"unpaid"}],` +
		`"sources":[{"source":"caba","jurisdiction":"Ciudad de Buenos Aires","operation":"by_domain","status":"succeeded","count":1}]}}}`)
	deliver := func(body []byte, signedBody []byte) int {
		now := time.Now()
		sig, err := client.SignWebhook(secret, "msg_2Y7bqB3", now, signedBody)
		if err != nil {
			panic(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/hooks/multas", bytes.NewReader(body))
		req.Header.Set(client.HeaderWebhookID, "msg_2Y7bqB3")
		req.Header.Set(client.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(client.HeaderWebhookSignature, sig)
		rec := httptest.NewRecorder()
		receiver.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println(deliver(body, body))

	// … and a forgery: the body was changed after signing.
	forged := bytes.Replace(body, []byte(`"unpaid"`), []byte(`"paid"`), 1)
	fmt.Println(deliver(forged, body))
	// Output:
	// query.completed q1: complete=true, 1 infraction(s)
	// 204
	// rejected: no matching webhook signature
	// 401
}

// demoAggregator starts the portals of the tests (caba and santafe
// healthy, rosario down, pba throttling, cordoba with its breaker forced
// open by an operator) and an aggregator in front of them.
func demoAggregator() (string, func()) {
	e, err := startEnv(jurisdictions(), baseYAML)
	if err != nil {
		panic(err)
	}
	if err := e.forceOpen("cordoba", "by_domain"); err != nil {
		e.Close()
		panic(err)
	}
	return e.URL, e.Close
}

// recoveringAggregator starts one portal, mendoza, whose last call failed
// and opened its breaker for a second; the portal has recovered since.
func recoveringAggregator() (string, func()) {
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.Demo() {
		if j.ID == "mendoza" {
			j.Fault = portalsim.Fault{Mode: portalsim.Flaky, FailRate: 1} // 503 to every call
			js = append(js, j)
		}
	}
	e, err := startEnv(js, strings.Replace(baseYAML, "breaker: {min_calls: 1000}", "breaker: {consecutive_failures: 1, open_for: 1s}", 1))
	if err != nil {
		panic(err)
	}
	c, err := client.New(e.URL)
	if err != nil {
		panic(err)
	}
	if _, err := c.ByDomain(context.Background(), portalsim.DemoPlate); !errors.Is(err, problem.NoSourceAvailable) {
		panic(fmt.Sprintf("tripping mendoza's breaker: %v", err))
	}
	if err := e.Sim.Portal("mendoza").SetFault(portalsim.Fault{Mode: portalsim.Healthy}); err != nil {
		panic(err)
	}
	return e.URL, e.Close
}
