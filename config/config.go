// Package config loads the aggregator's YAML configuration (SPEC 6): it
// expands ${NAME} references, applies the built-in defaults, merges the
// `defaults` block into every source key by key, and validates the result,
// reporting every problem at once with its file, line and key path.
//
// The configuration is parsed into a yaml.Node tree and walked by this
// package, so that unknown keys, wrong types and invalid values are all
// reported together, and so that environment values are substituted inside
// already-parsed scalars: a value cannot inject YAML structure.
//
// Values: ${NAME} and ${NAME:-default} (the default applies when the
// variable is empty or unset) are expanded in every scalar value, never in
// keys; $$ is a literal $, and any other $ is kept as written. A null value
// (`timeout:` or `~`) is the same as leaving the key out. Durations are Go
// duration strings ("3s"; a bare 0 too). Anchors, aliases and merge keys
// (<<) work as YAML defines them. Messages never show a header value, a
// token, a key, a secret or a value that came from the environment.
package config

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/mapping"
)

// Config is the whole, validated configuration. Sources hold their
// effective settings: every value they inherit from Defaults is merged in.
type Config struct {
	Server   Server   `yaml:"server" json:"server"`
	Problems Problems `yaml:"problems" json:"problems"`
	Query    Query    `yaml:"query" json:"query"`
	Store    Store    `yaml:"store" json:"store"`
	Async    Async    `yaml:"async" json:"async"`
	Webhooks Webhooks `yaml:"webhooks" json:"webhooks"`
	// Memory keys and bounds the remembered answers (SPEC 14).
	Memory Memory `yaml:"memory" json:"memory"`
	// Watches, when the block is present, turns watches on (SPEC 15); nil
	// means off.
	Watches *Watches `yaml:"watches,omitempty" json:"watches,omitempty"`
	// Defaults is the `defaults` block as written, over the built-in defaults.
	Defaults Defaults `yaml:"defaults" json:"defaults"`
	// Sources are the configured portals, in file order, each with every
	// inherited default merged in.
	Sources []Source `yaml:"sources" json:"sources"`
}

