// Package correlation ties together what one request produces (SPEC 10,
// Correlation): its answer carries an X-Request-Id, its problem documents
// carry the same id as `request_id`, and every log line written about it
// carries `request_id` too, read from the request's context by Handler.
package correlation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
)

// Header is the HTTP header of the request id, on requests and answers.
const Header = "X-Request-Id"

// MaxLen is the longest request id accepted from a caller.
const MaxLen = 128

// Valid reports whether id may be adopted as a caller's request id: 1 to
// MaxLen visible ASCII characters (0x21 to 0x7E), so that it can be
// echoed in a header and logged without escaping or injection.
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7E {
			return false
		}
	}
	return true
}

// New returns a fresh request id: 16 random bytes in hex.
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the request id ctx carries, or "".
func RequestID(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// AttrsFunc returns the attributes a log record gets from its context.
// It is how other request-scoped identifiers (a trace id, once tracing
// is on) join every log line without each call site passing them.
type AttrsFunc func(context.Context) []slog.Attr

// RequestIDAttrs adds request_id when the context carries one.
func RequestIDAttrs(ctx context.Context) []slog.Attr {
	if id := RequestID(ctx); id != "" {
		return []slog.Attr{slog.String("request_id", id)}
	}
	return nil
}

// Handler is a slog.Handler that adds to every record the attributes of
// its context: request_id and whatever its AttrsFunc hooks add. Log with
// the context (logger.InfoContext(ctx, …), LogAttrs(ctx, …)) for them to
// be found. The attributes are added at the top level unless the logger
// was given a group (WithGroup), in which case they go inside it.
type Handler struct {
	next  slog.Handler
	hooks []AttrsFunc
}

// NewHandler returns a Handler in front of next, adding request_id and
// the attributes of the hooks, in that order.
func NewHandler(next slog.Handler, hooks ...AttrsFunc) *Handler {
	return &Handler{next: next, hooks: append([]AttrsFunc{RequestIDAttrs}, hooks...)}
}

// Logger returns l logging through a Handler with the hooks, or l itself
// when it already does (so that wrapping twice adds nothing twice).
func Logger(l *slog.Logger, hooks ...AttrsFunc) *slog.Logger {
	if l == nil {
		return slog.New(NewHandler(slog.DiscardHandler, hooks...))
	}
	if _, ok := l.Handler().(*Handler); ok {
		return l
	}
	return slog.New(NewHandler(l.Handler(), hooks...))
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	cloned := false
	for _, hook := range h.hooks {
		attrs := hook(ctx)
		if len(attrs) == 0 {
			continue
		}
		if !cloned {
			// The caller's record may share its attributes with others.
			r, cloned = r.Clone(), true
		}
		r.AddAttrs(attrs...)
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), hooks: h.hooks}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), hooks: h.hooks}
}
