package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/charmap"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

// TestResponseFormatsWired configures portals of every answer format and
// checks that the response keys of SPEC 8 reach the adapters: XPath with
// namespaces, CSS with a configured charset, and an unavailable marker.
func TestResponseFormatsWired(t *testing.T) {
	t.Parallel()
	latin1 := func(s string) []byte {
		b, err := charmap.Windows1252.NewEncoder().Bytes([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	portal := func(contentType string, body []byte) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", contentType)
			_, _ = w.Write(body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	soap := portal("text/xml", []byte(`<?xml version="1.0" encoding="UTF-8"?>
		<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body>
		<r:actas xmlns:r="urn:multas"><r:acta nro="X-1"><r:lugar>Rosario</r:lugar></r:acta></r:actas></s:Body></s:Envelope>`))
	page := portal("text/html", latin1(`<table id="actas"><tr data-acta="H-1"><td>Córdoba</td></tr></table>`))
	maint := portal("text/html; charset=utf-8", []byte(`<h1 class="mantenimiento">En mantenimiento</h1>`))
	yaml := fmt.Sprintf(`problems: {base_uri: "https://problems.test/"}
defaults: {retry: {max_retries: 0}}
sources:
  - id: soap
    jurisdiction: Santa Fe
    base_url: %s
    operations: {by_domain: {path: "/q?d={domain}"}}
    response:
      format: xml
      namespaces: {m: "urn:multas"}
      items: //m:acta
      fields: {id: "@nro", place: m:lugar}
  - id: page
    jurisdiction: Córdoba
    base_url: %s
    operations: {by_domain: {path: "/q?d={domain}"}}
    response:
      format: html
      charset: windows-1252
      items: "table#actas tr"
      not_found: p.sin-actas
      fields: {id: "@data-acta", place: td}
  - id: maint
    jurisdiction: Mendoza
    base_url: %s
    operations: {by_domain: {path: "/q?d={domain}"}}
    response:
      format: html
      items: "table#actas tr"
      not_found: p.sin-actas
      fields: {id: "@data-acta"}
      unavailable: h1.mantenimiento
`, soap, page, maint)
	cfg, err := config.Parse([]byte(yaml), "formats.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	q := aggregator.Query{Domain: "AB123CD"}
	set, _ := a.Engine.Select(q, nil)
	r := a.Engine.Query(context.Background(), q, set, 5*time.Second)
	places := map[string]string{}
	for _, inf := range r.Infractions {
		places[inf.ID] = inf.Place
	}
	if places["X-1"] != "Rosario" || places["H-1"] != "Córdoba" || len(places) != 2 {
		t.Errorf("infractions %+v, want X-1 at Rosario and H-1 at Córdoba", r.Infractions)
	}
	for _, e := range r.Sources {
		want := aggregator.EntrySucceeded
		if e.Source == "maint" {
			want = aggregator.EntryFailed
			if e.Problem == nil || !strings.HasSuffix(e.Problem.Type, "/source-unavailable") {
				t.Errorf("maint problem = %+v, want source-unavailable", e.Problem)
			}
		}
		if e.Status != want {
			t.Errorf("source %s: %s, want %s", e.Source, e.Status, want)
		}
	}
}
