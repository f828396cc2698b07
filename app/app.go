// Package app is the composition root: it builds the whole aggregator
// (sources, breakers, limiter, fan-out, metrics, HTTP server) from a
// validated configuration. cmd/aggregator and the end-to-end tests use it,
// so tests run exactly what production runs.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/correlation"
	"github.com/multas/aggregator/drift"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/internal/h1"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/metrics"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/server"
	"github.com/multas/aggregator/sources"
	redisstore "github.com/multas/aggregator/store/redis"
	"github.com/multas/aggregator/tracing"
	"github.com/multas/aggregator/watch"
)

// Options are the outside world the App runs in; zero values are defaults.
type Options struct {
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// BreakerStore holds breaker state; in-process when nil.
	BreakerStore breaker.Store
	// LimitStore holds rate-limit state; in-process when nil.
	LimitStore ratelimit.Store
	// Transport carries the calls to portals; a pooled one when nil.
	Transport http.RoundTripper
	// Events keeps breaker transitions; Redis with store.redis_url, else a
	// ring in this process, when nil.
	Events breaker.EventLog

	// Asynchronous queries (app/async.go).
	// AsyncStore keeps their work; Redis when store.redis_url is set, else
	// in-process, when nil.
	AsyncStore async.Store
	// AsyncClock schedules their work; the wall clock when nil. It must
	// tell the same time as Now (breakers' open times are read against it).
	AsyncClock async.Clock
	// Resolver checks webhook callback hosts; the system's when nil.
	Resolver async.Resolver
	// WatchStore keeps the watches (SPEC 15); Redis when store.redis_url
	// is set, else in-process, when nil.
	WatchStore watch.Store

	// Adapters add source types to the built-in http (SPEC 8): a source
	// whose `type` is a key here is built by its Adapter.
	Adapters map[string]Adapter
	// Build identifies the binary on /metrics (aggregator_build_info);
	// unknown fields are "unknown".
	Build metrics.BuildInfo

	// TracerProvider and Propagator trace requests, source lookups and
	// portal and webhook calls (SPEC 10, tracing.Setup); no spans when
	// nil, and W3C Trace Context when Propagator is nil.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
}

// App is one aggregator replica.
type App struct {
	Config   *config.Config
	Breakers *breaker.Set
	Limiter  *ratelimit.Limiter
	Engine   *fanout.Engine
	Metrics  *metrics.Metrics
	Server   *server.Server
	// Async runs the asynchronous queries; Close stops it.
	Async *async.Manager
	// Memory remembers the sources' answers (SPEC 14); nil without
	// memory.key.
	Memory *memory.Memory
	// Drift keeps every source's mapping health (SPEC 13, drift.go).
	Drift *drift.Tracker
	// Watches runs the watches (SPEC 15); nil without a watches block.
	Watches *watch.Manager

	live struct {
		breakers atomic.Pointer[breaker.Set]
		metrics  atomic.Pointer[metrics.Metrics]
	}
	closing
	closers     []func() error
	redisClient redis.UniversalClient
	stores      *redisstore.Stores
}

