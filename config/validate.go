package config

import (
	"encoding/base64"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	// Time zones must load on machines without a zoneinfo database.
	_ "time/tzdata"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/mapping"
)

// validate checks every value of c, once defaults are filled in, and loads
// each source's Location. It reports every problem it finds. readFiles
// says whether the files the configuration names (TLS CAs, certificates,
// keys) are read to check them.
func validate(c *Config, readFiles bool) Errors {
	var errs Errors
	zones := map[string]*time.Location{}
	zone := func(name string) (*time.Location, error) {
		if loc, ok := zones[name]; ok {
			return loc, nil
		}
		loc, err := time.LoadLocation(name)
		if err == nil {
			zones[name] = loc
		}
		return loc, err
	}

	validateServer(&errs, c.Server)
	if u, err := url.Parse(c.Problems.BaseURI); err != nil || u.Scheme == "" {
		errs.add("problems.base_uri", "want an absolute URI such as https://api.example.com/problems/")
	}
	validateQuery(&errs, c.Query)
	validateStore(&errs, c.Store, readFiles)
	if c.Async.MaxWait <= 0 {
		errs.add("async.max_wait", "must be positive")
	}
	if !positive(c.Async.ReleaseRPS) {
		errs.add("async.release_rps", "must be positive")
	}
	validateWebhooks(&errs, c.Webhooks)
	validateMemory(&errs, c)
	validateWatches(&errs, c)

	defaults := validateSettings("defaults", c.Defaults, zone)
	errs = append(errs, defaults...)
	inherited := map[string]bool{}
	for _, e := range defaults {
		inherited[strings.TrimPrefix(e.Key, "defaults")+"\x00"+e.Msg] = true
	}

	if len(c.Sources) == 0 {
		errs.add("sources", "at least one source is required")
	}
	ids := map[string]int{}
	keys := map[string]int{}
	for i := range c.Sources {
		s := &c.Sources[i]
		p := index("sources", i)
		validateSource(&errs, p, *s, readFiles)
		if s.ID != "" {
			if j, dup := ids[s.ID]; dup {
				errs.add(child(p, "id"), "duplicate id %q (also %s)", s.ID, index("sources", j))
			} else {
				ids[s.ID] = i
			}
		}
		// A problem the source only inherits is reported once, on defaults.
		for _, e := range validateSettings(p, s.settings(), zone) {
			if !inherited[strings.TrimPrefix(e.Key, p)+"\x00"+e.Msg] {
				errs = append(errs, e)
			}
		}
		if loc, err := zone(s.TimeZone); err == nil {
			s.Location = loc
		}
		if j, shared := keys[s.BreakerKey]; shared {
			if diff := c.Sources[j].Breaker.diff(s.Breaker); len(diff) > 0 {
				errs.add(child(p, "breaker"), "source %q shares breaker_key %q with source %q (%s), so their breaker settings must be the same: %s",
					s.ID, s.BreakerKey, c.Sources[j].ID, index("sources", j), strings.Join(diff, ", "))
			}
		} else if s.BreakerKey != "" {
			keys[s.BreakerKey] = i
		}
	}
	return errs
}

// validateServer checks the server block.
func validateServer(errs *Errors, s Server) {
	if msg := checkListen(s.Listen); msg != "" {
		errs.add("server.listen", "%s", msg)
	}
	if s.MaxInFlight < 1 {
		errs.add("server.max_in_flight", "must be at least 1")
	}
	if s.ReadTimeout <= 0 {
		errs.add("server.read_timeout", "must be positive")
	}
	if s.ShutdownDelay < 0 {
		errs.add("server.shutdown_delay", "must not be negative")
	}
	if s.ShutdownTimeout < 0 {
		errs.add("server.shutdown_timeout", "must not be negative")
	}
	names := map[string]int{}
	keys := map[string]int{}
	for i, k := range s.APIKeys {
		p := index("server.api_keys", i)
		if strings.TrimSpace(k.Name) == "" {
			errs.add(child(p, "name"), "required")
		} else if j, dup := names[k.Name]; dup {
			errs.add(child(p, "name"), "duplicate name %q (also %s)", k.Name, index("server.api_keys", j))
		} else {
			names[k.Name] = i
		}
		if k.Key == "" {
			errs.add(child(p, "key"), "required")
		} else if j, dup := keys[k.Key]; dup {
			errs.add(child(p, "key"), "same key as %s", index("server.api_keys", j))
		} else {
			keys[k.Key] = i
		}
		if !positive(k.RPS) {
			errs.add(child(p, "rps"), "must be positive")
		}
		if k.Burst < 0 {
			errs.add(child(p, "burst"), "must not be negative (0 means ceil(rps))")
		}
		if k.WebhookSecret != "" && !validSecret(k.WebhookSecret) {
			errs.add(child(p, "webhook_secret"), `want "whsec_" followed by a base64 key (value not shown)`)
		}
	}
}

