package apitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// The streamed answers of GET /v1/infractions (SPEC 14, Streaming): their
// media types, whose content schema in the document is the schema of each
// event (the data of an SSE event, one NDJSON line), as the operation's
// description says.
const (
	EventStream = "text/event-stream"
	NDJSON      = "application/x-ndjson"
)

// minRetry is the least `retry:` a stream may open with: a long delay, so
// that an EventSource does not come back at once.
const minRetry = 60_000

func isStream(mediaType string) bool {
	return mediaType == EventStream || mediaType == NDJSON
}

// Event is one event of a streamed answer.
type Event struct {
	ID   int    // the SSE id; 0 in NDJSON
	Name string // the SSE event name; empty in NDJSON
	Type string // the data's `type` member
	Data []byte // the event's data: one JSON document
}

// Stream reads a streamed answer event by event, as it arrives, and
// checks each against the document: the SSE framing (ids 1, 2, 3, … in
// order, an event name equal to the data's type, a long `retry:` before
// the first event), each event's data against the schema of its media
// type, and a summary that is the last event, after which the stream
// ends.
type Stream struct {
	schema *openapi3.Schema
	opts   []openapi3.SchemaValidationOption
	events *eventReader
	body   io.Closer
}

// Stream checks resp, a streamed answer, as Check would except its body,
// and returns the reader of its events; Close closes the body. It stops
// the test when resp is not a stream the document declares.
func (v *Validator) Stream(t testing.TB, resp *http.Response) *Stream {
	t.Helper()
	mt := mediaTypeOf(resp.Header)
	if resp.Request == nil || !isStream(mt) {
		resp.Body.Close()
		t.Fatalf("apitest: answer %d of type %q is not a stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	v.Check(t, resp.Request, resp.StatusCode, resp.Header, nil)
	schema, err := v.eventSchema(resp.Request, resp.StatusCode, mt)
	if err != nil {
		resp.Body.Close()
		t.Fatalf("apitest: %v", err)
	}
	return &Stream{schema: schema, opts: v.schemaOptions(), events: newEventReader(resp.Body, mt), body: resp.Body}
}

// Next waits for the next event and returns it, checked; false once the
// stream has ended (after its summary) or broke, which it reports.
func (s *Stream) Next(t testing.TB) (Event, bool) {
	t.Helper()
	ev, err := s.events.next(s.schema, s.opts)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			t.Errorf("apitest: stream: %v", err)
		}
		return Event{}, false
	}
	return ev, true
}

// Rest reads every event left, checked, until the stream ends.
func (s *Stream) Rest(t testing.TB) []Event {
	t.Helper()
	var out []Event
	for {
		ev, ok := s.Next(t)
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// Close closes the answer's body.
func (s *Stream) Close() error { return s.body.Close() }

// eventSchema is the schema of each event of the stream answering req
// with status in mediaType.
func (v *Validator) eventSchema(req *http.Request, status int, mediaType string) (*openapi3.Schema, error) {
	route, _, err := v.find(req.Method, req.URL)
	if err != nil {
		return nil, fmt.Errorf("no operation for %s %s: %w", req.Method, req.URL.Path, err)
	}
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return nil, fmt.Errorf("status %d of %s %s is not documented", status, route.Method, route.Path)
	}
	mt := ref.Value.Content.Get(mediaType)
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return nil, fmt.Errorf("status %d of %s %s declares no schema for %s", status, route.Method, route.Path, mediaType)
	}
	return mt.Schema.Value, nil
}

func (v *Validator) schemaOptions() []openapi3.SchemaValidationOption {
	opts := []openapi3.SchemaValidationOption{openapi3.VisitAsResponse(), openapi3.MultiErrors()}
	if v.doc.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	return opts
}

