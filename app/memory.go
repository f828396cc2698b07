package app

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/memory"
)

// newMemory builds the remembered answers of SPEC 14 when memory.key is
// set: in Redis when the store block names one (shared by the fleet), else
// in this process, bounded by memory.max_entries.
func (a *App) newMemory(cfg *config.Config, opts Options) (*memory.Memory, error) {
	if cfg.Memory.Key == "" {
		return nil, nil
	}
	current, previous, err := cfg.Memory.Keys()
	if err != nil {
		return nil, err
	}
	keys, err := memory.NewKeys(current, previous...)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	var store memory.Store
	if a.stores != nil {
		store = a.stores.Memory
	} else {
		lru := memory.NewLRU(cfg.Memory.MaxEntries, opts.Now)
		a.Metrics.CountMemoryEntries(lru.Len)
		store = lru
	}
	return memory.New(memory.Options{Keys: keys, Store: store, MaxEntryBytes: cfg.Memory.MaxEntryBytes, Now: opts.Now})
}

// memoryPolicy is how source sc remembers its answers.
func memoryPolicy(sc config.Source) memory.Policy {
	return memory.Policy{
		Fresh: time.Duration(sc.Remember.Fresh), Stale: time.Duration(sc.Remember.Stale),
		Fingerprint: Fingerprint(sc),
	}
}

// Fingerprint identifies the configuration that shapes a source's answers:
// its type, jurisdiction, portal, requests (operations, pagination,
// authentication without its secrets, the names of its headers) and
// response mapping (format, selectors, status map, time zone, currency),
// as 16 hex digits. Answers remembered under another fingerprint are never
// served: a fixed mapping is not answered by the old one. What bounds or
// guards the calls (timeouts, retries, breaker, rate limit, sizes, TLS
// files, remember itself) is not part of it, and neither is anything new
// to this function's reader: a key added to config.Source counts until
// this list says it does not.
func Fingerprint(sc config.Source) string {
	names := make([]string, 0, len(sc.Headers))
	for k := range sc.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	s := sc
	s.Headers = nil // secrets (SPEC 10): their names only, below
	s.BreakerKey = ""
	s.Timeout, s.Retry, s.Breaker, s.RateLimit, s.Remember = 0, config.Retry{}, config.Breaker{}, config.RateLimit{}, config.Remember{}
	s.MaxResponseBytes, s.VoucherTypes, s.VoucherMaxBytes = 0, nil, 0
	s.TLS = config.TLS{}
	doc, err := json.Marshal(struct {
		Source  config.Source `json:"source"`
		Headers []string      `json:"header_names"`
	}{s, names})
	if err != nil {
		// Every part of a Source marshals; should one ever not, no two
		// configurations share the fingerprint of a failure.
		doc = fmt.Appendf(nil, "%#v", s)
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:8])
}
