package fanout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources"
)

// TestBackoff: the n-th retry waits between half of
// min(initial·2^(n-1), max) and max, never more (SPEC 4.3).
func TestBackoff(t *testing.T) {
	tests := []struct {
		name                 string
		retry                Retry
		wantInitial, wantMax time.Duration
	}{
		{"grows to its cap", Retry{InitialBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, 10 * time.Millisecond, 200 * time.Millisecond},
		{"initial equal to max", Retry{InitialBackoff: 50 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, 50 * time.Millisecond, 50 * time.Millisecond},
		{"initial above max", Retry{InitialBackoff: time.Second, MaxBackoff: 100 * time.Millisecond}, time.Second, 100 * time.Millisecond},
		{"zero values take the defaults", Retry{}, 100 * time.Millisecond, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Many sequences, so that the jitter shows both of its ends.
			for range 200 {
				b := newBackoff(tt.retry)
				exp := tt.wantInitial // initial·2^(n-1)
				for n := 1; n <= 20; n++ {
					base := min(exp, tt.wantMax)
					if exp < tt.wantMax {
						exp *= 2
					}
					got := b.next()
					if got < base/2 || got > tt.wantMax {
						t.Fatalf("retry %d: got %v, want within [%v, %v]", n, got, base/2, tt.wantMax)
					}
				}
			}
		})
	}
}

// TestBackoffJitters: the delays are not all the same: the jitter spreads
// retries of many queries apart.
func TestBackoffJitters(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[newBackoff(Retry{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}).next()] = true
	}
	if len(seen) < 10 {
		t.Errorf("50 first delays took %d distinct values, want jitter", len(seen))
	}
}

// TestRetryable: connection errors, the source's own timeout, 502, 503 and
// 504 are retried; nothing else is (SPEC 4.3).
func TestRetryable(t *testing.T) {
	tests := []struct {
		o    outcome
		want bool
	}{
		{outcome{outcome: aggregator.Timeout}, true},
		{outcome{outcome: aggregator.Unavailable}, true}, // connection failed
		{outcome{outcome: aggregator.Unavailable, status: http.StatusBadGateway}, true},
		{outcome{outcome: aggregator.Unavailable, status: http.StatusServiceUnavailable}, true},
		{outcome{outcome: aggregator.Unavailable, status: http.StatusServiceUnavailable, retryAfter: time.Second}, true},
		{outcome{outcome: aggregator.Unavailable, status: http.StatusGatewayTimeout}, true},
		{outcome{outcome: aggregator.Unavailable, status: http.StatusInternalServerError}, false},
		{outcome{outcome: aggregator.Unavailable, status: http.StatusNotImplemented}, false},
		{outcome{outcome: aggregator.RateLimited, status: http.StatusTooManyRequests}, false},
		{outcome{outcome: aggregator.Rejected, status: http.StatusForbidden}, false},
		{outcome{outcome: aggregator.Unreadable, status: http.StatusOK}, false},
		{outcome{outcome: aggregator.Deadline}, false},
		{outcome{outcome: aggregator.Succeeded, status: http.StatusOK}, false},
		{outcome{outcome: aggregator.SkippedOpen}, false},
		{outcome{outcome: aggregator.SkippedRateLimited}, false},
	}
	for _, tt := range tests {
		if got := retryable(tt.o); got != tt.want {
			t.Errorf("retryable(%s, status %d): got %v, want %v", tt.o.outcome, tt.o.status, got, tt.want)
		}
	}
}

// TestClassify: a call's error becomes its outcome; when the query's own
// context has ended, whatever the error, the outcome is the budget's.
func TestClassify(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	unavailable := &sources.Error{Outcome: aggregator.Unavailable, Status: 503, Pause: 3 * time.Second, Err: errors.New("portal answered 503")}
	tests := []struct {
		name  string
		ctx   context.Context
		pause time.Duration
		err   error
		want  outcome
	}{
		{"success", live, 0, nil, outcome{outcome: aggregator.Succeeded}},
		{"success asking to back off", live, 30 * time.Second, nil, outcome{outcome: aggregator.Succeeded, retryAfter: 30 * time.Second}},
		{"success as the budget ends", ended, 0, nil, outcome{outcome: aggregator.Succeeded}},
		{"source error", live, 0, unavailable, outcome{outcome: aggregator.Unavailable, status: 503, retryAfter: 3 * time.Second, err: unavailable}},
		{"wrapped source error", live, 0, fmt.Errorf("lookup: %w", unavailable), outcome{outcome: aggregator.Unavailable, status: 503, retryAfter: 3 * time.Second}},
		{"429", live, 0, &sources.Error{Outcome: aggregator.RateLimited, Status: 429, Pause: time.Second},
			outcome{outcome: aggregator.RateLimited, status: 429, retryAfter: time.Second}},
		{"source timeout", live, 0, &sources.Error{Outcome: aggregator.Timeout}, outcome{outcome: aggregator.Timeout}},
		{"source timeout as the budget ends", ended, 0, &sources.Error{Outcome: aggregator.Timeout}, outcome{outcome: aggregator.Deadline}},
		{"portal answer as the budget ends", ended, 0, unavailable, outcome{outcome: aggregator.Deadline}},
		{"unclassified error", live, 0, errors.New("boom"), outcome{outcome: aggregator.Unavailable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.ctx, 0, tt.pause, tt.err)
			if got.outcome != tt.want.outcome || got.status != tt.want.status || got.retryAfter != tt.want.retryAfter {
				t.Errorf("got %s, status %d, retry after %v; want %s, status %d, retry after %v",
					got.outcome, got.status, got.retryAfter, tt.want.outcome, tt.want.status, tt.want.retryAfter)
			}
			if (got.err == nil) != (tt.err == nil) {
				t.Errorf("got err %v, want the call's error %v kept", got.err, tt.err)
			}
			if tt.want.err != nil && got.err != tt.want.err {
				t.Errorf("got err %v, want %v", got.err, tt.want.err)
			}
		})
	}
}
