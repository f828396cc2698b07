package sources

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/multas/aggregator"
)

// pagesPortal serves total items in pages of size, by page number, offset
// or cursor (the offset, written as "c<offset>"), with the next cursor or
// URL in the body (/paginacion/siguiente) or, for link with header, in a
// Link header.
func pagesPortal(t *testing.T, total, size int, style string, header bool) (*atomicServer, string) {
	t.Helper()
	as := &atomicServer{}
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
		as.calls.Add(1)
		q := r.URL.Query()
		var from int
		switch style {
		case PageStyle:
			n, _ := strconv.Atoi(q.Get("page"))
			from = (n - 1) * size
		case OffsetStyle, LinkStyle:
			from, _ = strconv.Atoi(q.Get("offset"))
		case CursorStyle:
			if c := q.Get("cursor"); c != "" {
				from, _ = strconv.Atoi(strings.TrimPrefix(c, "c"))
			}
		}
		var items []string
		for i := from; i < from+size && i < total; i++ {
			items = append(items, fmt.Sprintf(`{"nro": "P-%d", "estado": "IMPAGA"}`, i))
		}
		next := ""
		if from+size < total {
			switch style {
			case CursorStyle:
				next = fmt.Sprintf("c%d", from+size)
			case LinkStyle:
				next = fmt.Sprintf("/api/v2/actas?dominio=%s&offset=%d#frag", q.Get("dominio"), from+size)
			}
		}
		if header && next != "" {
			w.Header().Add("Link", `</other>; rel="prev", <`+next+`>; rel="next last"`)
			next = ""
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"resultado": {"actas": [%s]}, "paginacion": {"siguiente": %q}}`, strings.Join(items, ","), next)
	})
	return as, srv.URL
}

type atomicServer struct{ calls atomic.Int64 }

func TestPaginationStyles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, style, path, next string
		header                  bool
		start, total, max       int
		want                    int // requests; -1: too many pages
	}{
		{"page", PageStyle, "/api/v2/actas?dominio={domain}&page={page}&size={size}", "", false, 1, 7, 5, 3},
		{"page exact", PageStyle, "/api/v2/actas?dominio={domain}&page={page}&size={size}", "", false, 1, 6, 5, 3},
		{"offset", OffsetStyle, "/api/v2/actas?dominio={domain}&offset={offset}&limit={size}", "", false, 0, 7, 5, 3},
		{"cursor", CursorStyle, "/api/v2/actas?dominio={domain}&cursor={cursor}", "/paginacion/siguiente", false, 0, 7, 5, 3},
		{"link in body", LinkStyle, "/api/v2/actas?dominio={domain}&offset=0", "/paginacion/siguiente", false, 0, 7, 5, 3},
		{"link header", LinkStyle, "/api/v2/actas?dominio={domain}&offset=0", "", true, 0, 7, 5, 3},
		{"empty", PageStyle, "/api/v2/actas?dominio={domain}&page={page}&size={size}", "", false, 1, 0, 5, 1},
		{"too many", CursorStyle, "/api/v2/actas?dominio={domain}&cursor={cursor}", "/paginacion/siguiente", false, 0, 7, 2, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			as, base := pagesPortal(t, tc.total, 3, tc.style, tc.header)
			spec := testSpec(base)
			spec.Operations = map[aggregator.Operation]OperationSpec{aggregator.ByDomain: {Path: tc.path}}
			spec.Response.Fields = fields(map[string]string{"id": "/nro", "status": "/estado"})
			spec.Pagination = Pagination{Style: tc.style, Start: tc.start, Size: 3, Next: tc.next, MaxPages: tc.max}
			s := newSource(t, spec, nil)
			gated := 0
			ctx := WithPageGate(t.Context(), func(context.Context) error { gated++; return nil })
			a, err := s.Lookup(ctx, domainQuery)
			if tc.want < 0 {
				var e *Error
				if !errors.As(err, &e) || e.Outcome != aggregator.Unreadable || !errors.Is(err, ErrTooManyPages) {
					t.Fatalf("got %v, want source-error, too many pages", err)
				}
				if got := as.calls.Load(); got != int64(tc.max) {
					t.Errorf("requests: %d, want %d", got, tc.max)
				}
				return
			}
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if len(a.Infractions) != tc.total {
				t.Errorf("got %d infractions, want %d", len(a.Infractions), tc.total)
			}
			for i, inf := range a.Infractions {
				if want := fmt.Sprintf("P-%d", i); inf.ID != want {
					t.Errorf("infraction %d: %s, want %s", i, inf.ID, want)
				}
			}
			if got := as.calls.Load(); got != int64(tc.want) {
				t.Errorf("requests: %d, want %d", got, tc.want)
			}
			if gated != tc.want-1 {
				t.Errorf("page gate asked %d times, want %d (every page but the first)", gated, tc.want-1)
			}
		})
	}
}

// TestPageGateRefuses: a page the gate keeps back ends the lookup
// skipped rate-limited, its cause the gate's.
func TestPageGateRefuses(t *testing.T) {
	t.Parallel()
	as, base := pagesPortal(t, 7, 3, PageStyle, false)
	spec := testSpec(base)
	spec.Operations = map[aggregator.Operation]OperationSpec{aggregator.ByDomain: {Path: "/api/v2/actas?dominio={domain}&page={page}&size={size}"}}
	spec.Response.Fields = fields(map[string]string{"id": "/nro"})
	spec.Pagination = Pagination{Style: PageStyle, Start: 1, Size: 3, MaxPages: 5}
	s := newSource(t, spec, nil)
	budget := errors.New("no budget")
	ctx := WithPageGate(t.Context(), func(context.Context) error { return budget })
	_, err := s.Lookup(ctx, domainQuery)
	var e *Error
	if !errors.As(err, &e) || e.Outcome != aggregator.SkippedRateLimited || !errors.Is(err, budget) || !errors.Is(err, ErrPageKeptBack) {
		t.Fatalf("got %v, want skipped rate-limited", err)
	}
	if got := as.calls.Load(); got != 1 {
		t.Errorf("requests: %d, want 1", got)
	}
}

func TestLinkNext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fields []string
		want   string
	}{
		{nil, ""},
		{[]string{`<https://p.test/a?page=2>; rel="next"`}, "https://p.test/a?page=2"},
		{[]string{`<a>; rel=prev, <b>; rel=next`}, "b"},
		{[]string{`<a>; title="x, rel=next"; rel=prev`, `<b>; REL="Last Next"`}, "b"},
		{[]string{`<a>; rel=nextish`}, ""},
		{[]string{`<a`}, ""},
		{[]string{`garbage, <b>; rel=next`}, ""},
	} {
		h := http.Header{}
		for _, f := range tc.fields {
			h.Add("Link", f)
		}
		if got := linkNext(h); got != tc.want {
			t.Errorf("linkNext(%q) = %q, want %q", tc.fields, got, tc.want)
		}
	}
}

func FuzzLinkNext(f *testing.F) {
	f.Add(`<a>; rel="next", <b>; rel=prev`)
	f.Add(`<a>; title="\"x, y\""; rel=next`)
	f.Fuzz(func(t *testing.T, field string) {
		h := http.Header{"Link": {field}}
		got := linkNext(h)
		if got != "" && !strings.Contains(field, "<"+got+">") {
			t.Errorf("linkNext(%q) = %q, not a target of the field", field, got)
		}
	})
}
