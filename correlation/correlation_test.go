package correlation

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"testing/slogtest"
)

func TestValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{"uuid", "0b6f2c1e-6a53-4a5e-9a0e-3f4b9d1c2e7a", true},
		{"one character", "x", true},
		{"every visible character", "!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"empty", "", false},
		{"129 characters", strings.Repeat("a", 129), false},
		{"space", "a b", false},
		{"tab", "a\tb", false},
		{"newline (log injection)", "a\nb", false},
		{"carriage return (header injection)", "a\r\nX-Evil: 1", false},
		{"DEL", "a\x7fb", false},
		{"NUL", "a\x00b", false},
		{"non-ASCII", "pedido-ñ", false},
	}
	for _, tt := range tests {
		if got := Valid(tt.id); got != tt.want {
			t.Errorf("%s: Valid(%q) = %v, want %v", tt.name, tt.id, got, tt.want)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		if !Valid(id) || len(id) != 32 {
			t.Fatalf("New() = %q: want 32 hex characters", id)
		}
		if seen[id] {
			t.Fatalf("New() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestContext(t *testing.T) {
	t.Parallel()
	if got := RequestID(context.Background()); got != "" {
		t.Errorf("RequestID of a bare context = %q, want empty", got)
	}
	//lint:ignore SA1012 a nil context must not panic
	if got := RequestID(nil); got != "" {
		t.Errorf("RequestID(nil) = %q, want empty", got)
	}
	ctx := WithRequestID(context.Background(), "abc")
	if got := RequestID(ctx); got != "abc" {
		t.Errorf("RequestID = %q, want abc", got)
	}
}

// decode reads the JSON log lines of buf.
func decode(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// Every record logged with a request's context carries its request_id and
// what the hooks add (as tracing will add trace_id); records without one
// carry neither.
func TestHandlerAddsAttributesFromContext(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	type traceKey struct{}
	traceHook := func(ctx context.Context) []slog.Attr {
		if id, ok := ctx.Value(traceKey{}).(string); ok {
			return []slog.Attr{slog.String("trace_id", id)}
		}
		return nil
	}
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), traceHook)).With("component", "test")
	ctx := WithRequestID(context.Background(), "req-1")
	ctx = context.WithValue(ctx, traceKey{}, "4bf92f3577b34da6a3ce929d0e0e4736")

	log.InfoContext(ctx, "with both")
	log.InfoContext(WithRequestID(context.Background(), "req-2"), "request only")
	log.Info("no context")
	log.LogAttrs(ctx, slog.LevelWarn, "attrs", slog.Int("n", 1))

	lines := decode(t, &buf)
	tests := []struct {
		msg, requestID, traceID string
	}{
		{"with both", "req-1", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"request only", "req-2", ""},
		{"no context", "", ""},
		{"attrs", "req-1", "4bf92f3577b34da6a3ce929d0e0e4736"},
	}
	if len(lines) != len(tests) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(tests), buf.String())
	}
	for i, tt := range tests {
		l := lines[i]
		if l["msg"] != tt.msg {
			t.Errorf("line %d: msg %v, want %q", i, l["msg"], tt.msg)
		}
		if got, _ := l["request_id"].(string); got != tt.requestID {
			t.Errorf("%s: request_id %q, want %q", tt.msg, got, tt.requestID)
		}
		if got, _ := l["trace_id"].(string); got != tt.traceID {
			t.Errorf("%s: trace_id %q, want %q", tt.msg, got, tt.traceID)
		}
		if l["component"] != "test" {
			t.Errorf("%s: lost the logger's own attributes: %v", tt.msg, l)
		}
	}
}

func TestLoggerWrapsOnce(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := Logger(Logger(slog.New(slog.NewJSONHandler(&buf, nil))))
	l.InfoContext(WithRequestID(context.Background(), "r"), "once")
	if n := strings.Count(buf.String(), `"request_id"`); n != 1 {
		t.Errorf("request_id appears %d times, want once: %s", n, buf.String())
	}
	// A nil logger becomes a working one that discards.
	Logger(nil).Info("discarded")
}

// Handler behaves as slog requires of every handler.
func TestHandlerConformance(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := NewHandler(slog.NewJSONHandler(&buf, nil))
	results := func() []map[string]any {
		var out []map[string]any
		for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	if err := slogtest.TestHandler(h, results); err != nil {
		t.Error(err)
	}
}
