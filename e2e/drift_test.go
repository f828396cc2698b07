package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// SPEC 13, mapping health: a portal changes its answers mid-run (a member
// renamed, a status text added, a captcha page) and the metrics, the
// mapping events and the admin section follow, with no plate, CUIT or DNI
// anywhere in them.

// driftYAML is a configuration of source caba at url, mapping SPEC 6's
// dialect with a captcha rule and drift thresholds; store is a store
// block, or "".
func driftYAML(url, store string) string {
	return fmt.Sprintf(`server: {admin_token: %q}
problems: {base_uri: %q}
query: {deadline: 3s, max_deadline: 10s}
defaults:
  timeout: 2s
  retry: {max_retries: 0}
  drift: {window: 1h, unmapped_ratio: 0.3, empty_ratio: 0.3}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: %q
    operations: %s
    response:
      items: /resultado/actas
      fields: {id: /nro, date: /fecha, description: /detalle, place: /lugar, amount: /monto, currency: /moneda, status: /estado}
      status_map: {IMPAGA: unpaid, PAGADA: paid}
      errors:
        - {when: /captcha, outcome: rejected, detail: /mensaje}
%s`, adminToken, baseURI, url, stdOps, store)
}

// portalActa is an acta as the portal writes it, with what it must never
// let out: the plate and the owner's CUIT and DNI as values, and an
// object keyed by the plate.
func portalActa(nro, status string) acta {
	return acta{"nro": nro, "fecha": "2026-03-14 09:12", "detalle": "Exceso de velocidad", "lugar": "Av. Lugones km 4",
		"monto": 185000, "moneda": "ARS", "estado": status, "dominio": "AB 123 CD",
		"titular":   map[string]any{"cuit": cuit, "dni": dni},
		"historial": map[string]any{plate: map[string]any{"fecha": "2025-01-01"}, cuitDigits: map[string]any{"fecha": "2024-01-01"}}}
}

// renamedActa is portalActa after the portal renamed monto.
func renamedActa(nro string) acta {
	a := portalActa(nro, "IMPAGA")
	a["importe"] = a["monto"]
	delete(a, "monto")
	return a
}

// captcha is the portal's challenge, in a 200.
func captcha() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"captcha": true, "mensaje": "Complete el captcha para %s"}`, plate)
	})
}

// mappingEvent is a mapping event as GET /v1/admin/events writes it.
type mappingEvent struct {
	Kind       string                    `json:"kind"`
	BreakerKey string                    `json:"breaker_key"`
	Operation  string                    `json:"operation"`
	From       string                    `json:"from"`
	To         string                    `json:"to"`
	Reason     string                    `json:"reason"`
	Source     string                    `json:"source"`
	Added      []string                  `json:"added"`
	Removed    []string                  `json:"removed"`
	Unmapped   map[string]map[string]int `json:"unmapped"`
	Evidence   map[string]float64        `json:"evidence"`
}

// mappingEvents reads GET /v1/admin/events?kind=mapping.
func (e *env) mappingEvents() []mappingEvent {
	e.t.Helper()
	resp, body := e.admin(http.MethodGet, "/events?kind=mapping", "")
	var doc struct {
		Events []mappingEvent `json:"events"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		e.t.Fatalf("GET /v1/admin/events?kind=mapping: %d %s", resp.StatusCode, body)
	}
	return doc.Events
}

// sourceMapping is the mapping section of GET /v1/admin/sources.
type sourceMapping struct {
	Items           int                       `json:"items"`
	Unmapped        map[string]map[string]int `json:"unmapped"`
	UnknownStatuses []struct {
		Text     string    `json:"text"`
		Count    int       `json:"count"`
		LastSeen time.Time `json:"last_seen"`
	} `json:"unknown_statuses"`
	ShapeChangedAt *time.Time `json:"shape_changed_at"`
}

