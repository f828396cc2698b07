package async

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

// FuzzDecode feeds bytes to each decoder of the values RedisStore reads
// back (kind picks it: a query document, a pending delivery, a DLQ entry),
// under the id it is read for. Never a panic; a value accepted is stored
// under that id, encodes again (the API's view of a query too) to a value
// decoded the same, a query's lookup is one NewQuery accepts, and a trace
// context kept is one this package writes.
func FuzzDecode(f *testing.F) {
	q := goodQuery()
	q.Parts[0].Infractions = []aggregator.Infraction{{Source: "caba", ID: "Q-1", Status: aggregator.Unpaid}}
	qdoc, _ := json.Marshal(q)
	person := goodQuery()
	person.Domain, person.PersonID, person.IDKind = "", "20314159269", aggregator.CUIT
	done := t0.Add(time.Minute)
	person.Status, person.CompletedAt = Expired, &done
	pdoc, _ := json.Marshal(person)
	d := &Delivery{ID: newID("dlv_"), MessageID: "msg_" + q.ID, QueryID: q.ID, CallbackURL: q.CallbackURL,
		Payload: json.RawMessage(`{"type":"query.completed"}`), CreatedAt: t0, Due: t0, Attempts: 2, LastError: "HTTP 500"}
	ddoc, _ := json.Marshal(d)
	e := DLQEntry{ID: d.ID, QueryID: q.ID, CallbackURL: q.CallbackURL, Attempts: 5, LastError: "HTTP 500",
		CreatedAt: t0, FailedAt: t0, Payload: d.Payload}
	edoc, _ := json.Marshal(dlqRecord{Entry: e, MessageID: d.MessageID})
	traced := goodQuery()
	traced.Trace = TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "vendor=v1"}
	tdoc, _ := json.Marshal(traced)
	td := *d
	td.Trace = traced.Trace
	tddoc, _ := json.Marshal(&td)
	e.Trace = traced.Trace
	tedoc, _ := json.Marshal(e.record())
	wid := "w_" + newID("")
	wdid, wmsg := WatchMessage(wid, 3)
	wd := &Delivery{ID: wdid, MessageID: wmsg, WatchID: wid, Signer: "fleet-co", CallbackURL: q.CallbackURL,
		Payload: json.RawMessage(`{"type":"infractions.changed"}`), CreatedAt: t0, Due: t0}
	wddoc, _ := json.Marshal(wd)
	we := DLQEntry{ID: wd.ID, WatchID: wid, CallbackURL: q.CallbackURL, Attempts: 5, LastError: "HTTP 500",
		CreatedAt: t0, FailedAt: t0, Payload: wd.Payload, MessageID: wmsg, Signer: "fleet-co"}
	wedoc, _ := json.Marshal(we.record())
	sd := *wd
	sd.Payload, sd.Sealed = nil, bytes.Repeat([]byte{1}, 80)
	sddoc, _ := json.Marshal(&sd)
	for _, seed := range []struct {
		kind uint8
		id   string
		doc  []byte
	}{
		{0, q.ID, qdoc}, {0, person.ID, pdoc}, {0, q.ID, []byte(`{}`)}, {0, q.ID, []byte(`null`)},
		{0, q.ID, bytes.Replace(qdoc, []byte("AB123CD"), []byte("ab123cd"), 1)},
		{1, d.ID, ddoc}, {1, d.ID, bytes.Replace(ddoc, []byte(`"attempts":2`), []byte(`"attempts":-2`), 1)},
		{2, e.ID, edoc}, {2, e.ID, []byte(`{"entry":{}}`)}, {2, "x", edoc},
		{0, traced.ID, tdoc}, {0, traced.ID, bytes.Replace(tdoc, []byte("-01\""), []byte("-02\""), 1)},
		{0, traced.ID, bytes.Replace(tdoc, []byte(`"vendor=v1"`), []byte(`"=,="`), 1)},
		{1, td.ID, tddoc}, {2, e.ID, tedoc},
		{1, wd.ID, wddoc}, {2, we.ID, wedoc}, {1, sd.ID, sddoc},
		{1, wd.ID, bytes.Replace(wddoc, []byte(`_3"`), []byte(`_03"`), 1)},
		{1, wd.ID, bytes.Replace(wddoc, []byte(`"watch_id"`), []byte(`"query_id":"`+q.ID+`","watch_id"`), 1)},
	} {
		f.Add(seed.kind, seed.id, seed.doc)
	}
	f.Fuzz(func(t *testing.T, kind uint8, id string, doc []byte) {
		var v any
		var again func([]byte) (any, bool)
		switch kind % 3 {
		case 0:
			q, ok, _ := decodeQuery(doc, id)
			if !ok {
				return
			}
			if !q.Trace.sound() {
				t.Errorf("query %s accepted with the trace context %+v", doc, q.Trace)
			}
			if _, bad := aggregator.NewQuery(q.Domain, q.PersonID, q.Domain != "", q.PersonID != ""); len(bad) > 0 {
				t.Errorf("query %s accepted with lookup %q %q: %v", doc, q.Domain, q.PersonID, bad)
			}
			if _, err := json.Marshal(q.View()); err != nil {
				t.Errorf("the view of %s does not encode: %v", doc, err)
			}
			v, again = q, func(b []byte) (any, bool) { q, ok, _ := decodeQuery(b, id); return q, ok }
		case 1:
			d, ok, _ := decodeDelivery(doc, id)
			if !ok {
				return
			}
			if !d.Trace.sound() {
				t.Errorf("delivery %s accepted with the trace context %+v", doc, d.Trace)
			}
			v, again = d, func(b []byte) (any, bool) { d, ok, _ := decodeDelivery(b, id); return d, ok }
		case 2:
			e, ok, _ := decodeDLQ(doc, id)
			if !ok {
				return
			}
			if !e.Trace.sound() {
				t.Errorf("DLQ entry %s accepted with the trace context %+v", doc, e.Trace)
			}
			v = e.record()
			again = func(b []byte) (any, bool) {
				e, ok, _ := decodeDLQ(b, id)
				return e.record(), ok
			}
		}
		enc, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s accepted, does not encode: %v", doc, err)
		}
		w, ok := again(enc)
		if !ok {
			t.Fatalf("%s accepted, encoded as %s, which is not", doc, enc)
		}
		if enc2, _ := json.Marshal(w); !bytes.Equal(enc, enc2) {
			t.Errorf("%s does not survive a round trip:\n%s\n%s", doc, enc, enc2)
		}
	})
}
