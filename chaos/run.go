package chaos

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/config"
)

// run is the state of one Run.
type run struct {
	opts     Options
	people   *people
	portals  []*portal
	replicas []*replica
	client   *http.Client
	contract *contract
	calls    *callLog
	episodes *episodes
	pii      *piiScanner
	tally    *tally
	stalls   *stallMeter
	// requests numbers the workers' requests; handlerTimes has how long
	// the replicas handled them.
	requests     atomic.Uint64
	handlerTimes handlerTimes
	// stormy are the portals whose profile is 429 storms and nothing else.
	stormy map[string]bool
}

// Run runs the chaos suite: faults under load for opts.Duration (or until
// ctx ends), then the recovery check. Violations are in the Report; the
// error is for a run that could not be set up or torn down.
func Run(ctx context.Context, opts Options) (rep *Report, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Seed == 0 {
		var b [8]byte
		_, _ = crand.Read(b[:])
		opts.Seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	ct, err := loadContract()
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0))
	r := &run{
		opts: opts, people: newPeople(rng), contract: ct, calls: newCallLog(),
		episodes: newEpisodes(opts.Variant == Redis), stormy: map[string]bool{},
	}
	r.handlerTimes.byID = map[uint64]handled{}
	r.stalls = &stallMeter{}
	r.episodes.stalls = r.stalls
	stallCtx, stopStalls := context.WithCancel(context.Background())
	var metering sync.WaitGroup
	metering.Add(1)
	go func() {
		defer metering.Done()
		r.stalls.run(stallCtx)
	}()
	defer func() {
		stopStalls()
		metering.Wait()
	}()
	r.tally = newTally(func(v Violation) { opts.Progress("violation: %s", v) })
	r.pii = newPIIScanner(r.people, func(where, needle, context string) {
		r.tally.violate(Violation{Kind: KindPII, Detail: piiDetail(where, needle, context)})
	})
	js := r.people.jurisdictions(rng, opts.Portals)
	var cast []profile
	r.episodes.leases = map[string]time.Duration{}
	for i, j := range js {
		p := profileOf(i)
		cast = append(cast, p)
		if p.name == "429 storms" {
			r.stormy[j.ID] = true
		}
		if p.timeout > 0 {
			r.episodes.leases[j.ID] = p.lease()
		}
	}

	// Tear down in reverse order of setup, whatever happens.
	var closers []func() error
	defer func() {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		if e := errors.Join(errs...); e != nil {
			err = errors.Join(err, fmt.Errorf("chaos: tearing down: %w", e))
		}
	}()

	r.portals, err = startPortals(js, cast, r.calls)
	if err != nil {
		return nil, fmt.Errorf("chaos: starting portals: %w", err)
	}
	closers = append(closers, func() error { return closePortals(r.portals) })

	var store string
	if opts.Variant == Redis {
		prefix, drop, err := redisPrefix(ctx, opts.RedisURL)
		if err != nil {
			return nil, err
		}
		closers = append(closers, drop)
		store = fmt.Sprintf("store: {redis_url: %q, key_prefix: %q}\n", opts.RedisURL, prefix)
	}
	urls := map[string]string{}
	for _, p := range r.portals {
		urls[p.id] = p.url
	}
	srcs, err := sourcesYAML(js, urls, cast)
	if err != nil {
		return nil, err
	}
	text := configText(opts) + store + srcs
	cfg, err := config.Parse([]byte(text), "chaos.yaml", func(string) string { return "" })
	if err != nil {
		return nil, fmt.Errorf("chaos: config: %w", err)
	}
	for i := range opts.Replicas {
		rp, err := r.startReplica(cfg, i)
		if err != nil {
			return nil, fmt.Errorf("chaos: replica %d: %w", i+1, err)
		}
		r.replicas = append(r.replicas, rp)
		closers = append(closers, rp.close)
	}
	r.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * opts.Workers}}
	closers = append(closers, func() error { r.client.CloseIdleConnections(); return nil })

	opts.Progress("%s: %d portals, %d replicas, %d workers, seed %d: chaos for %s",
		opts.Variant, opts.Portals, opts.Replicas, opts.Workers, opts.Seed, opts.Duration)
	monitorCtx, stopMonitor := context.WithCancel(context.Background())
	var monitoring sync.WaitGroup
	monitoring.Add(1)
	go func() {
		defer monitoring.Done()
		r.monitor(monitorCtx)
	}()

	chaosTime := r.chaos(ctx)

	opts.Progress("%s: every portal healthy; waiting for every breaker to close", opts.Variant)
	recovery := r.recover(rand.New(rand.NewPCG(opts.Seed, 300)))
	stopMonitor()
	monitoring.Wait()
	r.finalChecks()

	return r.report(chaosTime, recovery), nil
}

