package untrusted

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A key is reported once in a while, by name; distinct keys (and places
// within a key) each once; a nil Reporter or one without a logger is
// silent.
func TestUnreadable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	r := New(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 3 {
		r.Unreadable("p:a", "", false)
		r.Unreadable("p:b", "field dlv_x", true)
		r.Unreadable("p:b", "", false)
	}
	out := buf.String()
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("%d lines, want 3 (one per key and place):\n%s", n, out)
	}
	for _, want := range []string{"key=p:a", `at="field dlv_x"`, "dropped", "treated as absent"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	var none *Reporter
	none.Unreadable("k", "", false)
	New(nil).Unreadable("k", "", false)
}

// The memory of reported keys is bounded.
func TestUnreadableBounded(t *testing.T) {
	t.Parallel()
	r := New(slog.New(slog.DiscardHandler))
	for i := range 3 * maxKeys {
		r.Unreadable(strings.Repeat("k", i%100)+string(rune('a'+i%26))+string(rune(i)), "", false)
	}
	if len(r.seen) > maxKeys {
		t.Errorf("%d keys remembered, want at most %d", len(r.seen), maxKeys)
	}
}
