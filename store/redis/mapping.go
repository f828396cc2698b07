package redisstore

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/sources/mapping"
)

// Claim takes key for ttl unless some replica holds it (one SET NX PX):
// the fleet records a source's mapping change once (SPEC 13), by the
// replica that claimed it. A replica that cannot reach Redis claims
// everything: a change told twice is better than a change not told.
func (s *Stores) Claim(ctx context.Context, key string, ttl time.Duration) bool {
	if s.Degraded() {
		return true
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	ok, err := s.client.SetNX(cctx, s.opts.Prefix+"claims:"+key, time.Now().UnixMilli(), max(ttl, time.Millisecond)).Result()
	if err != nil {
		s.failed(ctx, err)
		return true
	}
	return ok
}

// Bounds of a mapping event read back.
const (
	maxNameBytes = 2 * mapping.MaxSegment * 8
	maxUnmapped  = 64
)

// validMapping reports whether e is a mapping event as a replica writes
// it: a source and its breaker key, a lookup's operation, no states,
// bounded UTF-8 names without a digit, counts that are not negative.
func validMapping(e breaker.Event) bool {
	if e.From != "" || e.To != "" || (e.Operation != aggregator.ByDomain && e.Operation != aggregator.ByID) ||
		!shortText(e.BreakerKey) || !shortText(e.Source) || e.BreakerKey == "" || e.Source == "" ||
		len(e.Added) > mapping.MaxNames || len(e.Removed) > mapping.MaxNames || len(e.Unmapped) > maxUnmapped {
		return false
	}
	for _, names := range [][]string{e.Added, e.Removed} {
		for _, n := range names {
			if len(n) > maxNameBytes || !utf8.ValidString(n) || hasDigit(n) {
				return false
			}
		}
	}
	for field, reasons := range e.Unmapped {
		if !shortText(field) || len(reasons) > maxUnmapped {
			return false
		}
		for reason, n := range reasons {
			if !shortText(reason) || n < 0 {
				return false
			}
		}
	}
	return true
}

func shortText(s string) bool { return len(s) <= maxReason && utf8.ValidString(s) }

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			return true
		}
	}
	return false
}