// chaos changes the portals' faults under load for the run's duration, or
// until ctx ends, and returns how long it lasted. Every portal is healthy
// when it returns, and every request answered.
func (r *run) chaos(ctx context.Context) time.Duration {
	chaosCtx, stopChaos := context.WithTimeout(ctx, r.opts.Duration)
	defer stopChaos()
	start := time.Now()
	var wg sync.WaitGroup
	for i, p := range r.portals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.play(chaosCtx, rand.New(rand.NewPCG(r.opts.Seed, uint64(100+i))))
		}()
	}
	for i := range r.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(chaosCtx, rand.New(rand.NewPCG(r.opts.Seed, uint64(200+i))))
		}()
	}
	<-chaosCtx.Done()
	wg.Wait() // every portal healthy, every worker's last request answered
	return time.Since(start)
}

// report sums up the run.
func (r *run) report(chaosTime, recovery time.Duration) *Report {
	transitions, probes := r.episodes.snapshot()
	rep := &Report{
		Variant: r.opts.Variant, Seed: r.opts.Seed, Portals: r.opts.Portals, Replicas: r.opts.Replicas, Workers: r.opts.Workers,
		Duration: chaosTime, Recovery: recovery, QueryTimeout: r.opts.QueryTimeout, Margin: r.opts.Margin,
		Transitions: transitions, Probes: probes, Latency: r.tally.latencyStats(),
		LogLines: r.pii.lines.Load(), OutputsScanned: r.pii.texts.Load(),
	}
	r.calls.mu.Lock()
	rep.PortalCalls, rep.Replays = r.calls.arrived, r.calls.replays
	r.calls.mu.Unlock()
	rep.Stalled, rep.LongestStall = r.stalls.summary()
	end := time.Now()
	for _, ps := range r.episodes.degradedPeriods() {
		for _, p := range ps {
			rep.DegradedPeriods++
			to := p.to
			if to.IsZero() {
				to = end
			}
			rep.DegradedTime += to.Sub(p.from)
		}
	}
	for _, p := range r.portals {
		rep.PortalList = append(rep.PortalList, PortalReport{ID: p.id, Profile: p.profile.name, Faults: p.kinds(),
			Calls: p.sim.Calls().Total, Opens: len(r.episodes.opened(p.id))})
		if p.onlyThrottled() {
			rep.ThrottleOnly = append(rep.ThrottleOnly, p.id)
		}
	}
	t := r.tally
	t.mu.Lock()
	rep.Requests, rep.Statuses, rep.Outcomes, rep.Warnings = t.requests, t.statuses, t.outcomes, t.warnings
	rep.ClientReplays = t.clientReplays
	rep.Violations = append([]Violation(nil), t.violations...)
	rep.ViolationCounts = t.counts
	t.mu.Unlock()
	return rep
}

// onTransition hears every breaker transition of every replica.
func (r *run) onTransition(t transition) {
	r.episodes.add(t)
	if t.to == breaker.Open && r.stormy[t.id.Key] {
		r.tally.violate(Violation{At: t.at, Kind: KindThrottle, Detail: fmt.Sprintf(
			"%s opened on replica %d, whose portal only ever throttled: %s", t.id, t.replica+1, t.reason)})
	}
}

// monitor checks the half-open episodes as they end, and scans the
// replicas' outputs for personal data, until ctx ends.
func (r *run) monitor(ctx context.Context) {
	episodes := time.NewTicker(2 * time.Second)
	defer episodes.Stop()
	outputs := time.NewTicker(10 * time.Second)
	defer outputs.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-episodes.C:
			// Transitions are logged just after they happen: leave a margin.
			r.tally.violate(r.episodes.check(r.calls, time.Now().Add(-3*time.Second), false)...)
		case <-outputs.C:
			r.scanOutputs()
		}
	}
}

// scanOutputs reads every replica's metrics, events, breakers and
// coverage, checks them against the contract and scans them.
func (r *run) scanOutputs() {
	for i, rp := range r.replicas {
		for _, path := range []string{"/metrics", "/v1/admin/events", "/v1/admin/breakers", "/v1/sources"} {
			body, err := r.output(rp, path)
			if err != nil {
				r.tally.violate(Violation{Kind: KindMalformed, Detail: fmt.Sprintf("GET %s of replica %d: %v", path, i+1, err)})
				continue
			}
			r.pii.scan(fmt.Sprintf("GET %s of replica %d", path, i+1), body)
		}
	}
}

func (r *run) output(rp *replica, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rp.url+path, nil)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(path, "/v1/admin/") {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := r.contract.check(req.URL, resp.StatusCode, resp.Header, body); err != nil {
		return body, fmt.Errorf("against api/openapi.yaml: %s", firstLine(err.Error()))
	}
	return body, nil
}

// finalChecks checks every half-open episode left, the 429-only portals
// whose profile did not say so in advance, and the outputs one last time.
func (r *run) finalChecks() {
	r.tally.violate(r.episodes.check(r.calls, time.Now(), true)...)
	for _, p := range r.portals {
		if !p.onlyThrottled() || r.stormy[p.id] {
			continue // the stormy ones were checked as they went
		}
		for _, t := range r.episodes.opened(p.id) {
			r.tally.violate(Violation{At: t.at, Kind: KindThrottle, Detail: fmt.Sprintf(
				"%s opened on replica %d, whose portal only ever throttled: %s", t.id, t.replica+1, t.reason)})
		}
	}
	r.scanOutputs()
}
