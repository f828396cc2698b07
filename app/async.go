package app

import (
	"fmt"
	"sync"
	"time"

	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/config"
)

// newAsync builds the asynchronous query manager of SPEC 3.4 (New starts
// it): its work lives in opts.AsyncStore, else in Redis when
// the store block names one, else in this process (not durable, said once at
// start-up).
func (a *App) newAsync(cfg *config.Config, opts Options) error {
	store := opts.AsyncStore
	if store == nil && cfg.Store.Shared() {
		c, err := a.redis(cfg)
		if err != nil {
			return err
		}
		store = async.NewRedisStore(c, cfg.Store.KeyPrefix+"async:").WithLogger(opts.Logger)
	}
	m := a.Metrics
	mgr, err := async.New(async.Options{
		Engine: a.Engine, Breakers: a.Breakers, Limiter: a.Limiter, Store: store,
		Logger: opts.Logger, Clock: opts.AsyncClock,
		Budget: time.Duration(cfg.Query.Deadline), MaxWait: time.Duration(cfg.Async.MaxWait),
		ReleaseRPS: cfg.Async.ReleaseRPS,
		Keys:       keysOf(a.Memory), Secret: cfg.Webhooks.SigningSecret, Secrets: webhookSecrets(cfg),
		Timeout:     time.Duration(cfg.Webhooks.Timeout),
		MaxAttempts: cfg.Webhooks.MaxAttempts, Backoff: time.Duration(cfg.Webhooks.Backoff),
		AllowPrivate:    cfg.Webhooks.AllowPrivate,
		BreakerFailures: cfg.Webhooks.Breaker.ConsecutiveFailures, BreakerOpenFor: time.Duration(cfg.Webhooks.Breaker.OpenFor),
		Resolver:       opts.Resolver,
		TracerProvider: opts.TracerProvider, Propagator: opts.Propagator,
		OnDelivery: func(outcome string) { m.Deliveries.WithLabelValues(outcome).Inc() },
		OnDLQ:      func(n int) { m.DLQ.Set(float64(n)) },
	})
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	if cfg.Webhooks.SigningSecret == "" {
		opts.Logger.Warn("webhooks.signing_secret is not set: webhook deliveries are not signed")
	}
	a.Async = mgr
	return nil
}

// Close stops the replica's background work (asynchronous queries and
// deliveries, which resume from the store at the next start) and closes
// the connections it opened. Calls after the first do nothing.
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		if a.Watches != nil {
			a.closeErr = a.Watches.Close() // its checks hand deliveries to Async
		}
		if a.Async != nil {
			if err := a.Async.Close(); err != nil && a.closeErr == nil {
				a.closeErr = err
			}
		}
		for _, c := range a.closers {
			if err := c(); err != nil && a.closeErr == nil {
				a.closeErr = err
			}
		}
	})
	return a.closeErr
}

// closing is the state of Close, embedded in App.
type closing struct {
	closeOnce sync.Once
	closeErr  error
}
