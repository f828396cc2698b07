package sources

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/document"
	"github.com/multas/aggregator/sources/mapping"
)

// ErrTooManyPages is the cause of a lookup whose answer had more pages than
// pagination.max_pages (source-error).
var ErrTooManyPages = errors.New("more pages than max_pages")

// ErrForeignPage is the cause of a lookup whose next page lies outside the
// source's origin (source-error). Its text carries no URL.
var ErrForeignPage = errors.New("next page outside the source's origin not followed")

// ErrPageKeptBack is the cause of a lookup whose next page the page gate
// (the rate limiter) kept back: the Error's Outcome is SkippedRateLimited.
var ErrPageKeptBack = errors.New("next page kept back by the rate limit")

type pageGateKey struct{}

// WithPageGate returns ctx carrying gate, which a paginated lookup calls
// before every page request after the first: a page spends the source's
// rate budget like a call (SPEC 8). A gate error ends the lookup: an
// *Error with Outcome SkippedRateLimited wrapping ErrPageKeptBack and the
// gate's error, or a Timeout when ctx ended meanwhile.
func WithPageGate(ctx context.Context, gate func(context.Context) error) context.Context {
	return context.WithValue(ctx, pageGateKey{}, gate)
}

// pageGate is ctx's page gate, or nil.
func pageGate(ctx context.Context) func(context.Context) error {
	g, _ := ctx.Value(pageGateKey{}).(func(context.Context) error)
	return g
}

// page is one answer of a lookup.
type page struct {
	infractions []aggregator.Infraction
	items       int // before match
	health      mapping.Health
	pause       time.Duration
	next        string // the next cursor or URL, as the answer gave it
	url         *url.URL
	last        bool // 404, 204 or no infractions: nothing more
}

// lookupPages follows the pages of a lookup (SPEC 8, Pagination): one
// request per page, every page after the first admitted by the page gate,
// any page's failure the lookup's.
func (s *Source) lookupPages(ctx context.Context, o *operation, v *values, subj mapping.Subject) (Answer, error) {
	p := s.spec.Pagination
	gate := pageGate(ctx)
	v.p[paramSize] = strconv.Itoa(p.Size)
	var ans Answer
	items := 0
	fail := func(err *Error) (Answer, error) {
		if err.Pause < ans.Pause {
			err.Pause = ans.Pause
		}
		// The pages read before count for the mapping's health too.
		h := ans.Health
		h.Add(err.Health)
		err.Health = h
		return Answer{}, err
	}
	for n := 0; ; n++ {
		if n > 0 && gate != nil {
			if err := gate(ctx); err != nil {
				if ctx.Err() != nil {
					return fail(transportError(ctx, err))
				}
				return fail(&Error{Outcome: aggregator.SkippedRateLimited, Err: fmt.Errorf("%w: %w", ErrPageKeptBack, err)})
			}
		}
		switch p.Style {
		case PageStyle:
			v.p[paramPage] = strconv.Itoa(p.Start + n)
		case OffsetStyle:
			v.p[paramOffset] = strconv.Itoa(p.Start + n*p.Size)
		}
		pg, err := s.lookupPage(ctx, o, v, subj)
		if err != nil {
			return fail(err)
		}
		ans.Infractions = append(ans.Infractions, pg.infractions...)
		ans.Pause = max(ans.Pause, pg.pause)
		ans.Health.Add(pg.health)
		if items += pg.items; items > s.mapping.MaxItems() {
			return fail(unreadable(http.StatusOK, 0, fmt.Errorf("the lookup's pages hold more than %d items (response.max_items)", s.mapping.MaxItems())))
		}
		more, err := s.nextPage(pg, v)
		if err != nil {
			return fail(err)
		}
		if !more {
			return ans, nil
		}
		if limit := p.MaxPages; limit > 0 && n+1 >= limit {
			return fail(unreadable(http.StatusOK, 0, fmt.Errorf("%w (%d)", ErrTooManyPages, limit)))
		}
	}
}

