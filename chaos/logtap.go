package chaos

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
)

// logTap is a replica's slog handler: every record, at every level, goes
// as JSON to next (a writer that scans it for personal data), and each
// "breaker transition" is handed to onTransition as well.
type logTap struct {
	replica      int
	next         slog.Handler
	onTransition func(transition)
	onWarn       func(msg string)
	// onDegraded hears when the replica's Redis store goes degraded (its
	// decisions then local) and back.
	onDegraded func(replica int, at time.Time, degraded bool)
}

func (h *logTap) Enabled(context.Context, slog.Level) bool { return true }

func (h *logTap) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && h.onWarn != nil {
		h.onWarn(r.Level.String() + " " + r.Message)
	}
	switch {
	case strings.HasPrefix(r.Message, "redis store unreachable"):
		h.onDegraded(h.replica, r.Time, true)
	case strings.HasPrefix(r.Message, "redis store back"):
		h.onDegraded(h.replica, r.Time, false)
	}
	if r.Message == "breaker transition" {
		t := transition{replica: h.replica, at: r.Time}
		r.Attrs(func(a slog.Attr) bool {
			v := a.Value.String()
			switch a.Key {
			case "breaker_key":
				t.id.Key = v
			case "operation":
				t.id.Operation = aggregator.Operation(v)
			case "from":
				t.from = breaker.State(v)
			case "to":
				t.to = breaker.State(v)
			case "reason":
				t.reason = v
			}
			return true
		})
		h.onTransition(t)
	}
	return h.next.Handle(ctx, r)
}

func (h *logTap) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logTap{replica: h.replica, next: h.next.WithAttrs(attrs), onTransition: h.onTransition, onWarn: h.onWarn, onDegraded: h.onDegraded}
}

func (h *logTap) WithGroup(name string) slog.Handler {
	return &logTap{replica: h.replica, next: h.next.WithGroup(name), onTransition: h.onTransition, onWarn: h.onWarn, onDegraded: h.onDegraded}
}
