package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/watch"
)

// newWatches builds the watches of SPEC 15 when the configuration has a
// watches block (New starts them): in Redis when the store block names
// one, else in this process. Their checks take at most budget_share of
// each source's rate budget, held under its own keys in the limiter's
// store (shared by the fleet with Redis).
func (a *App) newWatches(cfg *config.Config, opts Options) error {
	w := cfg.Watches
	if w == nil {
		return nil
	}
	if a.Memory == nil {
		return errors.New("watches: memory.key is required")
	}
	store := opts.WatchStore
	if store == nil && cfg.Store.Shared() {
		c, err := a.redis(cfg)
		if err != nil {
			return err
		}
		store = watch.NewRedisStore(c, cfg.Store.KeyPrefix+"watches:").WithLogger(opts.Logger)
	}
	budgets := ratelimit.New(opts.LimitStore, opts.Now)
	for _, sc := range cfg.Sources {
		own := ratelimit.Settings{RPS: sc.RateLimit.RPS, Burst: sc.RateLimit.Burst, MaxPause: time.Duration(sc.RateLimit.MaxPause)}
		if share := watch.Share(own, w.BudgetShare); share.RPS > 0 {
			budgets.Configure(watch.BudgetKey(sc.ID), share)
		}
	}
	m, err := watch.New(watch.Options{
		Engine: a.Engine, Breakers: a.Breakers, Limiter: a.Limiter, Budgets: budgets,
		Deliveries: a.Async, Keys: a.Memory.Keys(), Store: store, Logger: opts.Logger, Clock: opts.AsyncClock,
		Observer: a.Metrics, Budget: time.Duration(cfg.Query.Deadline), MaxWait: time.Duration(cfg.Async.MaxWait),
		MinInterval: time.Duration(w.MinInterval), DefaultInterval: time.Duration(w.DefaultInterval), MaxPerKey: w.MaxPerKey,
	})
	if err != nil {
		return fmt.Errorf("watches: %w", err)
	}
	a.Watches = m
	return nil
}

// webhookSecrets are the webhook secrets of the API keys that have one,
// by key name.
func webhookSecrets(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for _, k := range cfg.Server.APIKeys {
		if k.WebhookSecret != "" {
			out[k.Name] = k.WebhookSecret
		}
	}
	return out
}

// keysOf is the memory's keys, nil without a memory.
func keysOf(m *memory.Memory) *memory.Keys {
	if m == nil {
		return nil
	}
	return m.Keys()
}
