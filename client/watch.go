package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/problem"
)

// WatchRequest is the body of POST /v1/watches (SPEC 15): exactly one of
// Domain and ID, and CallbackURL.
type WatchRequest struct {
	Domain string `json:"domain,omitempty"`
	ID     string `json:"id,omitempty"`
	// CallbackURL receives the changes, signed with the API key's webhook
	// secret (see VerifyWebhook and WatchEvent).
	CallbackURL string `json:"callback_url"`
	// Sources restricts the watch; empty is every source that answers the
	// subject, those configured later included.
	Sources []string `json:"sources,omitempty"`
	// Interval is how often the subject is checked; zero is the server's
	// watches.default_interval. At least its watches.min_interval. It
	// travels as a Go duration string.
	Interval time.Duration `json:"interval,omitempty"`
}

// MarshalJSON writes Interval as a Go duration string ("24h0m0s").
func (r WatchRequest) MarshalJSON() ([]byte, error) {
	type plain WatchRequest
	w := struct {
		plain
		Interval string `json:"interval,omitempty"`
	}{plain: plain(r)}
	if r.Interval != 0 {
		w.Interval = r.Interval.String()
	}
	return json.Marshal(w)
}

// Watch is a watch as the server reports it.
type Watch struct {
	WatchID string       `json:"watch_id"`
	Subject WatchSubject `json:"subject"`
	// Sources are the sources its checks ask, with what they last heard of
	// each.
	Sources     []WatchSource `json:"sources"`
	CallbackURL string        `json:"callback_url"`
	// Interval travels as a Go duration string ("24h0m0s").
	Interval    time.Duration `json:"interval"`
	NextCheckAt time.Time     `json:"next_check_at"`
	CreatedAt   time.Time     `json:"created_at"`
	// LastCheckAt is when the last check ended; nil before the first.
	LastCheckAt *time.Time `json:"last_check_at"`

	// Location is the watch's URL, from the Location header of the answer
	// to CreateWatch; empty otherwise.
	Location string `json:"-"`
}

type watchJSON Watch

// MarshalJSON writes Interval as a Go duration string.
func (w Watch) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		watchJSON
		Interval string `json:"interval"`
	}{watchJSON(w), w.Interval.String()})
}

// UnmarshalJSON reads Interval as a Go duration string.
func (w *Watch) UnmarshalJSON(b []byte) error {
	var v struct {
		watchJSON
		Interval string `json:"interval"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	d, err := time.ParseDuration(v.Interval)
	if err != nil {
		return errors.New("interval: not a Go duration")
	}
	*w = Watch(v.watchJSON)
	w.Interval = d
	for i := range w.Sources {
		if p := w.Sources[i].Problem; p != nil {
			setSlug(p)
		}
	}
	return nil
}

// WatchSubject is the vehicle (Domain) or person (ID) watched, normalised.
type WatchSubject struct {
	Domain string `json:"domain,omitempty"`
	ID     string `json:"id,omitempty"`
}

// WatchSource is one source of a watch.
type WatchSource struct {
	Source       string `json:"source"`
	Jurisdiction string `json:"jurisdiction"`
	// LastSuccessAt is when a check last read the source; nil before.
	LastSuccessAt *time.Time `json:"last_success_at"`
	// Problem is why its last call did not succeed; nil when it did.
	Problem *problem.Problem `json:"problem"`
}

// WatchList is one page of the API key's watches.
type WatchList struct {
	Watches []Watch `json:"watches"`
	// NextCursor continues the listing (ListWatches); nil on the last
	// page.
	NextCursor *string `json:"next_cursor"`
}

// CreateWatch watches a vehicle or a person. An invalid request (an
// interval below the server's minimum, a private callback target…) is an
// invalid-query problem; a key with as many watches as it may have, a
// watch-limit problem; a server without watches, not-found.
func (c *Client) CreateWatch(ctx context.Context, r WatchRequest) (*Watch, error) {
	req, err := c.newRequest(ctx, http.MethodPost, "/v1/watches", nil, r)
	if err != nil {
		return nil, err
	}
	var w Watch
	resp, err := c.doJSON(req, http.StatusCreated, &w)
	if err != nil {
		return nil, err
	}
	w.Location = resp.Header.Get("Location")
	return &w, nil
}

// GetWatch returns a watch of the client's API key; another key's, or an
// unknown one, is a not-found problem.
func (c *Client) GetWatch(ctx context.Context, id string) (*Watch, error) {
	if id == "" {
		return nil, errors.New("client: GetWatch: empty watch id")
	}
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/watches/"+url.PathEscape(id), nil, nil)
	if err != nil {
		return nil, err
	}
	var w Watch
	if _, err := c.doJSON(req, http.StatusOK, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ListWatches returns a page of the API key's watches, in the order they
// were made: from the first with cursor "", else after the page whose
// NextCursor cursor is. limit 0 is the server's default (50); above 100 is
// taken as 100.
func (c *Client) ListWatches(ctx context.Context, cursor string, limit int) (*WatchList, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/watches", q, nil)
	if err != nil {
		return nil, err
	}
	var l WatchList
	if _, err := c.doJSON(req, http.StatusOK, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// DeleteWatch stops a watch and cancels its deliveries that have not gone.
func (c *Client) DeleteWatch(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("client: DeleteWatch: empty watch id")
	}
	req, err := c.newRequest(ctx, http.MethodDelete, "/v1/watches/"+url.PathEscape(id), nil, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusNoContent)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// EventInfractionsChanged is the type of a watch's delivery.
const EventInfractionsChanged = "infractions.changed"

// WatchEvent is the body of a watch's delivery: the Standard Webhooks
// envelope of what a check found changed. Verify the delivery first
// (VerifyWebhook, with the API key's webhook secret), and deduplicate on
// its webhook-id: a check that ran twice sends the same one.
type WatchEvent struct {
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      WatchEventData `json:"data"`
}

// WatchEventData is what changed for a watch.
type WatchEventData struct {
	WatchID   string       `json:"watch_id"`
	Subject   WatchSubject `json:"subject"`
	CheckedAt time.Time    `json:"checked_at"`
	// Baseline is true when every source reported is read for the first
	// time: Changes.Added is what is there, not what is new.
	Baseline bool `json:"baseline"`
	// BaselineSources are the sources read for the first time for the
	// watch: all their infractions are in Changes.Added.
	BaselineSources []string     `json:"baseline_sources"`
	Changes         WatchChanges `json:"changes"`
}

// WatchChanges are the infractions that appeared, that are gone, and that
// changed (status, amount and currency, units, or date as an instant), per
// source that succeeded. A source that failed never reports removals.
type WatchChanges struct {
	Added   []aggregator.Infraction `json:"added"`
	Removed []aggregator.Infraction `json:"removed"`
	Changed []InfractionChange      `json:"changed"`
}

// InfractionChange is an infraction as it was and as it is.
type InfractionChange struct {
	Before aggregator.Infraction `json:"before"`
	After  aggregator.Infraction `json:"after"`
}
