package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/client"
)

// watch receive verifies each delivery with the key's secret: a good one
// is printed (once: a second delivery of the same webhook-id is noted as
// such), a forged one refused with 401.
func TestWatchReceive(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	var out syncBuffer
	r := &receiver{secret: secret, out: &out, seen: map[string]bool{}}
	ev := client.WatchEvent{Type: client.EventInfractionsChanged, Timestamp: time.Now(), Data: client.WatchEventData{
		WatchID: "w_x", Subject: client.WatchSubject{Domain: "AB123CD"}, CheckedAt: time.Now(), BaselineSources: []string{}}}
	ev.Data.Changes.Added = append(ev.Data.Changes.Added, exampleInfraction("Q-12001", "unpaid"))
	ev.Data.Changes.Changed = append(ev.Data.Changes.Changed, client.InfractionChange{Before: exampleInfraction("Q-1", "unpaid"), After: exampleInfraction("Q-1", "paid")})
	body, _ := json.Marshal(ev)
	post := func(id, key string) int {
		now := time.Now()
		sig, err := client.SignWebhook(key, id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
		req.Header.Set(client.HeaderWebhookID, id)
		req.Header.Set(client.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(client.HeaderWebhookSignature, sig)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		return w.Code
	}
	if got := post("msg_w_x_2", secret); got != http.StatusNoContent {
		t.Errorf("a good delivery: %d", got)
	}
	if got := post("msg_w_x_2", secret); got != http.StatusNoContent {
		t.Errorf("the same delivery again: %d", got)
	}
	if got := post("msg_w_x_3", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"); got != http.StatusUnauthorized {
		t.Errorf("a delivery signed with another key: %d, want 401", got)
	}
	got := squeeze(out.String())
	for _, want := range []string{
		"msg_w_x_2 verified: watch w_x, AB123CD, changes",
		"+ caba Q-12001 2026-03-20T08:30:00-03:00 210000.00 ARS unpaid",
		"~ caba Q-1 2026-03-20T08:30:00-03:00 210000.00 ARS paid", "was 2026-03-20T08:30:00-03:00 210000.00 ARS unpaid",
		"msg_w_x_2 again (a retry, or a check run twice): already shown",
		"refused: no matching webhook signature",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	// The command itself: it needs a secret, and serves until its
	// context ends.
	var stdout, stderr syncBuffer
	if err := run(context.Background(), []string{"watch", "receive"}, noEnv, &stdout, &stderr); exitCode(err) != 2 ||
		!strings.Contains(stderr.String(), "--secret (or $AGGREGATOR_WEBHOOK_SECRET) is required") {
		t.Errorf("without a secret: %v, %s", err, stderr.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"watch", "receive", "--listen", "127.0.0.1:0", "--secret", secret}, noEnv, &stdout, &stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stdout.String(), "receiving deliveries on") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch receive ended with %v", err)
	}
}

func exampleInfraction(id, status string) aggregator.Infraction {
	return aggregator.Infraction{Source: "caba", Jurisdiction: "Ciudad de Buenos Aires", ID: id, Date: "2026-03-20T08:30:00-03:00",
		Amount: "210000.00", Currency: "ARS", Status: aggregator.Status(status)}
}