func (e *env) sourceMapping(id string) sourceMapping {
	e.t.Helper()
	resp, body := e.admin(http.MethodGet, "/sources", "")
	var doc struct {
		Sources []struct {
			ID      string        `json:"id"`
			Mapping sourceMapping `json:"mapping"`
		} `json:"sources"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		e.t.Fatalf("GET /v1/admin/sources: %d %s", resp.StatusCode, body)
	}
	for _, s := range doc.Sources {
		if s.ID == id {
			return s.Mapping
		}
	}
	e.t.Fatalf("GET /v1/admin/sources: no source %s", id)
	return sourceMapping{}
}

// personalData is the plate, the CUIT and the DNI in every spelling a
// portal or a client may write them.
var personalData = []string{plate, "AB 123 CD", "AB-123-CD", "ab123cd", "ab 123", cuit, cuitDigits, "20 31415926 9", dni, "31.415.926"}

// noPersonalData checks that none of the texts holds the plate, the CUIT
// or the DNI.
func noPersonalData(t *testing.T, texts map[string]string) {
	t.Helper()
	for name, text := range texts {
		if text == "" {
			t.Errorf("%s: empty", name)
		}
		for _, pii := range personalData {
			if i := strings.Index(strings.ToUpper(text), strings.ToUpper(pii)); i >= 0 {
				t.Errorf("%s holds %q: …%s…", name, pii, text[max(0, i-200):min(len(text), i+200)])
			}
		}
	}
}

func TestPortalChangesMidRun(t *testing.T) {
	t.Parallel()
	p := newPortal(t, actas(portalActa("Q-1", "IMPAGA"), portalActa("Q-2", "PAGADA")))
	e := replica(t, "replica", driftYAML(p.URL, ""))
	lookup := func(wantStatus string) {
		t.Helper()
		checkEntry(t, e.byDomain(plate).entry(t, "caba"), wantStatus, map[string]string{"succeeded": "", "failed": "source-rejected"}[wantStatus])
	}

	// The portal as it always was: the first answers set the shape.
	for range 3 {
		lookup("succeeded")
	}
	if got := e.mappingEvents(); len(got) != 0 {
		t.Fatalf("mapping events before any change: %+v", got)
	}

	// monto renamed importe: the shape changes at once; the share of
	// items without an amount rises above 30% at the second answer.
	p.set(actas(renamedActa("Q-1"), renamedActa("Q-2")))
	lookup("succeeded")
	lookup("succeeded")
	// A status text the status_map does not know, and one that is a plate.
	p.set(actas(portalActa("Q-1", "VENCIDA"), portalActa("Q-2", "AB 123 CD")))
	lookup("succeeded")
	// A captcha page: refused by the errors rule, three times: the share
	// of lookups without items rises above 30% at the third.
	p.set(captcha())
	for range 3 {
		lookup("failed")
	}

	events := e.mappingEvents()
	var reasons []string
	for _, ev := range events {
		reasons = append(reasons, ev.Reason)
		if ev.Kind != "mapping" || ev.Source != "caba" || ev.BreakerKey != "caba" || ev.Operation != "by_domain" || ev.From != "" || ev.To != "" {
			t.Errorf("event %+v, want a mapping event of caba's by_domain without states", ev)
		}
		if ev.Evidence["window_seconds"] != 3600 {
			t.Errorf("event %s: window_seconds %v, want 3600", ev.Reason, ev.Evidence["window_seconds"])
		}
	}
	if want := []string{"shape", "unmapped_ratio", "empty_ratio"}; !reflect.DeepEqual(reasons, want) {
		t.Fatalf("mapping events %v, want %v: %+v", reasons, want, events)
	}
	if ev := events[0]; !reflect.DeepEqual(ev.Added, []string{"/importe"}) || !reflect.DeepEqual(ev.Removed, []string{"/monto"}) {
		t.Errorf("shape event: added %q, removed %q; want /importe added, /monto removed", ev.Added, ev.Removed)
	}
	if ev := events[1]; ev.Evidence["ratio"] != 0.4 || !reflect.DeepEqual(ev.Unmapped, map[string]map[string]int{"amount": {"missing": 4}}) {
		t.Errorf("unmapped_ratio event: ratio %v, unmapped %v; want 4 of 10 items without amount", ev.Evidence["ratio"], ev.Unmapped)
	}
	if ev := events[2]; ev.Evidence["ratio"] != 3.0/9 {
		t.Errorf("empty_ratio event: ratio %v, want 3 of 9 lookups", ev.Evidence["ratio"])
	}

	for sample, want := range map[string]float64{
		`aggregator_source_items_total{source="caba"}`:                                           12,
		`aggregator_source_lookups_total{result="items",source="caba"}`:                          6,
		`aggregator_source_lookups_total{result="empty",source="caba"}`:                          0,
		`aggregator_source_lookups_total{result="error",source="caba"}`:                          3,
		`aggregator_source_unmapped_total{field="amount",reason="missing",source="caba"}`:        4,
		`aggregator_source_unmapped_total{field="status",reason="unknown_status",source="caba"}`: 2,
		`aggregator_source_errors_matched_total{rule="0",source="caba"}`:                         3,
		`aggregator_source_shape_changes_total{source="caba"}`:                                   1,
	} {
		if got := e.metric(sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}

	m := e.sourceMapping("caba")
	if m.Items != 12 || !reflect.DeepEqual(m.Unmapped, map[string]map[string]int{"amount": {"missing": 4}, "status": {"unknown_status": 2}}) {
		t.Errorf("mapping section: items %d, unmapped %v", m.Items, m.Unmapped)
	}
	if len(m.UnknownStatuses) != 1 || m.UnknownStatuses[0].Text != "VENCIDA" || m.UnknownStatuses[0].Count != 1 {
		t.Errorf("unknown statuses %+v, want VENCIDA once (and never the plate)", m.UnknownStatuses)
	}
	if m.ShapeChangedAt == nil || time.Since(*m.ShapeChangedAt) > time.Minute {
		t.Errorf("shape_changed_at %v, want the rename's time", m.ShapeChangedAt)
	}

	_, metrics := e.get("/metrics")
	_, allEvents := e.admin(http.MethodGet, "/events", "")
	_, sources := e.admin(http.MethodGet, "/sources", "")
	noPersonalData(t, map[string]string{"/metrics": string(metrics), "/v1/admin/events": string(allEvents), "/v1/admin/sources": string(sources)})
}

// TestFleetRecordsAChangeOnce: two replicas that share Redis see one
// portal change; each counts it, one records the event for the fleet.
func TestFleetRecordsAChangeOnce(t *testing.T) {
	t.Parallel()
	url, prefix := fleetRedis(t)
	p := newPortal(t, actas(portalActa("Q-1", "IMPAGA")))
	store := fmt.Sprintf("store: {redis_url: %q, key_prefix: %q, timeout: 1s}\n", url, prefix)
	fl := fleet(t, 2, driftYAML(p.URL, store))
	for _, r := range fl {
		r.byDomain(plate)
	}
	p.set(actas(renamedActa("Q-1")))
	for _, r := range fl {
		checkEntry(t, r.byDomain(plate).entry(t, "caba"), "succeeded", "")
	}
	shapes := func(r *env) []mappingEvent {
		var out []mappingEvent
		for _, ev := range r.mappingEvents() {
			if ev.Reason == "shape" {
				out = append(out, ev)
			}
		}
		return out
	}
	// The claim and the event go to Redis off the lookup's path.
	eventually(t, 5*time.Second, "the shape event in the shared log", func() bool { return len(shapes(fl[0])) > 0 })
	time.Sleep(200 * time.Millisecond) // time for a second event, were the claim not held
	for i, r := range fl {
		if got := r.metric(`aggregator_source_shape_changes_total{source="caba"}`); got != 1 {
			t.Errorf("replica %d counted %v shape changes, want 1", i+1, got)
		}
		if got := shapes(r); len(got) != 1 || !reflect.DeepEqual(got[0].Added, []string{"/importe"}) {
			t.Errorf("replica %d shows the shape events %+v, want the rename once for the fleet", i+1, got)
		}
	}
	_, events := fl[1].admin(http.MethodGet, "/events", "")
	noPersonalData(t, map[string]string{"/v1/admin/events": string(events)})
}
