package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// Voucher streams the payment voucher of an infraction from its source:
// the infraction's Source and ID, as a Result reports them. The caller
// reads and closes the body; contentType is the portal's (typically
// application/pdf).
//
// Errors are problems: not-found (unknown source or infraction, or a
// source without vouchers), circuit-open and rate-limited with a retry
// after (see RetryAfter), source-unavailable, source-rejected,
// source-error, source-timeout.
func (c *Client) Voucher(ctx context.Context, source, infractionID string) (body io.ReadCloser, contentType string, err error) {
	path := "/v1/sources/" + url.PathEscape(source) + "/infractions/" + url.PathEscape(infractionID) + "/voucher"
	req, err := c.newRequest(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", "*/*")
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, "", err
	}
	return resp.Body, resp.Header.Get("Content-Type"), nil
}