// New builds a replica from cfg.
func New(cfg *config.Config, opts Options) (*App, error) {
	// Log lines written with a request's context carry its request_id.
	opts.Logger = correlation.Logger(opts.Logger)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &App{Config: cfg}
	built := false
	defer func() {
		if !built {
			_ = a.Close() // stop what was started before the error
		}
	}()
	if err := a.shared(cfg, &opts); err != nil {
		return nil, err
	}
	if opts.BreakerStore == nil {
		opts.BreakerStore = breaker.NewMemoryStore()
	}
	if opts.LimitStore == nil {
		opts.LimitStore = ratelimit.NewMemoryStore()
	}
	// No request reaches a portal unseen: the portal transport never
	// replays one, and a transport given in Options is guarded against
	// net/http's replays (transport.go).
	given := opts.Transport != nil
	if !given {
		tr := NewTransport()
		opts.Transport = tr
		// Its pooled connections end with the App.
		a.closers = append(a.closers, func() error { tr.CloseIdleConnections(); return nil })
	}
	// Every portal call is a client span that sends its traceparent, named
	// by the request's configured path template (SPEC 10).
	opts.Transport = tracing.Transport(opts.Transport, opts.TracerProvider, opts.Propagator,
		tracing.WithURLTemplate(sources.URLTemplate))
	var m *metrics.Metrics
	a.Breakers = breaker.NewSet(opts.BreakerStore, breaker.Options{
		Now:    opts.Now,
		Logger: opts.Logger,
		Events: opts.Events,
		OnTransition: func(e breaker.Event) {
			if m != nil {
				m.Transition(e)
			}
			if a.Async != nil {
				a.Async.OnTransition(e) // retained calls go when breakers recover
			}
			if a.Watches != nil {
				a.Watches.OnTransition(e)
			}
		},
		OnStoreError: func(err error) { opts.Logger.Warn("breaker store error", "err", err.Error()) },
	})
	m = metrics.New(a.Breakers)
	m.SetBuildInfo(opts.Build)
	a.Metrics = m
	a.closers = append(a.closers, sampleMetrics(m, opts.Now))
	a.Limiter = ratelimit.New(opts.LimitStore, opts.Now)
	mem, err := a.newMemory(cfg, opts)
	if err != nil {
		return nil, err
	}
	a.Memory = mem

	known := adapters(opts)
	portals := opts.Transport
	if given {
		portals = NoReplay(portals)
	}
	env := AdapterEnv{Client: &http.Client{Transport: portals}, Now: opts.Now, Logger: opts.Logger}
	members := make([]fanout.Member, 0, len(cfg.Sources))
	for _, sc := range cfg.Sources {
		adapter, ok := known[sc.Type]
		if !ok {
			return nil, CheckSources(cfg, opts.Adapters)
		}
		src, err := adapter(sc, env)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", sc.ID, err)
		}
		key := sc.BreakerKey
		if key == "" {
			key = sc.ID
		}
		settings := server.BreakerSettings(sc.Breaker, time.Duration(sc.Timeout)+time.Second)
		for _, op := range aggregator.Operations {
			if src.Supports(op, "") {
				a.Breakers.Add(breaker.ID{Key: key, Operation: op}, sc.ID, settings)
			}
		}
		a.Limiter.Configure(sc.ID, ratelimit.Settings{
			RPS: sc.RateLimit.RPS, Burst: sc.RateLimit.Burst,
			MaxWait: time.Duration(sc.RateLimit.MaxWait), MaxPause: time.Duration(sc.RateLimit.MaxPause),
		})
		member := fanout.Member{
			Source: src, BreakerKey: key, Timeout: time.Duration(sc.Timeout),
			Retry: fanout.Retry{MaxRetries: sc.Retry.MaxRetries, InitialBackoff: time.Duration(sc.Retry.InitialBackoff),
				MaxBackoff: time.Duration(sc.Retry.MaxBackoff)},
		}
		if mem != nil && sc.Remember.Remembers() {
			member.Memory = memoryPolicy(sc)
			m.RemembersFor(sc.ID, memory.HitFresh, memory.HitStale)
		}
		members = append(members, member)
	}
	catalog := problem.Catalog{Base: cfg.Problems.BaseURI}
	a.newDrift(cfg, m, opts.Now, opts.Logger)
	a.Engine = fanout.New(members, fanout.Options{
		Breakers: a.Breakers, Limiter: a.Limiter, Problems: catalog, Observer: m, Now: opts.Now,
		Tracer: tracing.Tracer(opts.TracerProvider), Memory: mem,
		Lookups: func(l drift.Lookup) {
			m.SourceLookup(l)
			a.Drift.Observe(l)
		},
	})
	a.closers = append(a.closers, func() error { a.Engine.Close(); return nil })
	var keys *ratelimit.Keys
	if len(cfg.Server.APIKeys) > 0 {
		ks := make([]ratelimit.Key, len(cfg.Server.APIKeys))
		for i, k := range cfg.Server.APIKeys {
			ks[i] = ratelimit.Key{Name: k.Name, Key: k.Key, RPS: k.RPS, Burst: k.Burst}
		}
		keys = ratelimit.NewKeys(ks, opts.Now)
	}
	if err := a.newAsync(cfg, opts); err != nil {
		return nil, err
	}
	if err := a.newWatches(cfg, opts); err != nil {
		return nil, err
	}
	a.publish()
	var ready map[string]func(context.Context) error
	var share func(context.Context, breaker.ID, breaker.Settings) error
	if a.stores != nil {
		ready = map[string]func(context.Context) error{"redis": a.ready}
		share = a.stores.Breakers.ShareSettings
		a.adoptShared(context.Background())
	}
	var watches server.Watches
	if a.Watches != nil {
		watches = a.Watches
	}
	a.Server = server.New(server.Options{
		Engine: a.Engine, Breakers: a.Breakers, Limiter: a.Limiter, Metrics: m, Problems: catalog,
		Logger: opts.Logger, Deadline: time.Duration(cfg.Query.Deadline), MaxDeadline: time.Duration(cfg.Query.MaxDeadline),
		AdminToken: cfg.Server.AdminToken, Keys: keys, Now: opts.Now, Async: a.Async, Memory: mem, Watches: watches,
		Ready: ready, ShareSettings: share, MaxInFlight: cfg.Server.MaxInFlight, ReadTimeout: time.Duration(cfg.Server.ReadTimeout),
		Tracer: tracing.Tracer(opts.TracerProvider), Propagator: opts.Propagator, Drift: a.Drift,
	})
	a.Async.Start()
	if a.Watches != nil {
		a.Watches.Start()
	}
	built = true
	return a, nil
}