// checkListen describes what is wrong with a listen address, or is empty.
func checkListen(addr string) string {
	if addr == "" {
		return "required"
	}
	_, port, err := net.SplitHostPort(addr)
	if n, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || n > math.MaxUint16 {
		return fmt.Sprintf("want host:port such as 127.0.0.1:8080, got %q", addr)
	}
	return ""
}

// validateQuery checks the query block.
func validateQuery(errs *Errors, q Query) {
	if q.MaxDeadline <= 0 {
		errs.add("query.max_deadline", "must be positive")
	}
	switch {
	case q.Deadline <= 0:
		errs.add("query.deadline", "must be positive")
	case q.MaxDeadline > 0 && q.Deadline > q.MaxDeadline:
		errs.add("query.deadline", "must not exceed query.max_deadline (%s)", q.MaxDeadline)
	}
}

// validateWebhooks checks the webhooks block.
func validateWebhooks(errs *Errors, w Webhooks) {
	if w.SigningSecret != "" && !validSecret(w.SigningSecret) {
		errs.add("webhooks.signing_secret", `want "whsec_" followed by a base64 key (value not shown)`)
	}
	if w.Timeout <= 0 {
		errs.add("webhooks.timeout", "must be positive")
	}
	if w.MaxAttempts < 1 {
		errs.add("webhooks.max_attempts", "must be at least 1")
	}
	if w.Backoff < 0 {
		errs.add("webhooks.backoff", "must not be negative")
	}
	if w.Breaker.ConsecutiveFailures < 1 {
		errs.add("webhooks.breaker.consecutive_failures", "must be at least 1")
	}
	if w.Breaker.OpenFor <= 0 {
		errs.add("webhooks.breaker.open_for", "must be positive")
	}
}

// validateWatches checks the watches block (SPEC 15), when present: it
// needs API keys (a watch belongs to the key that made it) and a memory
// key (what a watch keeps is sealed with it).
func validateWatches(errs *Errors, c *Config) {
	w := c.Watches
	if w == nil {
		return
	}
	if len(c.Server.APIKeys) == 0 {
		errs.add("watches", "needs server.api_keys: a watch belongs to the API key that created it")
	}
	if c.Memory.Key == "" {
		errs.add("watches", "needs memory.key: the subject and the last known infractions of a watch are sealed with it")
	}
	if w.MinInterval <= 0 {
		errs.add("watches.min_interval", "must be positive")
	}
	switch {
	case w.DefaultInterval <= 0:
		errs.add("watches.default_interval", "must be positive")
	case w.MinInterval > 0 && w.DefaultInterval < w.MinInterval:
		errs.add("watches.default_interval", "must not be below watches.min_interval (%s)", w.MinInterval)
	}
	if !(w.BudgetShare > 0 && w.BudgetShare <= 1) {
		errs.add("watches.budget_share", "must be above 0 and at most 1")
	}
	if w.MaxPerKey < 1 {
		errs.add("watches.max_per_key", "must be at least 1")
	}
}

// minEntryBytes is the least memory.max_entry_bytes: room for the sealing
// and an answer without infractions.
const minEntryBytes = 256