// checkStream checks a whole streamed body, event by event.
func (v *Validator) checkStream(req *http.Request, status int, mediaType string, body []byte) error {
	schema, err := v.eventSchema(req, status, mediaType)
	if err != nil {
		return err
	}
	r := newEventReader(bytes.NewReader(body), mediaType)
	for {
		if _, err := r.next(schema, v.schemaOptions()); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// eventReader parses the events of a stream in one of the two media types.
type eventReader struct {
	r       *bufio.Reader
	sse     bool
	n       int  // events read
	retry   bool // an SSE retry field was read
	summary bool // the summary was read: the stream must end
}

func newEventReader(r io.Reader, mediaType string) *eventReader {
	return &eventReader{r: bufio.NewReader(r), sse: mediaType == EventStream}
}

// next reads and checks the next event; io.EOF when the stream ended
// where it may (after its summary).
func (e *eventReader) next(schema *openapi3.Schema, opts []openapi3.SchemaValidationOption) (Event, error) {
	var ev Event
	var err error
	if e.sse {
		ev, err = e.sseEvent()
	} else {
		ev, err = e.ndjsonLine()
	}
	switch {
	case errors.Is(err, io.EOF) && e.summary:
		return Event{}, io.EOF
	case errors.Is(err, io.EOF):
		return Event{}, fmt.Errorf("the stream ended after %d events, before its summary", e.n)
	case err != nil:
		return Event{}, fmt.Errorf("event %d: %w", e.n+1, err)
	case e.summary:
		return Event{}, fmt.Errorf("an event after the summary: %s", ev.Data)
	}
	e.n++
	var doc struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(ev.Data, &doc); err != nil {
		return Event{}, fmt.Errorf("event %d is not JSON: %w: %s", e.n, err, ev.Data)
	}
	ev.Type = doc.Type
	var value any
	if err := json.Unmarshal(ev.Data, &value); err != nil {
		return Event{}, fmt.Errorf("event %d: %w", e.n, err)
	}
	if err := schema.VisitJSON(value, opts...); err != nil {
		return Event{}, fmt.Errorf("event %d does not match its schema: %w\ndata: %s", e.n, err, ev.Data)
	}
	if e.sse {
		if ev.ID != e.n {
			return Event{}, fmt.Errorf("event %d has id %d", e.n, ev.ID)
		}
		if ev.Name != ev.Type {
			return Event{}, fmt.Errorf("event %d is named %q, its data's type is %q", e.n, ev.Name, ev.Type)
		}
		if !e.retry {
			return Event{}, errors.New("the stream set no retry before its first event")
		}
	}
	e.summary = ev.Type == "summary"
	return ev, nil
}

// sseEvent reads the lines of one SSE event, up to the blank line that
// dispatches it: exactly one id, event and data field each.
func (e *eventReader) sseEvent() (Event, error) {
	var ev Event
	seen := map[string]bool{}
	for {
		line, err := e.r.ReadString('\n')
		if err != nil {
			if len(seen) == 0 && line == "" {
				return ev, err
			}
			return ev, fmt.Errorf("cut off inside an event (%q): %v", line, err)
		}
		line = strings.TrimSuffix(line, "\n")
		if strings.HasSuffix(line, "\r") {
			return ev, fmt.Errorf("line %q ends in CR LF; the server writes LF alone", line)
		}
		if line == "" {
			if !seen["data"] {
				return ev, errors.New("a block without data: it dispatches no event")
			}
			return ev, nil
		}
		name, value, ok := strings.Cut(line, ": ")
		if !ok {
			return ev, fmt.Errorf("line %q is not a field", line)
		}
		if seen[name] {
			return ev, fmt.Errorf("field %s twice in one event", name)
		}
		seen[name] = true
		switch name {
		case "retry":
			n, err := strconv.Atoi(value)
			if err != nil || n < minRetry || e.n > 0 {
				return ev, fmt.Errorf("retry %q: want one, of at least %d ms, before the first event", value, minRetry)
			}
			e.retry = true
		case "id":
			if ev.ID, err = strconv.Atoi(value); err != nil {
				return ev, fmt.Errorf("id %q is not a number", value)
			}
		case "event":
			ev.Name = value
		case "data":
			ev.Data = []byte(value)
		default:
			return ev, fmt.Errorf("unexpected field %q", name)
		}
		if seen["data"] && (!seen["id"] || !seen["event"]) {
			return ev, errors.New("data before the event's id and name")
		}
	}
}

// ndjsonLine reads one line of NDJSON.
func (e *eventReader) ndjsonLine() (Event, error) {
	line, err := e.r.ReadBytes('\n')
	if err != nil {
		if len(line) == 0 {
			return Event{}, err
		}
		return Event{}, fmt.Errorf("a line without its newline (%q): %v", line, err)
	}
	return Event{Data: bytes.TrimSuffix(line, []byte("\n"))}, nil
}
