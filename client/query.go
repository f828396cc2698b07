package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/multas/aggregator"
)

// QueryOption refines a synchronous query.
type QueryOption func(url.Values)

// WithSources restricts the query to these source ids. An unknown id, or
// a source that cannot answer the query, is an invalid-query problem naming
// `sources`.
func WithSources(ids ...string) QueryOption {
	return func(v url.Values) {
		if len(ids) > 0 {
			v.Set("sources", strings.Join(ids, ","))
		}
	}
}

// WithTimeout sets the query's total budget on the server, which clamps it
// to its query.max_deadline; without it, the server's query.deadline. The
// budget does not bound the HTTP exchange itself: the context does.
func WithTimeout(d time.Duration) QueryOption {
	return func(v url.Values) { v.Set("timeout", d.String()) }
}

// ByDomain looks up the infractions of a vehicle by its domain (plate), in
// any of the accepted forms ("AB123CD", "ab 123 cd", "AB-123-CD").
//
// The Result may be partial (Result.Complete false): SourceErrors gives the
// problem of every source that did not succeed. When no source succeeded,
// the error is an *Unavailable. Any other error answer is a
// *problem.Problem (invalid-query with InvalidParams, unauthorized,
// too-many-requests…).
func (c *Client) ByDomain(ctx context.Context, domain string, opts ...QueryOption) (*aggregator.Result, error) {
	return c.infractions(ctx, "domain", domain, opts)
}

// ByID looks up the infractions of a person by CUIT/CUIL (dashes optional)
// or DNI. Results and errors are those of ByDomain.
func (c *Client) ByID(ctx context.Context, id string, opts ...QueryOption) (*aggregator.Result, error) {
	return c.infractions(ctx, "id", id, opts)
}

func (c *Client) infractions(ctx context.Context, key, value string, opts []QueryOption) (*aggregator.Result, error) {
	req, err := c.infractionsRequest(ctx, key, value, opts)
	if err != nil {
		return nil, err
	}
	var res aggregator.Result
	if _, err := c.doJSON(req, http.StatusOK, &res); err != nil {
		return nil, err
	}
	setSlugs(&res)
	return &res, nil
}

// infractionsRequest is GET /v1/infractions for key=value and opts.
func (c *Client) infractionsRequest(ctx context.Context, key, value string, opts []QueryOption) (*http.Request, error) {
	q := url.Values{key: {value}}
	for _, opt := range opts {
		opt(q)
	}
	return c.newRequest(ctx, http.MethodGet, "/v1/infractions", q, nil)
}
