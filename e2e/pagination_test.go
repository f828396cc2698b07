package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Pagination (SPEC 8) through the real stack: one lookup follows a
// portal's pages, within max_pages, on the source's own origin, and every
// page after the first spends the source's rate budget.

// pagedPortal answers /actas?page=N&size=S with items [N*S-S, N*S) of
// total, and, when linkTo is set, a Link rel="next" header whose target is
// linkTo(N+1) while more remain.
func pagedPortal(total int, linkTo func(page int) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		page, err1 := strconv.Atoi(q.Get("page"))
		size, err2 := strconv.Atoi(q.Get("size"))
		if err1 != nil || err2 != nil || page < 1 || size < 1 {
			http.Error(w, "bad page", http.StatusBadRequest)
			return
		}
		items := []acta{}
		for i := (page - 1) * size; i < page*size && i < total; i++ {
			items = append(items, acta{"nro": fmt.Sprintf("P-%d", i), "fecha": "2026-03-14 09:12", "monto": 1000, "estado": "IMPAGA"})
		}
		if linkTo != nil && page*size < total {
			w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, linkTo(page+1)))
		}
		body, _ := json.Marshal(map[string]any{"resultado": map[string]any{"actas": items}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}

const (
	pagedOps = `{by_domain: {path: "/actas?dominio={domain}&page={page}&size={size}"}}`
	linkOps  = `{by_domain: {path: "/actas?dominio={domain}&page=1&size={size}"}}`
)

func TestPagination(t *testing.T) {
	t.Parallel()
	t.Run("three pages", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, pagedPortal(5, nil))
		e := startWith(t, source{id: "p", url: p.URL, ops: pagedOps,
			extra: []string{"pagination: {style: page, size: 2, max_pages: 3}"}})
		a := e.byDomain("AB123CD")
		checkEntry(t, a.entry(t, "p"), "succeeded", "")
		if got := len(a.result.Infractions); got != 5 {
			t.Errorf("got %d infractions, want 5 from 3 pages", got)
		}
		if got := p.calls(); got != 3 {
			t.Errorf("portal got %d requests, want 3", got)
		}
		if b := e.breaker("p", "by_domain"); b.Window.Calls != 1 {
			t.Errorf("breaker recorded %d calls, want 1 (one lookup)", b.Window.Calls)
		}
	})
	t.Run("more than max_pages", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, pagedPortal(7, nil))
		e := startWith(t, source{id: "p", url: p.URL, ops: pagedOps,
			extra: []string{"pagination: {style: page, size: 2, max_pages: 3}"}})
		a := e.byDomain("AB123CD")
		checkEntry(t, a.entry(t, "p"), "failed", "source-error")
		if got := p.calls(); got != 3 {
			t.Errorf("portal got %d requests, want 3 (max_pages)", got)
		}
		if b := e.breaker("p", "by_domain"); b.Window.Failures != 0 {
			t.Errorf("breaker counted %d failures, want 0 (source-error is not counted)", b.Window.Failures)
		}
	})
	t.Run("link to another origin", func(t *testing.T) {
		t.Parallel()
		other := newPortal(t, pagedPortal(5, nil))
		p := newPortal(t, pagedPortal(5, func(page int) string {
			return fmt.Sprintf("%s/actas?dominio=AB123CD&page=%d&size=2", other.URL, page)
		}))
		e := startWith(t, source{id: "p", url: p.URL, ops: linkOps,
			extra: []string{"pagination: {style: link, size: 2, max_pages: 5}"}})
		a := e.byDomain("AB123CD")
		en := a.entry(t, "p")
		checkEntry(t, en, "failed", "source-error")
		if en.Problem != nil && strings.Contains(en.Problem.Detail, "AB123CD") {
			t.Errorf("detail carries the plate: %q", en.Problem.Detail)
		}
		if got := other.calls(); got != 0 {
			t.Errorf("the other origin received %d requests, want 0", got)
		}
	})
	t.Run("relative link", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, pagedPortal(5, func(page int) string {
			return fmt.Sprintf("actas?dominio=AB123CD&page=%d&size=2", page)
		}))
		e := startWith(t, source{id: "p", url: p.URL, ops: linkOps,
			extra: []string{"pagination: {style: link, size: 2, max_pages: 5}"}})
		a := e.byDomain("AB123CD")
		checkEntry(t, a.entry(t, "p"), "succeeded", "")
		if got := len(a.result.Infractions); got != 5 {
			t.Errorf("got %d infractions, want 5", got)
		}
	})
	t.Run("budget exhausted mid-pagination", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, pagedPortal(5, nil))
		e := startWith(t, source{id: "p", url: p.URL, ops: pagedOps,
			extra: []string{"pagination: {style: page, size: 2, max_pages: 5}", "rate_limit: {rps: 0.1, burst: 2, max_wait: 0s}"}})
		a := e.byDomain("AB123CD")
		en := a.entry(t, "p")
		checkEntry(t, en, "skipped", "rate-limited")
		if en.Problem != nil && !strings.Contains(en.Problem.Detail, "page") {
			t.Errorf("detail %q does not say a page was kept back", en.Problem.Detail)
		}
		if en.Problem != nil && (en.Problem.RetryAfter == nil || *en.Problem.RetryAfter < 1) {
			t.Errorf("retry_after %v, want at least 1", en.Problem.RetryAfter)
		}
		if got := p.calls(); got != 2 {
			t.Errorf("portal got %d requests, want 2 (the burst)", got)
		}
		if b := e.breaker("p", "by_domain"); b.Window.Failures != 0 {
			t.Errorf("breaker counted %d failures, want 0", b.Window.Failures)
		}
	})
}
