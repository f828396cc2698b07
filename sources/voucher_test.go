package sources

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/multas/aggregator"
)

// voucherPortal answers every voucher request with body, under the
// Content-Type given by the infraction id's query parameter ct ("-" for
// none at all: not even the one net/http would sniff).
func voucherPortal(t *testing.T, body string) string {
	t.Helper()
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
		switch ct := r.URL.Query().Get("ct"); ct {
		case "-":
			w.Header()["Content-Type"] = nil
		default:
			w.Header().Set("Content-Type", ct)
		}
		io.WriteString(w, body)
	})
	return srv.URL
}

// voucherSpec is testSpec whose voucher path puts the infraction id in
// the query parameter ct.
func voucherSpec(base string) Spec {
	s := testSpec(base)
	s.Operations[aggregator.Voucher] = OperationSpec{Path: "/boleta?ct={infraction_id}"}
	return s
}

// A voucher is relayed only with a media type of the source's
// voucher_types (SPEC 9): parameters and case do not matter; anything
// else, no Content-Type or one that does not parse is Unreadable
// (source-error), the body unread.
func TestVoucherTypes(t *testing.T) {
	t.Parallel()
	const pdf = "%PDF-1.7"
	base := voucherPortal(t, pdf)
	def := newSource(t, voucherSpec(base), nil)
	custom := voucherSpec(base)
	custom.VoucherTypes = []string{"Image/SVG+XML", "application/pdf"}
	svg := newSource(t, custom, nil)

	tests := []struct {
		src       *Source
		ct        string
		wantType  string // the relayed Content-Type; "" when refused
		wantMedia string
	}{
		{def, "application/pdf", "application/pdf", "application/pdf"},
		{def, "Application/PDF; Name=\"boleta.pdf\"", `application/pdf; name=boleta.pdf`, "application/pdf"},
		{def, "image/png", "image/png", "image/png"},
		{def, "image/jpeg", "image/jpeg", "image/jpeg"},
		{def, "application/pdf; broken", "application/pdf", "application/pdf"},
		{def, "text/html", "", ""},
		{def, "text/html; charset=utf-8", "", ""},
		{def, "image/svg+xml", "", ""},
		{def, "application/xhtml+xml", "", ""},
		{def, "application/octet-stream", "", ""},
		{def, "text/plain", "", ""},
		{def, "application/pdf+html", "", ""},
		{def, "-", "", ""},
		{def, "   ", "", ""},
		{def, "application", "", ""},
		{def, "/pdf", "", ""},
		{def, "application/pdf/x", "", ""},
		{def, "\"application/pdf\"", "", ""},
		{def, "*/*", "", ""},
		{svg, "image/svg+xml", "image/svg+xml", "image/svg+xml"},
		{svg, "application/pdf", "application/pdf", "application/pdf"},
		{svg, "image/png", "", ""},
	}
	for _, tt := range tests {
		v, err := tt.src.Voucher(context.Background(), tt.ct)
		if tt.wantType == "" {
			if v != nil {
				v.Body.Close()
			}
			e := checkError(t, err, aggregator.Unreadable, http.StatusOK, 0)
			if strings.Contains(e.Error(), "<") {
				t.Errorf("%q: error %q", tt.ct, e)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v, want the voucher", tt.ct, err)
			continue
		}
		b, err := io.ReadAll(v.Body)
		v.Body.Close()
		if err != nil || string(b) != pdf || v.ContentType != tt.wantType || v.MediaType != tt.wantMedia {
			t.Errorf("%q: got %q (%v) as %q (%q), want %q as %q (%q)", tt.ct, b, err, v.ContentType, v.MediaType, pdf, tt.wantType, tt.wantMedia)
		}
	}
}

// A voucher is bounded by voucher_max_bytes: over it by Content-Length is
// Unreadable before anything is read; over it without Content-Length, the
// body yields exactly the bound and then ErrVoucherTooLarge.
func TestVoucherSize(t *testing.T) {
	t.Parallel()
	const limit = 1000
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
		// /boleta/N or /boleta/N-chunked
		size, chunked := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/boleta/"), "-chunked")
		n, _ := strconv.Atoi(size)
		w.Header().Set("Content-Type", "application/pdf")
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		for sent := 0; sent < n; sent += 100 {
			io.WriteString(w, strings.Repeat("x", min(100, n-sent)))
			http.NewResponseController(w).Flush()
		}
	})
	spec := testSpec(srv.URL)
	spec.Operations[aggregator.Voucher] = OperationSpec{Path: "/boleta/{infraction_id}"}
	spec.VoucherMaxBytes = limit
	s := newSource(t, spec, nil)

	tests := []struct {
		query   string
		refused bool // at once, by Content-Length
		tooBig  bool // while reading
	}{
		{query: "1000"},
		{query: "1000-chunked"},
		{query: "0"},
		{query: "1001", refused: true},
		{query: "100000", refused: true},
		{query: "1001-chunked", tooBig: true},
		{query: "100000-chunked", tooBig: true},
	}
	for _, tt := range tests {
		v, err := s.Voucher(context.Background(), tt.query)
		if tt.refused {
			checkError(t, err, aggregator.Unreadable, http.StatusOK, 0)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.query, err)
			continue
		}
		b, err := io.ReadAll(v.Body)
		v.Body.Close()
		switch {
		case tt.tooBig && (!errors.Is(err, ErrVoucherTooLarge) || len(b) != limit):
			t.Errorf("%s: read %d bytes, %v; want %d bytes and ErrVoucherTooLarge", tt.query, len(b), err, limit)
		case !tt.tooBig && err != nil:
			t.Errorf("%s: read %d bytes, %v", tt.query, len(b), err)
		}
		if tt.tooBig {
			if n, err := v.Body.Read(make([]byte, 10)); n != 0 || !errors.Is(err, ErrVoucherTooLarge) {
				t.Errorf("%s: a read after the limit: %d, %v", tt.query, n, err)
			}
		}
	}
}

func TestDefaultVoucherPolicy(t *testing.T) {
	t.Parallel()
	p, err := compileVoucherPolicy(nil, 0)
	if err != nil || p.max != 10<<20 || strings.Join(p.types, ",") != "application/pdf,image/png,image/jpeg" {
		t.Errorf("default policy: %+v, %v; want 10 MiB of application/pdf, image/png, image/jpeg", p, err)
	}
	for _, bad := range [][]string{{"pdf"}, {"application/pdf; q=1"}, {"image/*"}, {"*/*"}, {""}, {"a b/c"}} {
		if _, err := compileVoucherPolicy(bad, 0); err == nil {
			t.Errorf("voucher types %q: accepted", bad)
		}
	}
	if _, err := compileVoucherPolicy(nil, -1); err == nil {
		t.Errorf("voucher_max_bytes -1: accepted")
	}
}
