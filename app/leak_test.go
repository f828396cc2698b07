package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

// TestMain fails the package's tests if any goroutine is still running
// once they are done: servers, clients and background loops started by a
// test must all be stopped by it.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // go-redis's reconnection attempts while a test's Redis fails over
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Close releases everything the App started, its pooled connections to
// the portals included: nothing it made outlives it while the portals live
// on.
func TestCloseReleasesEverything(t *testing.T) {
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items": [{"id": "A-1"}]}`))
	}))
	defer portal.Close()
	before := goleak.IgnoreCurrent()

	cfg, err := config.Parse([]byte(`problems: {base_uri: "https://problems.test/"}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: `+portal.URL+`
    operations: {by_domain: {path: "/q?d={domain}"}}
    response: {items: /items, fields: {id: /id}}
`), "close.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.Server.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/infractions?domain=AB123CD", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("query: got %d, want 200: %s", rec.Code, rec.Body)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}
