package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/server"
	redisstore "github.com/multas/aggregator/store/redis"
)

// shared connects the replica to Redis when the store block names one
// (redis_url, cluster or sentinel): breaker
// state, rate-limit state and events are then shared by every replica,
// with local state taking over while Redis is unreachable.
func (a *App) shared(cfg *config.Config, opts *Options) error {
	if !cfg.Store.Shared() {
		return nil
	}
	client, err := a.redis(cfg)
	if err != nil {
		return err
	}
	stores := redisstore.New(client, redisstore.Options{
		Prefix:        cfg.Store.KeyPrefix,
		Timeout:       time.Duration(cfg.Store.Timeout),
		FlushInterval: time.Duration(cfg.Store.FlushInterval),
		Logger:        opts.Logger,
		MaxPause:      maxPause(cfg),
		// The hooks run on the stores' goroutines, possibly before New
		// has finished: they reach the replica through atomic pointers.
		OnDegraded: func(degraded bool) {
			if m := a.live.metrics.Load(); m != nil {
				m.StoreDegraded.Set(map[bool]float64{true: 1}[degraded])
			}
		},
		OnSettings: func(id breaker.ID, s breaker.Settings) {
			if b := a.live.breakers.Load(); b != nil {
				b.SetSettings(id, s)
			}
		},
		OnListening: func(ctx context.Context) bool {
			b := a.live.breakers.Load()
			if b == nil {
				return false // not built yet: New reads them itself
			}
			return a.loadShared(ctx, b) == nil
		},
	})
	a.closers = append([]func() error{stores.Close}, a.closers...)
	a.stores = stores
	if opts.BreakerStore == nil {
		opts.BreakerStore = stores.Breakers
	}
	if opts.LimitStore == nil {
		opts.LimitStore = stores.Limits
	}
	if opts.Events == nil {
		opts.Events = stores.Events
	}
	return nil
}

// maxPause is the longest pause any source may be given: a pause read
// from Redis that ends further ahead is garbage.
func maxPause(cfg *config.Config) time.Duration {
	var d time.Duration
	for _, sc := range cfg.Sources {
		d = max(d, time.Duration(sc.RateLimit.MaxPause))
	}
	return d
}

// redis returns the replica's one Redis client, made on first use.
func (a *App) redis(cfg *config.Config) (redis.UniversalClient, error) {
	if a.redisClient != nil {
		return a.redisClient, nil
	}
	tc, err := cfg.Store.TLSConfig()
	if err != nil {
		return nil, err
	}
	client, err := redisstore.NewClient(redisstore.Connection{
		URL: cfg.Store.RedisURL, ClusterAddrs: cfg.Store.Cluster.Addrs,
		SentinelMaster: cfg.Store.Sentinel.Master, SentinelAddrs: cfg.Store.Sentinel.Addrs,
		Username: cfg.Store.Username, Password: cfg.Store.Password, TLS: tc,
		PoolSize: cfg.Store.PoolSize, Timeout: time.Duration(cfg.Store.Timeout),
	})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	a.redisClient = client
	a.closers = append(a.closers, a.redisClient.Close)
	return a.redisClient, nil
}

// publish makes the replica reachable from the stores' hooks.
func (a *App) publish() {
	a.live.breakers.Store(a.Breakers)
	a.live.metrics.Store(a.Metrics)
	if a.stores != nil {
		a.Metrics.StoreDegraded.Set(map[bool]float64{true: 1}[a.stores.Degraded()])
	}
}

// adoptShared applies breaker settings an operator shared through the
// admin API before this replica started, read in one round trip: a Redis
// that does not answer delays start-up by one store timeout at most.
func (a *App) adoptShared(ctx context.Context) {
	if a.stores == nil {
		return
	}
	if a.loadShared(ctx, a.Breakers) != nil {
		return // the stores are degraded: local state, configured settings
	}
	a.stores.Events.Begin(ctx)
}

// loadShared applies to set the breaker settings shared through Redis.
func (a *App) loadShared(ctx context.Context, set *breaker.Set) error {
	all, err := a.stores.Breakers.LoadSettings(ctx, set.IDs())
	if err != nil {
		return err
	}
	for id, s := range all {
		set.SetSettings(id, s)
	}
	return nil
}

// ready is the /readyz check of the shared store. Running on local state
// while Redis is away is a degradation, not unreadiness: queries go on.
func (a *App) ready(ctx context.Context) error {
	err := a.stores.Ping(ctx)
	if errors.Is(err, redisstore.ErrDegraded) {
		return server.Degraded(err)
	}
	return err
}

// StoreDegraded reports whether the replica decides on local state because
// its Redis cannot be reached; false without a Redis.
func (a *App) StoreDegraded() bool {
	return a.stores != nil && a.stores.Degraded()
}