// nextPage sets v for the page after pg, and reports whether there is one.
func (s *Source) nextPage(pg page, v *values) (bool, *Error) {
	p := s.spec.Pagination
	if pg.last {
		return false, nil
	}
	switch p.Style {
	case PageStyle, OffsetStyle:
		return pg.items >= p.Size && pg.items > 0, nil
	case CursorStyle:
		if pg.next == "" {
			return false, nil
		}
		v.p[paramCursor] = pg.next
		return true, nil
	}
	if pg.next == "" {
		return false, nil
	}
	u, err := pg.url.Parse(pg.next)
	if err != nil {
		return false, unreadable(http.StatusOK, 0, errors.New("next page: not a URL"))
	}
	if !sameOrigin(s.base, u) {
		return false, unreadable(http.StatusOK, 0, ErrForeignPage)
	}
	u.Fragment, u.RawFragment = "", ""
	v.next = u.String()
	return true, nil
}

// asError is err as an *Error (every failure of do and read is one).
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Outcome: aggregator.Unavailable, Err: err}
}

// linkNext is the target of the first RFC 8288 Link with rel="next" (rel
// being a space-separated list of relation types, compared without regard
// to case), or "".
func linkNext(h http.Header) string {
	for _, field := range h.Values("Link") {
		for rest := field; rest != ""; {
			rest = strings.TrimLeft(rest, " \t,")
			if !strings.HasPrefix(rest, "<") {
				break
			}
			end := strings.IndexByte(rest, '>')
			if end < 0 {
				break
			}
			target := rest[1:end]
			rest = rest[end+1:]
			params := rest
			if i := nextLinkValue(rest); i >= 0 {
				params, rest = rest[:i], rest[i:]
			} else {
				rest = ""
			}
			if linkRelNext(params) {
				return target
			}
		}
	}
	return ""
}

// nextLinkValue is the index of the comma that ends a link-value's
// parameters (outside quotes), or -1.
func nextLinkValue(s string) int {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return i
		}
	}
	return -1
}

// linkRelNext reports whether link-params hold rel with type "next".
func linkRelNext(params string) bool {
	for _, param := range strings.Split(params, ";") {
		name, value, ok := strings.Cut(strings.TrimSpace(param), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "rel") {
			continue
		}
		value = strings.Trim(strings.TrimSpace(value), `"`)
		for _, rel := range strings.Fields(value) {
			if strings.EqualFold(rel, "next") {
				return true
			}
		}
		return false // only the first rel counts (RFC 8288 3.3)
	}
	return false
}

// compilePagination checks the pagination of s's spec and compiles its
// next selector.
func (s *Source) compilePagination() error {
	p := s.spec.Pagination
	var errs []error
	switch p.Style {
	case "":
		return nil
	case PageStyle, OffsetStyle:
		if p.Size < 1 {
			errs = append(errs, fmt.Errorf("pagination.size: required with style %s", p.Style))
		}
		if p.Next != "" {
			errs = append(errs, errors.New("pagination.next: goes with style cursor or link only"))
		}
	case CursorStyle:
		if p.Next == "" {
			errs = append(errs, errors.New("pagination.next: required with style cursor"))
		}
	case LinkStyle:
	default:
		errs = append(errs, fmt.Errorf("pagination.style: want page, offset, cursor or link, got %q", p.Style))
	}
	if p.Size < 0 || p.Start < 0 || p.MaxPages < 0 {
		errs = append(errs, errors.New("pagination: size, start and max_pages must not be negative"))
	}
	if p.Next != "" {
		f, _ := document.ParseFormat(s.spec.Response.Format)
		sel, err := document.Compile(f, s.spec.Response.Namespaces, p.Next)
		if err != nil {
			errs = append(errs, fmt.Errorf("pagination.next: %w", err))
		} else {
			s.next = &sel
		}
	}
	return errors.Join(errs...)
}