// validateMemory checks the memory block: keys of 32 bytes in base64, one
// required when any source remembers, and positive bounds.
func validateMemory(errs *Errors, c *Config) {
	m := c.Memory
	if m.Key != "" {
		if _, err := DecodeMemoryKey(m.Key); err != nil {
			errs.add("memory.key", "%v (value not shown)", err)
		}
	} else {
		for i, s := range c.Sources {
			if s.Remember.Remembers() {
				errs.add("memory.key", "required: source %q (%s) remembers answers (remember.fresh or remember.stale above 0s); set 32 random bytes in base64, e.g. from `openssl rand -base64 32`",
					s.ID, index("sources", i))
				break
			}
		}
		if len(m.PreviousKeys) > 0 {
			errs.add("memory.key", "required with memory.previous_keys: previous keys are for a rotation to it")
		}
	}
	for i, k := range m.PreviousKeys {
		if _, err := DecodeMemoryKey(k); err != nil {
			errs.add(index("memory.previous_keys", i), "%v (value not shown)", err)
		}
	}
	if m.MaxEntries < 1 {
		errs.add("memory.max_entries", "must be at least 1")
	}
	if m.MaxEntryBytes < minEntryBytes {
		errs.add("memory.max_entry_bytes", "must be at least %d", minEntryBytes)
	}
}

// MemoryKeySize is the length of a memory key once decoded.
const MemoryKeySize = 32

// DecodeMemoryKey decodes a memory key: base64 (standard or URL alphabet,
// padded or not) of exactly MemoryKeySize bytes. Its errors never show the
// key.
func DecodeMemoryKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		key, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(key) != MemoryKeySize {
			return nil, fmt.Errorf("decodes to %d bytes, want %d", len(key), MemoryKeySize)
		}
		return key, nil
	}
	return nil, fmt.Errorf("want %d random bytes in base64", MemoryKeySize)
}

// Keys decodes the memory keys: the current one and the previous ones, in
// order. Validation has checked them.
func (m Memory) Keys() (current []byte, previous [][]byte, err error) {
	if current, err = DecodeMemoryKey(m.Key); err != nil {
		return nil, nil, fmt.Errorf("memory.key: %w", err)
	}
	for i, k := range m.PreviousKeys {
		p, err := DecodeMemoryKey(k)
		if err != nil {
			return nil, nil, fmt.Errorf("memory.previous_keys[%d]: %w", i, err)
		}
		previous = append(previous, p)
	}
	return current, previous, nil
}

// Remembers reports whether any source remembers answers.
func (c *Config) Remembers() bool {
	for _, s := range c.Sources {
		if s.Remember.Remembers() {
			return true
		}
	}
	return false
}

// validSecret reports whether s is a Standard Webhooks secret: whsec_
// followed by a non-empty base64 key (padded or not).
func validSecret(s string) bool {
	enc, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		return false
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(enc)
	}
	return err == nil && len(key) > 0
}

// validateSettings checks the inheritable settings of a source or of the
// defaults block, with key paths under prefix.
func validateSettings(prefix string, s Defaults, zone func(string) (*time.Location, error)) Errors {
	var errs Errors
	if s.Timeout <= 0 {
		errs.add(child(prefix, "timeout"), "must be positive")
	}
	if s.TimeZone == "" {
		errs.add(child(prefix, "time_zone"), "required")
	} else if _, err := zone(s.TimeZone); err != nil {
		errs.add(child(prefix, "time_zone"), "unknown time zone %q (want an IANA name such as America/Argentina/Buenos_Aires)", s.TimeZone)
	}
	if !validCurrency(s.Currency) {
		errs.add(child(prefix, "currency"), "want a three-letter upper-case ISO 4217 code such as ARS, got %q", s.Currency)
	}
	if s.MaxResponseBytes <= 0 {
		errs.add(child(prefix, "max_response_bytes"), "must be positive")
	}
	validateVoucherTypes(&errs, child(prefix, "voucher_types"), s.VoucherTypes)
	if s.VoucherMaxBytes <= 0 {
		errs.add(child(prefix, "voucher_max_bytes"), "must be positive")
	}

	r, rp := s.Retry, child(prefix, "retry")
	if r.MaxRetries < 0 {
		errs.add(child(rp, "max_retries"), "must not be negative")
	}
	if r.InitialBackoff < 0 {
		errs.add(child(rp, "initial_backoff"), "must not be negative")
	}
	if r.MaxBackoff < 0 {
		errs.add(child(rp, "max_backoff"), "must not be negative")
	} else if r.InitialBackoff > r.MaxBackoff {
		errs.add(child(rp, "initial_backoff"), "must not exceed max_backoff (%s)", r.MaxBackoff)
	}

	errs = append(errs, s.Breaker.Validate(child(prefix, "breaker"))...)

	rm := child(prefix, "remember")
	if s.Remember.Fresh < 0 {
		errs.add(child(rm, "fresh"), "must not be negative (0s means never)")
	}
	if s.Remember.Stale < 0 {
		errs.add(child(rm, "stale"), "must not be negative (0s means never)")
	}

	l, lp := s.RateLimit, child(prefix, "rate_limit")
	if l.RPS < 0 {
		errs.add(child(lp, "rps"), "must not be negative (0 means no budget)")
	}
	if l.Burst < 0 {
		errs.add(child(lp, "burst"), "must not be negative (0 means ceil(rps))")
	}
	if l.MaxWait < 0 {
		errs.add(child(lp, "max_wait"), "must not be negative")
	}
	if l.MaxPause <= 0 {
		errs.add(child(lp, "max_pause"), "must be positive")
	}

	d, dp := s.Drift, child(prefix, "drift")
	if d.Window <= 0 {
		errs.add(child(dp, "window"), "must be positive")
	}
	if !(d.UnmappedRatio >= 0 && d.UnmappedRatio <= 1) {
		errs.add(child(dp, "unmapped_ratio"), "must be between 0 and 1 (1: never), got %v", d.UnmappedRatio)
	}
	if !(d.EmptyRatio >= 0 && d.EmptyRatio <= 1) {
		errs.add(child(dp, "empty_ratio"), "must be between 0 (off) and 1, got %v", d.EmptyRatio)
	}
	return errs
}

