package config

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/multas/aggregator"
)

// builtin is the configuration before the file is read: every default of
// SPEC 6 and no sources.
func builtin() *Config {
	return &Config{
		Server: Server{
			Listen:          "127.0.0.1:8080",
			MaxInFlight:     1024,
			ReadTimeout:     Duration(5 * time.Second),
			ShutdownDelay:   Duration(5 * time.Second),
			ShutdownTimeout: Duration(15 * time.Second),
		},
		Query: Query{
			Deadline:    Duration(3 * time.Second),
			MaxDeadline: Duration(10 * time.Second),
		},
		Store: Store{
			KeyPrefix:     "aggregator:",
			Timeout:       Duration(250 * time.Millisecond),
			FlushInterval: Duration(20 * time.Millisecond),
		},
		Async: Async{MaxWait: Duration(time.Hour), ReleaseRPS: 5},
		Webhooks: Webhooks{
			Timeout:     Duration(10 * time.Second),
			MaxAttempts: 5,
			Backoff:     Duration(time.Second),
			Breaker: WebhookBreaker{
				ConsecutiveFailures: 5,
				OpenFor:             Duration(10 * time.Second),
			},
		},
		Memory: Memory{MaxEntries: 100000, MaxEntryBytes: 65536},
		Defaults: Defaults{
			Timeout:          Duration(2 * time.Second),
			TimeZone:         "America/Argentina/Buenos_Aires",
			Currency:         "ARS",
			MaxResponseBytes: 2 << 20,
			VoucherTypes:     []string{"application/pdf", "image/png", "image/jpeg"},
			VoucherMaxBytes:  10 << 20,
			Retry: Retry{
				MaxRetries:     2,
				InitialBackoff: Duration(100 * time.Millisecond),
				MaxBackoff:     Duration(60 * time.Second),
			},
			Breaker: Breaker{
				Window:              Duration(60 * time.Second),
				MinCalls:            10,
				FailureRatio:        0.5,
				ConsecutiveFailures: 5,
				OpenFor:             Duration(30 * time.Second),
				SlowCall:            0,
				FailureStatuses:     []int{500, 502, 503, 504},
			},
			RateLimit: RateLimit{
				RPS:      0,
				Burst:    0,
				MaxWait:  Duration(500 * time.Millisecond),
				MaxPause: Duration(10 * time.Minute),
			},
			Drift: Drift{Window: Duration(time.Hour), UnmappedRatio: 0.2},
		},
	}
}

// inherit is a source that has every setting of d and nothing else; the
// source's own keys are decoded over it.
func inherit(d Defaults) Source {
	return Source{
		Timeout:          d.Timeout,
		TimeZone:         d.TimeZone,
		Currency:         d.Currency,
		MaxResponseBytes: d.MaxResponseBytes,
		VoucherTypes:     slices.Clone(d.VoucherTypes),
		VoucherMaxBytes:  d.VoucherMaxBytes,
		Retry:            d.Retry,
		Breaker:          d.Breaker.clone(),
		RateLimit:        d.RateLimit,
		Remember:         d.Remember,
		Drift:            d.Drift,
	}
}

// settings are the inheritable settings of s, in the shape of Defaults.
func (s Source) settings() Defaults {
	return Defaults{
		Timeout:          s.Timeout,
		TimeZone:         s.TimeZone,
		Currency:         s.Currency,
		MaxResponseBytes: s.MaxResponseBytes,
		VoucherTypes:     s.VoucherTypes,
		VoucherMaxBytes:  s.VoucherMaxBytes,
		Retry:            s.Retry,
		Breaker:          s.Breaker,
		RateLimit:        s.RateLimit,
		Remember:         s.Remember,
		Drift:            s.Drift,
	}
}

// fill applies the defaults that depend on other values: problems.base_uri
// from server.listen, each source's breaker_key, operation methods and
// accepted id kinds, and bursts from rates.
func (c *Config) fill() {
	if c.Problems.BaseURI == "" {
		c.Problems.BaseURI = DefaultBaseURI(c.Server.Listen)
	}
	for i := range c.Server.APIKeys {
		k := &c.Server.APIKeys[i]
		k.Burst = burst(k.RPS, k.Burst)
	}
	for i := range c.Sources {
		s := &c.Sources[i]
		if s.BreakerKey == "" {
			s.BreakerKey = s.ID
		}
		if s.Response.Format == "" {
			s.Response.Format = "json"
		}
		for name, op := range s.Operations {
			if op.Method == "" {
				op.Method = "GET"
			}
			op.Method = strings.ToUpper(op.Method)
			if name == aggregator.ByID && op.Accepts == nil {
				op.Accepts = []aggregator.IDKind{aggregator.CUIT, aggregator.DNI}
			}
			s.Operations[name] = op
		}
		s.RateLimit.Burst = burst(s.RateLimit.RPS, s.RateLimit.Burst)
		s.fillAdapter()
	}
}

// burst is b, or ceil(rps) when b is 0 and rps positive.
func burst(rps float64, b int) int {
	if b != 0 || !(rps > 0) {
		return b
	}
	return int(math.Ceil(min(rps, math.MaxInt32)))
}

// clone is b with its own copy of FailureStatuses.
func (b Breaker) clone() Breaker {
	b.FailureStatuses = slices.Clone(b.FailureStatuses)
	return b
}
