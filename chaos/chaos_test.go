package chaos

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/multas/aggregator/internal/redistest"
)

// TestMain fails the package's tests if any goroutine is left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shortDuration is the chaos phase of each variant in the short mode;
// CHAOS_DURATION (a Go duration) changes it.
const shortDuration = 40 * time.Second

// TestChaos is the short mode of the chaos suite (issue 8): each variant
// runs its faults under load for about forty seconds, then checks that
// every breaker closes. Any broken invariant fails the test; the summary
// table is logged either way. go run ./cmd/chaos is the long mode.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite takes a minute and a half; run it without -short")
	}
	d := shortDuration
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("CHAOS_DURATION: %v", err)
		}
	}
	t.Run("memory", func(t *testing.T) {
		runVariant(t, Options{Variant: Memory, Duration: d})
	})
	t.Run("redis", func(t *testing.T) {
		_, url := redistest.Connect(t) // skipped without Redis, but not in CI
		runVariant(t, Options{Variant: Redis, RedisURL: url, Duration: d})
	})
}

func runVariant(t *testing.T, o Options) {
	o.Workers = 3
	o.Progress = t.Logf
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var b strings.Builder
	rep.WriteSummary(&b)
	t.Logf("summary:\n%s", b.String())
	if rep.Failed() {
		t.Errorf("invariants broken: %v (details above)", rep.ViolationCounts)
	}
	if rep.Requests["by_domain"] == 0 || rep.Requests["by_id"] == 0 || rep.Requests["voucher"] == 0 {
		t.Errorf("requests %v: every kind should have been sent", rep.Requests)
	}
	if rep.Transitions["closed→open"] == 0 || rep.Probes.Episodes == 0 {
		t.Errorf("transitions %v, %d half-open episodes: the faults should trip breakers and they should recover",
			rep.Transitions, rep.Probes.Episodes)
	}
	goleak.VerifyNone(t)
}
