package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/multas/aggregator"
)

// The media types of a streamed answer (SPEC 14, Streaming), for
// WithStreamFormat.
const (
	NDJSON      = "application/x-ndjson"
	EventStream = "text/event-stream"
)

// maxEvent bounds one event of a stream: a source's part, even with
// every infraction a lookup may map, is far smaller.
const maxEvent = 32 << 20

// WithStreamFormat sets the media type that StreamByDomain and StreamByID
// ask for: NDJSON (the default) or EventStream. Both carry the same
// events; any other value leaves the default.
func WithStreamFormat(mediaType string) Option {
	return func(c *Client) {
		if mediaType == NDJSON || mediaType == EventStream {
			c.streamFormat = mediaType
		}
	}
}

// StreamByDomain is ByDomain answered as a stream: each source's part (its
// entry, with its infractions) is handed to each as soon as that source
// has finished, in the order they finish, and the Result is returned once
// the stream's summary has arrived. Its Sources are in that order, its
// counts the server's.
//
// The errors are those of ByDomain: a problem the server answered before
// streaming (invalid-query, unauthorized…), an *Unavailable when no source
// succeeded (its Sources are the parts handed to each), or the error each
// returned, which ends the stream.
func (c *Client) StreamByDomain(ctx context.Context, domain string, each func(aggregator.Part) error, opts ...QueryOption) (*aggregator.Result, error) {
	return c.stream(ctx, "domain", domain, each, opts)
}

// StreamByID is ByID answered as a stream, as StreamByDomain.
func (c *Client) StreamByID(ctx context.Context, id string, each func(aggregator.Part) error, opts ...QueryOption) (*aggregator.Result, error) {
	return c.stream(ctx, "id", id, each, opts)
}

func (c *Client) stream(ctx context.Context, key, value string, each func(aggregator.Part) error, opts []QueryOption) (*aggregator.Result, error) {
	req, err := c.infractionsRequest(ctx, key, value, opts)
	if err != nil {
		return nil, err
	}
	format := c.streamFormat
	if format == "" {
		format = NDJSON
	}
	req.Header.Set("Accept", format+", application/problem+json;q=0.5")
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var events func(*bufio.Scanner) ([]byte, error)
	switch mt {
	case NDJSON:
		events = nextLine
	case EventStream:
		events = nextSSE
	default:
		return nil, fmt.Errorf("client: the server answered the stream with %q", resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEvent)
	sc.Split(scanLines)
	var r reader
	for {
		data, err := events(sc)
		if err != nil {
			return nil, fmt.Errorf("client: reading the stream: %w", err)
		}
		done, err := r.event(data, each)
		if err != nil {
			return nil, err
		}
		if done {
			return r.result()
		}
	}
}

// reader assembles a Result from a stream's events.
type reader struct {
	entries     []aggregator.SourceResult
	infractions []aggregator.Infraction
	summary     aggregator.SummaryEvent
}

// event takes one event's data; done once it was the summary.
func (r *reader) event(data []byte, each func(aggregator.Part) error) (done bool, err error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return false, fmt.Errorf("client: decoding an event of the stream: %w", err)
	}
	switch head.Type {
	case aggregator.EventSource:
		var ev aggregator.SourceEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return false, fmt.Errorf("client: decoding a source event: %w", err)
		}
		setSlug(ev.Problem)
		r.entries = append(r.entries, ev.SourceResult)
		r.infractions = append(r.infractions, ev.Infractions...)
		return false, each(ev.Part)
	case aggregator.EventSummary:
		if err := json.Unmarshal(data, &r.summary); err != nil {
			return false, fmt.Errorf("client: decoding the summary event: %w", err)
		}
		return true, nil
	}
	return false, nil // a type of a later version: not for this client
}

// result is the stream's Result, or, when its summary says no source
// answered, the *Unavailable that the JSON answer would have been.
func (r *reader) result() (*aggregator.Result, error) {
	if p := r.summary.Problem; p != nil {
		setSlug(p)
		return nil, &Unavailable{Problem: p, Sources: r.entries}
	}
	res := &aggregator.Result{
		Query:       r.summary.Query,
		Complete:    r.summary.Complete,
		Summary:     r.summary.Summary,
		Infractions: r.infractions,
		Sources:     r.entries,
	}
	if res.Infractions == nil {
		res.Infractions = []aggregator.Infraction{}
	}
	if res.Sources == nil {
		res.Sources = []aggregator.SourceResult{}
	}
	return res, nil
}

// errEnded is a stream that ended before its summary.
var errEnded = errors.New("the stream ended before its summary")

// nextLine is the next non-empty line of NDJSON.
func nextLine(sc *bufio.Scanner) ([]byte, error) {
	for sc.Scan() {
		if line := sc.Bytes(); len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
	}
	return nil, scanErr(sc)
}

// nextSSE is the data of the next SSE event (the HTML Living Standard's
// event stream interpretation): data lines joined by line feeds, up to
// the blank line that dispatches it. Comments, ids, event names and
// retry fields are not needed here: the data's type names the event.
func nextSSE(sc *bufio.Scanner) ([]byte, error) {
	var data []byte
	have := false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if have {
				return data, nil
			}
			continue
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			value = nil
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(name) != "data" {
			continue
		}
		if have {
			data = append(data, '\n')
		}
		data, have = append(data, value...), true
	}
	return nil, scanErr(sc)
}

func scanErr(sc *bufio.Scanner) error {
	if err := sc.Err(); err != nil {
		return err
	}
	return errEnded
}

// scanLines splits at CR LF, LF or CR, as event streams may end lines.
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // a CR at the end: an LF may follow
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
