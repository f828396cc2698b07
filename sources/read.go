package sources

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/document"
	"github.com/multas/aggregator/sources/mapping"
)

// lookupPage asks for one page of a lookup and reads it: an answer the
// mapping needs (every 2xx, and any answer when errors rules exist) is
// read whole (at most max_response_bytes) and mapped; any other answer is
// classified by its status, a 404 or a 204 meaning no infractions.
func (s *Source) lookupPage(ctx context.Context, o *operation, v *values, subj mapping.Subject) (page, *Error) {
	resp, err := s.do(ctx, o, v, s.lookupH)
	if err != nil {
		return page{}, asError(err)
	}
	defer resp.Body.Close()
	pg := page{pause: s.pause(resp), url: resp.Request.URL}
	code := resp.StatusCode
	if !s.mapping.NeedsBody(code) {
		if code == http.StatusNotFound || code == http.StatusNoContent {
			// No infractions here, once the answer is in: one that the
			// call's own timeout cut short is a timeout, as for any other
			// status.
			if err := drain(resp.Body); err != nil && ctx.Err() != nil {
				e := transportError(ctx, err)
				e.Pause = pg.pause
				return page{}, e
			}
			pg.last = true
			return pg, nil
		}
		drain(resp.Body)
		return page{}, statusError(code, pg.pause)
	}
	buf, e := s.readBody(ctx, resp, pg.pause)
	if e != nil {
		return page{}, e
	}
	defer s.release(buf)
	contentType := resp.Header.Get("Content-Type")
	mp, err := s.mapping.Read(ctx, mapping.Answer{Status: code, Body: *buf, ContentType: contentType}, subj)
	pg.health = mp.Health
	switch {
	case errors.Is(err, mapping.ErrNoRule):
		if code == http.StatusNotFound || code == http.StatusNoContent {
			pg.last = true
			return pg, nil
		}
		return page{}, statusError(code, pg.pause)
	case err != nil:
		e := answerError(ctx, code, pg.pause, err)
		e.Health = mp.Health
		return page{}, e
	}
	pg.infractions, pg.items = mp.Infractions, mp.Items
	if mp.NotFound || code < 200 || code > 299 {
		pg.last = true
		return pg, nil
	}
	if s.next != nil {
		d := mp.Doc
		if d == nil {
			if d, err = document.Parse(ctx, s.mapping.Format(), s.mapping.Charset(), *buf, contentType); err != nil {
				return page{}, answerError(ctx, code, pg.pause, err)
			}
		}
		root, err := d.Root()
		if err != nil {
			return page{}, answerError(ctx, code, pg.pause, err)
		}
		if v, ok, _ := d.First(*s.next, root); ok {
			pg.next = v.Text
		}
	}
	if pg.next == "" && s.spec.Pagination.Style == LinkStyle && s.next == nil {
		pg.next = linkNext(resp.Header)
	}
	return pg, nil
}

// readBody reads an answer's body, at most maxBytes of it, into a buffer
// of the source's pool (release it when done).
func (s *Source) readBody(ctx context.Context, resp *http.Response, pause time.Duration) (*[]byte, *Error) {
	if resp.ContentLength > s.maxBytes {
		return nil, unreadable(resp.StatusCode, pause, fmt.Errorf("answer larger than %d bytes", s.maxBytes))
	}
	buf := s.buffer()
	if n := resp.ContentLength; n > 0 && int64(cap(*buf)) <= n {
		*buf = make([]byte, 0, n+1) // room to see the EOF without growing
	}
	var over bool
	var err error
	*buf, over, err = readLimited(resp.Body, (*buf)[:0], s.maxBytes)
	switch {
	case err != nil:
		s.release(buf)
		// The answer was cut short: a connection failure (Status 0), not
		// an answer of the portal.
		e := transportError(ctx, err)
		e.Pause = pause
		return nil, e
	case over:
		s.release(buf)
		return nil, unreadable(resp.StatusCode, pause, fmt.Errorf("answer larger than %d bytes", s.maxBytes))
	}
	return buf, nil
}

// answerError classifies an answer that the mapping did not take: an
// errors rule decides by its outcome; a maintenance page is
// source-unavailable, reported with Status 503 so that the breaker counts
// it as it counts a 503 (SPEC 8 `unavailable`); work cut short by the
// call's context is a timeout; anything else is unreadable.
func answerError(ctx context.Context, status int, pause time.Duration, err error) *Error {
	var re *mapping.RuleError
	switch {
	case errors.As(err, &re):
		detail := re.Detail
		if detail == "" {
			detail = fmt.Sprintf("The portal's answer matched response.errors[%d] (%s).", re.Rule, re.Outcome)
		}
		e := &Error{Status: status, Pause: pause, Err: re, Detail: detail}
		switch re.Outcome {
		case mapping.Rejected:
			e.Outcome = aggregator.Rejected
		case mapping.Unavailable:
			// Counted like a 503, whatever the answer's status.
			e.Outcome, e.Status = aggregator.Unavailable, http.StatusServiceUnavailable
		case mapping.RateLimited:
			e.Outcome, e.Pause = aggregator.RateLimited, max(pause, re.RetryAfter)
		default:
			e.Outcome = aggregator.Unreadable
		}
		return e
	case errors.Is(err, mapping.ErrMaintenance):
		return &Error{Outcome: aggregator.Unavailable, Status: http.StatusServiceUnavailable, Pause: pause,
			Err: fmt.Errorf("%w, in a %d answer, counted as a 503", err, status)}
	case ctx.Err() != nil:
		e := transportError(ctx, err)
		e.Pause = pause
		return e
	}
	return unreadable(status, pause, err)
}

// Mapped is the set of fields that the source's mapping reads, by config
// name, in field order.
func (s *Source) Mapped() []string { return s.mapping.Mapped() }

// Inspect maps one answer of the portal (status, body, Content-Type) to a
// lookup for q as Lookup would, but reports every item and every field
// that did not map or normalise instead of stopping at the first (`aggregator
// sources check`). The error is what a lookup would make of the whole
// answer.
func (s *Source) Inspect(ctx context.Context, status int, body []byte, contentType string, q aggregator.Query) (mapping.Inspection, error) {
	return s.mapping.Inspect(ctx, mapping.Answer{Status: status, Body: body, ContentType: contentType},
		mapping.Subject{Op: q.Operation(), Value: q.Value()})
}
