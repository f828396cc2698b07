package client_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/problem"
)

// The watch methods against a real aggregator with watches on (a short
// min_interval, so that a first check comes within the test): create,
// get, list page by page, delete; the key's limit and an invalid interval
// as problems; the baseline delivered, verifiable with the key's webhook
// secret only, and decoding as a WatchEvent that encodes back to what was
// sent.
func TestWatchServer(t *testing.T) {
	t.Parallel()
	type delivery struct {
		header http.Header
		body   []byte
	}
	deliveries := make(chan delivery, 8)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		deliveries <- delivery{r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	keySecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the client test key's own secret"))
	header := strings.Replace(baseYAML, `server: {admin_token: "`+adminToken+`"}`, `server:
  admin_token: "`+adminToken+`"
  api_keys: [{name: fleet-co, key: fleet-key, rps: 100, webhook_secret: "`+keySecret+`"}]
memory: {key: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
watches: {min_interval: 1s, max_per_key: 3}
webhooks: {signing_secret: "`+webhookSecret+`", allow_private: true}`, 1)
	e := newEnv(t, header)
	rec := &recorder{}
	c := newClient(t, e.URL, client.WithAPIKey("fleet-key"), client.WithHTTPClient(&http.Client{Transport: rec}))
	v := apitest.New(t)
	checkLast := func() {
		t.Helper()
		got := rec.last()
		v.Check(t, got.req, got.status, got.header, got.body)
	}
	ctx := t.Context()

	if _, err := c.CreateWatch(ctx, client.WatchRequest{Domain: portalsim.DemoPlate, CallbackURL: receiver.URL, Interval: time.Millisecond}); !errors.Is(err, problem.InvalidQuery) {
		t.Errorf("an interval below min_interval: error %v, want invalid-query", err)
	}
	checkLast()
	w, err := c.CreateWatch(ctx, client.WatchRequest{Domain: portalsim.DemoPlate, CallbackURL: receiver.URL + "/hooks/multas",
		Sources: []string{"caba"}, Interval: 2 * time.Second})
	if err != nil {
		t.Fatalf("CreateWatch: %v", err)
	}
	checkLast()
	if w.WatchID == "" || w.Location != "/v1/watches/"+w.WatchID || w.Interval != 2*time.Second ||
		w.Subject.Domain != portalsim.DemoPlate || len(w.Sources) != 1 || w.Sources[0].Source != "caba" {
		t.Errorf("created %+v", w)
	}
	for _, plate := range []string{portalsim.DemoPlateOld, portalsim.DemoPlateMoto} {
		if _, err := c.CreateWatch(ctx, client.WatchRequest{Domain: plate, CallbackURL: receiver.URL}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateWatch(ctx, client.WatchRequest{Domain: portalsim.DemoPlateClean, CallbackURL: receiver.URL}); !errors.Is(err, problem.WatchLimit) {
		t.Errorf("past max_per_key: error %v, want watch-limit", err)
	}
	checkLast()

	var listed []string
	cursor := ""
	for {
		l, err := c.ListWatches(ctx, cursor, 2)
		if err != nil {
			t.Fatalf("ListWatches: %v", err)
		}
		checkLast()
		for _, w := range l.Watches {
			listed = append(listed, w.WatchID)
		}
		if l.NextCursor == nil {
			break
		}
		cursor = *l.NextCursor
	}
	if len(listed) != 3 || listed[0] != w.WatchID {
		t.Errorf("listed %v, want three, %s first", listed, w.WatchID)
	}

	var d delivery
	select {
	case d = <-deliveries:
	case <-time.After(15 * time.Second):
		t.Fatal("no baseline within 15s")
	}
	for d.header.Get(client.HeaderWebhookID) != "msg_"+w.WatchID+"_1" {
		select {
		case d = <-deliveries:
		case <-time.After(15 * time.Second):
			t.Fatal("no baseline of the first watch within 15s")
		}
	}
	if err := client.VerifyWebhook(keySecret, d.header, d.body, 0, time.Now()); err != nil {
		t.Errorf("VerifyWebhook with the key's secret: %v", err)
	}
	if err := client.VerifyWebhook(webhookSecret, d.header, d.body, 0, time.Now()); !errors.Is(err, client.ErrWebhookSignature) {
		t.Errorf("VerifyWebhook with the deployment's secret: %v, want ErrWebhookSignature", err)
	}
	if err := validate(t, "WatchEvent", d.body, false); err != nil {
		t.Errorf("delivery %s is not a WatchEvent: %v", d.body, err)
	}
	var ev client.WatchEvent
	if err := json.Unmarshal(d.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != client.EventInfractionsChanged || ev.Data.WatchID != w.WatchID || !ev.Data.Baseline ||
		len(ev.Data.BaselineSources) != 1 || len(ev.Data.Changes.Added) != 2 {
		t.Errorf("delivered %+v, want caba's baseline of 2", ev)
	}
	var sent, kept any
	again, _ := json.Marshal(ev)
	_ = json.Unmarshal(d.body, &sent)
	_ = json.Unmarshal(again, &kept)
	if !reflect.DeepEqual(sent, kept) {
		t.Errorf("the client's types changed the delivery:\nsent: %s\nkept: %s", d.body, again)
	}

	got, err := c.GetWatch(ctx, w.WatchID)
	if err != nil {
		t.Fatalf("GetWatch: %v", err)
	}
	checkLast()
	if got.LastCheckAt == nil || got.Sources[0].LastSuccessAt == nil || got.Sources[0].Problem != nil {
		t.Errorf("after a check: %+v", got)
	}
	if err := c.DeleteWatch(ctx, w.WatchID); err != nil {
		t.Fatalf("DeleteWatch: %v", err)
	}
	if _, err := c.GetWatch(ctx, w.WatchID); !errors.Is(err, problem.NotFound) {
		t.Errorf("a deleted watch: error %v, want not-found", err)
	}
	checkLast()
	if err := c.DeleteWatch(ctx, w.WatchID); !errors.Is(err, problem.NotFound) {
		t.Errorf("deleted twice: error %v, want not-found", err)
	}
}
