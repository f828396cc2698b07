package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/internal/apptest"
	"github.com/multas/aggregator/portalsim"
)

// TestEventSourceInBrowser: a browser's EventSource, which cannot send an
// API key or any other header, reads a streamed query where no key is
// required: each source's event, ids 1 to 3, then the summary. The stream
// then ends; the browser, told to wait a day before it reconnects (and it
// would get a 204 then), does not run the query again.
func TestEventSourceInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	path := chromium(t)
	var js []portalsim.Jurisdiction
	faults := map[string]portalsim.Fault{
		"caba":    {Mode: portalsim.Healthy},
		"cordoba": {Mode: portalsim.Slow, Latency: 200 * time.Millisecond},
		"rosario": {Mode: portalsim.Down},
	}
	for _, j := range portalsim.Demo() {
		if f, ok := faults[j.ID]; ok {
			j.Fault = f
			js = append(js, j)
		}
	}
	env := apptest.Start(t, js, "problems: {base_uri: \"https://aggregator.example/problems/\"}\ndefaults: {retry: {max_retries: 0}}\n", app.Options{})
	// Every query the browser sends, reconnections included.
	var queries, reconnections atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/infractions" {
			queries.Add(1)
			if r.Header.Get("Last-Event-ID") != "" {
				reconnections.Add(1)
			}
		}
		env.App.Server.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	b := startBrowser(t, path)
	// A page of the aggregator's own origin, whose policy lets it connect
	// to that origin.
	b.do(t, "open the dashboard", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("token-form")))
	b.eval(t, fmt.Sprintf(`(() => {
		window.received = [];
		const es = new EventSource('/v1/infractions?domain=%s&sources=caba,cordoba,rosario');
		for (const name of ['source', 'summary', 'message']) {
			es.addEventListener(name, (e) => window.received.push({name, id: e.lastEventId, data: JSON.parse(e.data)}));
		}
		es.onerror = () => { window.ended = es.readyState; };
		window.es = es;
		return 'opened';
	})()`, portalsim.DemoPlate))
	b.waitUntil(t, `window.received.some((e) => e.name === 'summary')`)

	var got []struct {
		Name string `json:"name"`
		ID   string `json:"id"`
		Data struct {
			Type        string            `json:"type"`
			Source      string            `json:"source"`
			Status      string            `json:"status"`
			Infractions []json.RawMessage `json:"infractions"`
			Summary     struct {
				Total, Succeeded, Failed int
			} `json:"summary"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(b.eval(t, `JSON.stringify(window.received)`)), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("the browser received %d events, want 3 sources and the summary: %+v", len(got), got)
	}
	statuses := map[string]string{}
	for i, ev := range got {
		if want := fmt.Sprint(i + 1); ev.ID != want || ev.Name != ev.Data.Type {
			t.Errorf("event %d: id %q name %q type %q, want id %s named after its type", i+1, ev.ID, ev.Name, ev.Data.Type, want)
		}
		if ev.Name == "source" {
			statuses[ev.Data.Source] = ev.Data.Status
		}
		if ev.Data.Source == "caba" && len(ev.Data.Infractions) != 2 {
			t.Errorf("caba's event holds %d infractions, want 2", len(ev.Data.Infractions))
		}
	}
	if fmt.Sprint(statuses) != "map[caba:succeeded cordoba:succeeded rosario:failed]" {
		t.Errorf("source events %v", statuses)
	}
	if sum := got[3].Data.Summary; got[3].Name != "summary" || sum.Total != 3 || sum.Succeeded != 2 || sum.Failed != 1 {
		t.Errorf("summary %+v, want 3 sources, 2 succeeded, 1 failed", got[3])
	}

	// The stream has ended: the browser waits to reconnect (CONNECTING),
	// longer than its default three seconds.
	b.waitUntil(t, `window.ended === EventSource.CONNECTING`)
	time.Sleep(4 * time.Second)
	if n, r := queries.Load(), reconnections.Load(); n != 1 || r != 0 {
		t.Errorf("%d queries (%d reconnections) after the stream ended, want the one", n, r)
	}
	b.eval(t, `(() => { window.es.close(); return 'closed'; })()`)
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported: %v", p)
	}
}
