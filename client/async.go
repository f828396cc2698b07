package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/multas/aggregator"
)

// AsyncRequest is the body of POST /v1/queries (SPEC 3.4): exactly one of
// Domain and ID, and CallbackURL.
type AsyncRequest struct {
	Domain string `json:"domain,omitempty"`
	ID     string `json:"id,omitempty"`
	// CallbackURL receives the result, signed (see VerifyWebhook): an
	// absolute http or https URL the server can reach.
	CallbackURL string `json:"callback_url"`
	// Sources restricts the query, as WithSources does.
	Sources []string `json:"sources,omitempty"`
	// MaxWait is how long the server keeps trying the sources that failed
	// or were skipped; zero means its async.max_wait, which is also the most
	// it accepts. It travels as a Go duration string.
	MaxWait time.Duration `json:"max_wait,omitempty"`
}

// MarshalJSON writes MaxWait as a Go duration string ("10m0s").
func (r AsyncRequest) MarshalJSON() ([]byte, error) {
	type plain AsyncRequest
	w := struct {
		plain
		MaxWait string `json:"max_wait,omitempty"`
	}{plain: plain(r)}
	if r.MaxWait != 0 {
		w.MaxWait = r.MaxWait.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads MaxWait as a Go duration string, for receivers of
// the request (a fake server, say).
func (r *AsyncRequest) UnmarshalJSON(b []byte) error {
	type plain AsyncRequest
	var w struct {
		plain
		MaxWait string `json:"max_wait,omitempty"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = AsyncRequest(w.plain)
	r.MaxWait = 0
	if w.MaxWait != "" {
		d, err := time.ParseDuration(w.MaxWait)
		if err != nil {
			return errors.New("max_wait: not a Go duration")
		}
		r.MaxWait = d
	}
	return nil
}

// QueryStatus is the state of an asynchronous query.
type QueryStatus string

// The statuses of an asynchronous query.
const (
	// QueryPending: some sources have not succeeded yet and max_wait has
	// not passed; the result so far may be partial.
	QueryPending QueryStatus = "pending"
	// QueryCompleted: every source succeeded.
	QueryCompleted QueryStatus = "completed"
	// QueryExpired: max_wait passed first; the result stays partial.
	QueryExpired QueryStatus = "expired"
)

// AsyncQuery is an asynchronous query as the server reports it.
type AsyncQuery struct {
	ID        string      `json:"id"`
	Status    QueryStatus `json:"status"`
	CreatedAt time.Time   `json:"created_at"`
	// ExpiresAt is when max_wait passes, if the query has not completed.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// CompletedAt is when the query completed or expired; nil while pending.
	CompletedAt *time.Time `json:"completed_at"`
	// Result is the result so far; nil when the server sent none yet.
	Result *aggregator.Result `json:"result,omitempty"`

	// Location is the query's URL, from the Location header of the answer
	// to CreateQuery; empty for GetQuery.
	Location string `json:"-"`
}

// Done reports whether the query has ended, completed or expired.
func (q *AsyncQuery) Done() bool {
	return q.Status == QueryCompleted || q.Status == QueryExpired
}

// CreateQuery starts an asynchronous query. The server runs it at once
// and delivers it to r.CallbackURL when it ends; the answer may already
// say completed. An invalid request (no callback_url, a private callback
// target, max_wait too long…) is an invalid-query problem.
func (c *Client) CreateQuery(ctx context.Context, r AsyncRequest) (*AsyncQuery, error) {
	req, err := c.newRequest(ctx, http.MethodPost, "/v1/queries", nil, r)
	if err != nil {
		return nil, err
	}
	var q AsyncQuery
	resp, err := c.doJSON(req, http.StatusAccepted, &q)
	if err != nil {
		return nil, err
	}
	q.Location = resp.Header.Get("Location")
	if q.Result != nil {
		setSlugs(q.Result)
	}
	return &q, nil
}

// GetQuery returns an asynchronous query's status and its result so far.
// An unknown id is a not-found problem.
func (c *Client) GetQuery(ctx context.Context, id string) (*AsyncQuery, error) {
	if id == "" {
		return nil, errors.New("client: GetQuery: empty query id")
	}
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/queries/"+url.PathEscape(id), nil, nil)
	if err != nil {
		return nil, err
	}
	var q AsyncQuery
	if _, err := c.doJSON(req, http.StatusOK, &q); err != nil {
		return nil, err
	}
	if q.Result != nil {
		setSlugs(q.Result)
	}
	return &q, nil
}