// sampleMetrics snapshots m every metrics.SampleEvery, for the recent
// figures of the admin API, until the returned stop is called.
func sampleMetrics(m *metrics.Metrics, now func() time.Time) (stop func() error) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(metrics.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				m.Sample(now())
			case <-quit:
				return
			}
		}
	}()
	return func() error {
		close(quit)
		<-done
		return nil
	}
}

func sourceSpec(sc config.Source) sources.Spec {
	ops := make(map[aggregator.Operation]sources.OperationSpec, len(sc.Operations))
	for op, o := range sc.Operations {
		body := sources.Body{Form: o.Body.Form, Text: o.Body.Text, ContentType: o.Body.ContentType}
		if o.Body.JSON != nil {
			body.JSON = o.Body.JSON.Raw
		}
		ops[op] = sources.OperationSpec{Method: o.Method, Path: o.Path, Query: o.Query, Headers: o.Headers, Body: body, Accepts: o.Accepts}
	}
	spec := sources.Spec{
		ID: sc.ID, Jurisdiction: sc.Jurisdiction, BaseURL: sc.BaseURL, Headers: sc.Headers,
		Operations: ops, Response: sc.Response,
		Location: sc.Location, Currency: sc.Currency, MaxResponseBytes: sc.MaxResponseBytes,
		VoucherTypes: sc.VoucherTypes, VoucherMaxBytes: sc.VoucherMaxBytes,
		TLS: sources.TLS{CAFile: sc.TLS.CAFile, CertFile: sc.TLS.CertFile, KeyFile: sc.TLS.KeyFile, ServerName: sc.TLS.ServerName},
	}
	if p := sc.Pagination; p != nil {
		spec.Pagination = sources.Pagination{Style: p.Style, Size: p.Size, Next: p.Next, MaxPages: p.MaxPages}
		if p.Start != nil {
			spec.Pagination.Start = *p.Start
		}
	}
	if o := sc.Auth.OAuth2; o != nil {
		spec.Auth.OAuth2 = &sources.OAuth2{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes, ClientAuth: o.ClientAuth}
	}
	if ss := sc.Auth.Session; ss != nil {
		spec.Auth.Session = &sources.Session{Method: ss.Method, Path: ss.Path, TTL: time.Duration(ss.TTL), Format: ss.Format, Extract: ss.Extract}
	}
	return spec
}

// NewTransport is the pooled transport for portal calls: HTTP/1.1 on
// each caller's goroutine (internal/h1), connections reused across
// queries, every call bounded by its context. Requests that the
// environment sends through a proxy (HTTPS_PROXY, HTTP_PROXY) go through
// net/http's transport instead, guarded by NoReplay.
func NewTransport() *h1.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &h1.Transport{
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 128,
		IdleConnTimeout:     90 * time.Second,
		Proxy:               http.ProxyFromEnvironment,
		Fallback: NoReplay(&http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			MaxIdleConns:          512,
			MaxIdleConnsPerHost:   128,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   5 * time.Second,
			ExpectContinueTimeout: time.Second,
			ForceAttemptHTTP2:     true,
		}),
	}
}