// Server configures the HTTP API.
type Server struct {
	// Listen is the address the API listens on (default 127.0.0.1:8080).
	Listen string `yaml:"listen" json:"listen"`
	// AdminToken is the bearer token of /v1/admin; empty closes the admin
	// surface to everyone.
	AdminToken string `yaml:"admin_token" json:"admin_token"`
	// APIKeys, when not empty, makes X-API-Key mandatory on client endpoints.
	APIKeys []APIKey `yaml:"api_keys" json:"api_keys"`
	// MaxInFlight bounds the requests this replica serves at once (health,
	// readiness and metrics excepted); above it the answer is 503
	// overloaded (SPEC 9). Default 1024.
	MaxInFlight int `yaml:"max_in_flight" json:"max_in_flight"`
	// ReadTimeout bounds the time a request's headers and body take to
	// arrive, from its start: a late body is answered 408 request-timeout, late headers
	// get a closed connection (SPEC 9). Default 5s.
	ReadTimeout Duration `yaml:"read_timeout" json:"read_timeout"`
	// ShutdownDelay is how long, once a SIGTERM came, /readyz answers 503
	// while requests are still served, so that load balancers notice
	// (default 5s).
	ShutdownDelay Duration `yaml:"shutdown_delay" json:"shutdown_delay"`
	// ShutdownTimeout bounds the wait for in-flight requests once the
	// server stops accepting (default 15s).
	ShutdownTimeout Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`
}

// APIKey is one client credential with its own request budget.
type APIKey struct {
	Name string  `yaml:"name" json:"name"`
	Key  string  `yaml:"key" json:"key"`
	RPS  float64 `yaml:"rps" json:"rps"`
	// Burst is the bucket size; 0 in the file means ceil(RPS).
	Burst int `yaml:"burst" json:"burst"`
	// WebhookSecret signs the deliveries of this key's watches and
	// asynchronous queries (`whsec_…`, a secret); empty means
	// webhooks.signing_secret.
	WebhookSecret string `yaml:"webhook_secret" json:"-"`
}

// Problems configures RFC 9457 problem documents.
type Problems struct {
	// BaseURI prefixes every problem slug. When empty it defaults to
	// http://<listen>/problems/ (see DefaultBaseURI).
	BaseURI string `yaml:"base_uri" json:"base_uri"`
}

// Query bounds the total time of one synchronous query.
type Query struct {
	Deadline    Duration `yaml:"deadline" json:"deadline"`
	MaxDeadline Duration `yaml:"max_deadline" json:"max_deadline"`
}

// Async configures asynchronous queries.
type Async struct {
	MaxWait    Duration `yaml:"max_wait" json:"max_wait"`
	ReleaseRPS float64  `yaml:"release_rps" json:"release_rps"`
}

// Webhooks configures the delivery of asynchronous results.
type Webhooks struct {
	// SigningSecret is `whsec_` followed by the base64 key (Standard
	// Webhooks); empty means deliveries are not signed.
	SigningSecret string         `yaml:"signing_secret" json:"signing_secret"`
	Timeout       Duration       `yaml:"timeout" json:"timeout"`
	MaxAttempts   int            `yaml:"max_attempts" json:"max_attempts"`
	Backoff       Duration       `yaml:"backoff" json:"backoff"`
	AllowPrivate  bool           `yaml:"allow_private" json:"allow_private"`
	Breaker       WebhookBreaker `yaml:"breaker" json:"breaker"`
}

// WebhookBreaker is the breaker of each callback origin.
type WebhookBreaker struct {
	ConsecutiveFailures int      `yaml:"consecutive_failures" json:"consecutive_failures"`
	OpenFor             Duration `yaml:"open_for" json:"open_for"`
}

// Memory configures the answers the sources remember (SPEC 14): the key
// that hashes subjects and seals values, and the bounds of the in-process
// memory (Redis holds them when store is set).
type Memory struct {
	// Key is 32 random bytes in base64 (a secret); required when any
	// source remembers.
	Key string `yaml:"key" json:"-"`
	// PreviousKeys are older keys of a rotation: they open and hash,
	// never seal.
	PreviousKeys []string `yaml:"previous_keys,omitempty" json:"-"`
	// MaxEntries bounds the entries kept in the process without a store.
	MaxEntries int `yaml:"max_entries" json:"max_entries"`
	// MaxEntryBytes bounds one sealed entry: a larger answer is not
	// remembered.
	MaxEntryBytes int `yaml:"max_entry_bytes" json:"max_entry_bytes"`
}

// Watches configures the watches of SPEC 15: a subject checked every
// interval, its changes delivered by webhook. The block's presence turns
// them on; the keys it leaves out take the defaults of NewWatches.
type Watches struct {
	// MinInterval is the shortest interval a watch may ask for (6h).
	MinInterval Duration `yaml:"min_interval" json:"min_interval"`
	// DefaultInterval is the interval of a watch that asks for none (24h).
	DefaultInterval Duration `yaml:"default_interval" json:"default_interval"`
	// BudgetShare is the most of any source's rate budget that watch
	// checks may use, in (0, 1] (0.5).
	BudgetShare float64 `yaml:"budget_share" json:"budget_share"`
	// MaxPerKey bounds the watches of one API key (10000).
	MaxPerKey int `yaml:"max_per_key" json:"max_per_key"`
}

// setDefaults gives a watches block written in the file the defaults of
// the keys it leaves out (the decoder calls it when it allocates one).
func (w *Watches) setDefaults() {
	*w = Watches{
		MinInterval: Duration(6 * time.Hour), DefaultInterval: Duration(24 * time.Hour),
		BudgetShare: 0.5, MaxPerKey: 10000,
	}
}

// Remember is how long a source's answers are remembered (SPEC 14); 0s
// is never.
type Remember struct {
	// Fresh: an answer younger than this is served without calling the
	// portal.
	Fresh Duration `yaml:"fresh" json:"fresh"`
	// Stale: an answer at most this old may stand in for the source when
	// it fails or is skipped and the request allows it.
	Stale Duration `yaml:"stale" json:"stale"`
}

// Remembers reports whether answers are kept at all.
func (r Remember) Remembers() bool { return r.Fresh > 0 || r.Stale > 0 }

// Retry configures retries of one source call inside one query (SPEC 4.3).
type Retry struct {
	MaxRetries     int      `yaml:"max_retries" json:"max_retries"`
	InitialBackoff Duration `yaml:"initial_backoff" json:"initial_backoff"`
	MaxBackoff     Duration `yaml:"max_backoff" json:"max_backoff"`
}

// RateLimit is a source's outbound budget and pause bounds (SPEC 4.2).
type RateLimit struct {
	// RPS is the request rate; 0 means no budget.
	RPS float64 `yaml:"rps" json:"rps"`
	// Burst is the bucket size. In a source's effective settings, 0 with a
	// positive RPS is replaced by ceil(RPS).
	Burst    int      `yaml:"burst" json:"burst"`
	MaxWait  Duration `yaml:"max_wait" json:"max_wait"`
	MaxPause Duration `yaml:"max_pause" json:"max_pause"`
}

// Defaults are the settings every source inherits and may override.
type Defaults struct {
	Timeout          Duration `yaml:"timeout" json:"timeout"`
	TimeZone         string   `yaml:"time_zone" json:"time_zone"`
	Currency         string   `yaml:"currency" json:"currency"`
	MaxResponseBytes int64    `yaml:"max_response_bytes" json:"max_response_bytes"`
	// VoucherTypes are the media types a voucher is relayed with (SPEC 9).
	VoucherTypes []string `yaml:"voucher_types" json:"voucher_types"`
	// VoucherMaxBytes bounds a relayed voucher (SPEC 9).
	VoucherMaxBytes int64     `yaml:"voucher_max_bytes" json:"voucher_max_bytes"`
	Retry           Retry     `yaml:"retry" json:"retry"`
	Breaker         Breaker   `yaml:"breaker" json:"breaker"`
	RateLimit       RateLimit `yaml:"rate_limit" json:"rate_limit"`
	Remember        Remember  `yaml:"remember" json:"remember"`
	Drift           Drift     `yaml:"drift" json:"drift"`
}

// Drift says when a source's answers are taken to have changed (SPEC 13):
// an answer shaped in a way the window has not seen, or a share of items
// that do not map, or of lookups without items, rising above its ratio.
type Drift struct {
	// Window is how far back the source's shape and shares look.
	Window Duration `yaml:"window" json:"window"`
	// UnmappedRatio is the share of items with a configured field
	// missing, invalid or of an unknown status above which a mapping
	// event is recorded.
	UnmappedRatio float64 `yaml:"unmapped_ratio" json:"unmapped_ratio"`
	// EmptyRatio is the share of lookups answered without any item above
	// which a mapping event is recorded; 0 is off.
	EmptyRatio float64 `yaml:"empty_ratio" json:"empty_ratio"`
}

// Source is one jurisdiction's portal with its effective settings.
type Source struct {
	ID string `yaml:"id" json:"id"`
	// Type is the adapter that speaks to the portal: http (the default,
	// configuration-driven) or one registered by Go code.
	Type         string `yaml:"type" json:"type"`
	Jurisdiction string `yaml:"jurisdiction" json:"jurisdiction"`
	BaseURL      string `yaml:"base_url" json:"base_url"`
	// BreakerKey groups sources whose failures are correlated; it defaults
	// to ID.
	BreakerKey string            `yaml:"breaker_key" json:"breaker_key"`
	Headers    map[string]string `yaml:"headers" json:"headers"`
	// Operations holds only the operations the source supports.
	Operations map[aggregator.Operation]Operation `yaml:"operations" json:"operations"`
	Response   Response                           `yaml:"response" json:"response"`
	// Pagination, when set, makes a lookup follow the answer's pages.
	Pagination *Pagination `yaml:"pagination,omitempty" json:"pagination,omitempty"`
	// Auth authenticates the calls (OAuth2 client credentials or a
	// session page).
	Auth Auth `yaml:"auth,omitempty" json:"auth"`
	// TLS configures a private CA, a client certificate, a server name.
	TLS TLS `yaml:"tls,omitempty" json:"tls"`

	Timeout  Duration `yaml:"timeout" json:"timeout"`
	TimeZone string   `yaml:"time_zone" json:"time_zone"`
	// Location is TimeZone, loaded.
	Location         *time.Location `yaml:"-" json:"-"`
	Currency         string         `yaml:"currency" json:"currency"`
	MaxResponseBytes int64          `yaml:"max_response_bytes" json:"max_response_bytes"`
	VoucherTypes     []string       `yaml:"voucher_types" json:"voucher_types"`
	VoucherMaxBytes  int64          `yaml:"voucher_max_bytes" json:"voucher_max_bytes"`
	Retry            Retry          `yaml:"retry" json:"retry"`
	Breaker          Breaker        `yaml:"breaker" json:"breaker"`
	RateLimit        RateLimit      `yaml:"rate_limit" json:"rate_limit"`
	Remember         Remember       `yaml:"remember" json:"remember"`
	Drift            Drift          `yaml:"drift" json:"drift"`

	// FromEnv lists the values that ${NAME} references put in the source's
	// configuration, its defaults included: each variable's value, and
	// each whole value one was part of ("Bearer ${T}" gives both T's value
	// and "Bearer " followed by it). Any of them may be a secret: they are
	// never marshalled, and `sources check` masks them wherever they
	// appear. Parse sets it.
	FromEnv []string `yaml:"-" json:"-"`
}

// Operation is how a source answers one operation.
type Operation struct {
	// Method is GET (the default) or POST.
	Method string `yaml:"method" json:"method"`
	// Path is appended to the source's base_url. The request (path,
	// query, headers or body) holds the placeholder of its operation:
	// {domain} for by_domain, {id} (and {id_kind}) for by_id,
	// {infraction_id} for voucher.
	Path string `yaml:"path" json:"path"`
	// Query holds parameters appended to the URL.
	Query map[string]string `yaml:"query,omitempty" json:"query,omitempty"`
	// Headers are sent with this operation, over the source's headers.
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Body is what a POST sends: form, json or text.
	Body Body `yaml:"body,omitempty" json:"body"`
	// Accepts lists the kinds of person id a by_id operation takes
	// (default both); it is empty for the other operations.
	Accepts []aggregator.IDKind `yaml:"accepts,omitempty" json:"accepts,omitempty"`
}

// Response says how a portal's answers are read (SPEC 8 Responses, SPEC
// 12): package mapping defines and checks it.
type Response = mapping.Response

// Load reads and parses the configuration file at path; see Parse.
func Load(path string, getenv func(string) string) (*Config, error) {
	data, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path, getenv)
}

// readConfig reads the configuration file at path.
func readConfig(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return data, nil
}

// DefaultBaseURI is the problems.base_uri used when none is configured:
// http://<listen>/problems/, with localhost standing for an empty or
// unspecified (0.0.0.0, ::) listen host.
func DefaultBaseURI(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen + "/problems/"
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/problems/"
}

// SetListen overrides server.listen (the -listen flag). When
// problems.base_uri is the default derived from the previous address, it
// follows the new one.
func (c *Config) SetListen(addr string) error {
	if msg := checkListen(addr); msg != "" {
		return Errors{{Key: "server.listen", Msg: msg}}
	}
	if c.Problems.BaseURI == DefaultBaseURI(c.Server.Listen) {
		c.Problems.BaseURI = DefaultBaseURI(addr)
	}
	c.Server.Listen = addr
	return nil
}