// validateVoucherTypes checks a voucher_types list: at least one media
// type, each type/subtype without parameters or wildcards.
func validateVoucherTypes(errs *Errors, p string, types []string) {
	if len(types) == 0 {
		errs.add(p, "must list at least one media type, such as application/pdf")
	}
	for i, t := range types {
		typ, sub, ok := strings.Cut(t, "/")
		if !ok || !validToken(typ) || !validToken(sub) || strings.Contains(t, "*") {
			errs.add(index(p, i), "want a media type such as application/pdf (type/subtype, no parameters, no wildcards), got %q", t)
		}
	}
}

// validCurrency reports whether c is three upper-case ASCII letters.
func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := range 3 {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// validateSource checks what is a source's own: its identity, portal,
// operations and response mapping.
func validateSource(errs *Errors, p string, s Source, readFiles bool) {
	switch {
	case s.ID == "":
		errs.add(child(p, "id"), "required")
	case !validID(s.ID):
		errs.add(child(p, "id"), "%q must be lower-case letters, digits, _ and -, starting with a letter or digit", s.ID)
	}
	if s.ID != "" && s.BreakerKey != s.ID && !validID(s.BreakerKey) {
		errs.add(child(p, "breaker_key"), "%q must be lower-case letters, digits, _ and -, starting with a letter or digit", s.BreakerKey)
	}
	if strings.TrimSpace(s.Jurisdiction) == "" {
		errs.add(child(p, "jurisdiction"), "required")
	}
	validateHeaders(errs, child(p, "headers"), s.Headers)
	validateOperations(errs, child(p, "operations"), s.Operations)
	if s.Type != HTTPType {
		// Another adapter reads what it needs; only the names above apply.
		if !validID(s.Type) {
			errs.add(child(p, "type"), "%q must be lower-case letters, digits, _ and -", s.Type)
		}
		return
	}
	if s.BaseURL == "" {
		errs.add(child(p, "base_url"), "required")
	} else if u, ok := absoluteHTTP(s.BaseURL); !ok {
		errs.add(child(p, "base_url"), "want an absolute http:// or https:// URL")
	} else if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		errs.add(child(p, "base_url"), "must not have a query or fragment (write them in the operation paths)")
	}
	validateAdapter(errs, p, s, readFiles)
	validateResponse(errs, child(p, "response"), s.Response, s.Operations)
}

// absoluteHTTP parses raw as base_url and token_url must be: an absolute
// http or https URL with a host, its scheme in any case (url.Parse lowers
// it, as RFC 3986 allows).
func absoluteHTTP(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return u, true
}

