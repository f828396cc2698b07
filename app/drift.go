package app

import (
	"context"
	"encoding/hex"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/drift"
	"github.com/multas/aggregator/metrics"
)

// The mapping health of SPEC 13: the drift tracker hears every answer a
// lookup read (with the metrics), and each change it notices becomes a
// `mapping` event. With Redis, the replica that claims a change first
// records it for the fleet; the others count it in their own metrics.

// claimTimeout bounds the claim of a change.
const claimTimeout = time.Second

// newDrift builds the tracker of cfg's sources. A change is heard on the
// goroutine of the lookup that read it, inside the call the breaker
// times: it is counted there, and, with Redis, claimed and recorded on a
// goroutine of its own (Close waits for them), so that the round trips to
// Redis never lengthen the lookup.
func (a *App) newDrift(cfg *config.Config, m *metrics.Metrics, now func() time.Time, logger *slog.Logger) {
	keys := make(map[string]string, len(cfg.Sources))
	for _, sc := range cfg.Sources {
		keys[sc.ID] = sc.BreakerKey
	}
	record := func(c drift.Change) {
		if a.stores != nil {
			ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
			claimed := a.stores.Claim(ctx, claimKey(c), c.Window)
			cancel()
			if !claimed {
				return // another replica records it for the fleet
			}
		}
		logger.Warn("a source's answers changed", "source", c.Source, "operation", string(c.Operation),
			"reason", string(c.Reason), "added", len(c.Added), "removed", len(c.Removed), "ratio", c.Ratio)
		a.Breakers.Events().Append(mappingEvent(c, keys[c.Source]))
	}
	var recording sync.WaitGroup
	// Before the stores close (shared() put their Close first).
	a.closers = append([]func() error{func() error { recording.Wait(); return nil }}, a.closers...)
	a.Drift = drift.New(drift.Options{Now: now, Record: func(c drift.Change) {
		m.MappingChange(c)
		if a.stores == nil {
			record(c) // an in-process log: nothing to wait for
			return
		}
		recording.Go(func() { record(c) })
	}})
	for _, sc := range cfg.Sources {
		a.Drift.Configure(sc.ID, drift.Settings{Window: time.Duration(sc.Drift.Window),
			UnmappedRatio: sc.Drift.UnmappedRatio, EmptyRatio: sc.Drift.EmptyRatio})
		m.AddSource(sc.ID, len(sc.Response.Errors))
	}
}

// mappingEvent is the event of a change (breaker.KindMapping).
func mappingEvent(c drift.Change, key string) breaker.Event {
	orEmpty := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	unmapped := c.Unmapped
	if unmapped == nil {
		unmapped = map[string]map[string]int{}
	}
	return breaker.Event{
		Time: c.Time, Kind: breaker.KindMapping, BreakerKey: key, Operation: c.Operation, Reason: string(c.Reason),
		Source: c.Source, Added: orEmpty(c.Added), Removed: orEmpty(c.Removed), Unmapped: unmapped,
		Evidence: breaker.Evidence{Ratio: c.Ratio, WindowSeconds: c.Window.Seconds()},
	}
}

// claimKey names a change for the fleet: its source and reason, and for
// a shape change the names it added, so that the replicas that see one
// portal change claim one key (in the source's own hash slot).
func claimKey(c drift.Change) string {
	key := "mapping:{" + c.Source + "}:" + string(c.Reason)
	if c.Reason == drift.Shape {
		h := fnv.New64a()
		h.Write([]byte(strings.Join(c.Added, "\n")))
		key += ":" + hex.EncodeToString(h.Sum(nil))
	}
	return key
}