// validID reports whether id matches ^[a-z0-9][a-z0-9_-]*$.
func validID(id string) bool {
	for i := range len(id) {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return id != ""
}

// validateHeaders checks header names and values; values are never shown.
func validateHeaders(errs *Errors, p string, h map[string]string) {
	canonical := map[string]string{}
	for _, name := range sortedKeys(h) {
		kp := child(p, name)
		if !validToken(name) {
			errs.add(kp, "not a valid HTTP header name")
			continue
		}
		if strings.ContainsFunc(h[name], func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			errs.add(kp, "value contains a control character (value not shown)")
		}
		c := strings.ToLower(name)
		if other, dup := canonical[c]; dup {
			errs.add(kp, "same header as %q (header names are case-insensitive)", other)
		}
		canonical[c] = name
	}
}

// validToken reports whether s is an RFC 9110 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// placeholders says which path placeholders op provides, and which one
// its path requires.
func placeholders(op aggregator.Operation) (required string, available []string) {
	switch op {
	case aggregator.ByDomain:
		return "domain", []string{"domain"}
	case aggregator.ByID:
		return "id", []string{"id", "id_kind"}
	}
	return "infraction_id", []string{"infraction_id"}
}

// validateOperations checks each configured operation.
func validateOperations(errs *Errors, p string, ops map[aggregator.Operation]Operation) {
	if len(ops) == 0 {
		errs.add(p, "at least one operation (by_domain, by_id, voucher) is required")
		return
	}
	for _, name := range sortedKeys(ops) {
		op, kp := ops[name], child(p, string(name))
		if !name.Valid() {
			errs.add(kp, "unknown operation (want by_domain, by_id or voucher)")
			continue
		}
		if op.Method != "GET" && op.Method != "POST" {
			errs.add(child(kp, "method"), "want GET or POST, got %q", op.Method)
		}
		if name != aggregator.ByID {
			if op.Accepts != nil {
				errs.add(child(kp, "accepts"), "only by_id takes accepts")
			}
			continue
		}
		if len(op.Accepts) == 0 {
			errs.add(child(kp, "accepts"), "must list at least one of cuit, dni (leave it out for both)")
		}
		for i, k := range op.Accepts {
			switch {
			case k != aggregator.CUIT && k != aggregator.DNI:
				errs.add(index(child(kp, "accepts"), i), "want cuit or dni, got %q", k)
			case slices.Index(op.Accepts, k) < i:
				errs.add(index(child(kp, "accepts"), i), "%q is listed twice", k)
			}
		}
	}
}

// checkPathShape lists what is wrong with the shape of a path (its
// placeholders apart).
func checkPathShape(path string) []string {
	if path == "" {
		return []string{"required"}
	}
	var msgs []string
	if path[0] != '/' || strings.HasPrefix(path, "//") {
		msgs = append(msgs, `must start with a single "/"`)
	}
	filled := strings.Map(func(r rune) rune {
		if r == '{' || r == '}' {
			return 'x'
		}
		return r
	}, path)
	if u, err := url.Parse(filled); err != nil || u.Scheme != "" || u.Host != "" || u.Fragment != "" {
		msgs = append(msgs, "is not a URL path with an optional query")
	}
	return msgs
}

// braced lists placeholder names as {a}, {b}.
func braced(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "{" + n + "}"
	}
	return strings.Join(out, ", ")
}

// fieldNames lists the keys of response.fields.
// validateResponse checks the response mapping of a source (package
// mapping knows the rules). A source without lookups (vouchers only) needs
// no mapping.
func validateResponse(errs *Errors, p string, r Response, ops map[aggregator.Operation]Operation) {
	_, byDomain := ops[aggregator.ByDomain]
	_, byID := ops[aggregator.ByID]
	for _, e := range mapping.Check(r, mapping.Options{VoucherOnly: !byDomain && !byID}) {
		key := p
		switch {
		case e.Key == "":
		case strings.HasPrefix(e.Key, "["):
			key += e.Key
		default:
			key += "." + e.Key
		}
		errs.add(key, "%s", e.Msg)
	}
}

// positive reports whether f is a finite number above zero.
func positive(f float64) bool {
	return f > 0 && !math.IsInf(f, 1)
}

// sortedKeys returns the keys of m in order, for deterministic messages.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
