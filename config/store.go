package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// Store selects where shared state lives (SPEC 11): one standalone Redis
// (RedisURL), a Redis Cluster (Cluster) or a Sentinel-managed primary
// (Sentinel); at most one of them. Without any, state is this process's.
type Store struct {
	// RedisURL is a standalone Redis: redis://, rediss:// or unix://.
	RedisURL string        `yaml:"redis_url" json:"redis_url"`
	Cluster  StoreCluster  `yaml:"cluster" json:"cluster"`
	Sentinel StoreSentinel `yaml:"sentinel" json:"sentinel"`
	// Username and Password authenticate to a cluster's nodes or to the
	// Sentinel-managed primary (a redis_url carries its own).
	Username string   `yaml:"username" json:"username"`
	Password string   `yaml:"password" json:"-"`
	TLS      StoreTLS `yaml:"tls" json:"tls"`
	// PoolSize is the connections per node; 0 is the client library's
	// default.
	PoolSize int `yaml:"pool_size" json:"pool_size"`
	// Timeout bounds every Redis call.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// FlushInterval is how often a replica sends its outcome counts.
	FlushInterval Duration `yaml:"flush_interval" json:"flush_interval"`
	KeyPrefix     string   `yaml:"key_prefix" json:"key_prefix"`
}

// StoreCluster is a Redis Cluster, found through its seed nodes.
type StoreCluster struct {
	Addrs []string `yaml:"addrs,omitempty" json:"addrs"`
}

// StoreSentinel is a primary that Sentinels manage.
type StoreSentinel struct {
	Master string   `yaml:"master" json:"master"`
	Addrs  []string `yaml:"addrs,omitempty" json:"addrs"`
}

// StoreTLS secures the connections to Redis. A rediss:// URL turns TLS on
// by itself; the files then still apply.
type StoreTLS struct {
	Enabled    bool   `yaml:"enabled" json:"enabled"`
	CAFile     string `yaml:"ca_file" json:"ca_file"`
	CertFile   string `yaml:"cert_file" json:"cert_file"`
	KeyFile    string `yaml:"key_file" json:"key_file"`
	ServerName string `yaml:"server_name" json:"server_name"`
}

// Shared reports whether a Redis is configured: state is shared by the
// replicas that use it.
func (s Store) Shared() bool {
	return s.RedisURL != "" || len(s.Cluster.Addrs) > 0 || s.Sentinel.Master != "" || len(s.Sentinel.Addrs) > 0
}

// TLSOn reports whether connections to Redis use TLS.
func (s Store) TLSOn() bool {
	return s.TLS.Enabled || strings.HasPrefix(strings.ToLower(s.RedisURL), "rediss://")
}

// TLSConfig builds the TLS configuration of the store's connections from
// the tls block, or nil when TLS is off. Validation has checked the files.
func (s Store) TLSConfig() (*tls.Config, error) {
	if !s.TLSOn() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.TLS.ServerName}
	if s.TLS.CAFile != "" {
		pool, err := loadCA(s.TLS.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if s.TLS.CertFile != "" || s.TLS.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(s.TLS.CertFile, s.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("store.tls: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read it: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("holds no PEM certificate")
	}
	return pool, nil
}

// validateStore checks the store block: at most one kind of Redis, each
// well formed, credentials and TLS files only where they apply.
func validateStore(errs *Errors, s Store, readFiles bool) {
	var kinds []string
	if s.RedisURL != "" {
		kinds = append(kinds, "redis_url")
	}
	if len(s.Cluster.Addrs) > 0 {
		kinds = append(kinds, "cluster")
	}
	if s.Sentinel.Master != "" || len(s.Sentinel.Addrs) > 0 {
		kinds = append(kinds, "sentinel")
	}
	if len(kinds) > 1 {
		errs.add("store", "set only one of redis_url, cluster and sentinel, got %s", strings.Join(kinds, " and "))
	}
	if s.RedisURL != "" {
		if msg := checkRedisURL(s.RedisURL); msg != "" {
			errs.add("store.redis_url", "%s (value not shown: it may hold a password)", msg)
		}
	}
	checkAddrs(errs, "store.cluster.addrs", s.Cluster.Addrs)
	checkAddrs(errs, "store.sentinel.addrs", s.Sentinel.Addrs)
	switch {
	case s.Sentinel.Master != "" && len(s.Sentinel.Addrs) == 0:
		errs.add("store.sentinel.addrs", "required with store.sentinel.master: list the Sentinels as host:port")
	case s.Sentinel.Master == "" && len(s.Sentinel.Addrs) > 0:
		errs.add("store.sentinel.master", "required with store.sentinel.addrs: the name the Sentinels know the primary by")
	}

	for _, cred := range []struct{ key, value string }{{"store.username", s.Username}, {"store.password", s.Password}} {
		if cred.value == "" {
			continue
		}
		switch {
		case !s.Shared():
			errs.add(cred.key, "no Redis is configured (set redis_url, cluster or sentinel)")
		case s.RedisURL != "" && len(kinds) == 1:
			errs.add(cred.key, "for cluster and sentinel only: a redis_url carries its own (redis://user:password@host:port)")
		}
	}
	validateStoreTLS(errs, s, readFiles)

	if s.PoolSize < 0 {
		errs.add("store.pool_size", "must not be negative (0 means the client library's default)")
	}
	if s.Timeout <= 0 {
		errs.add("store.timeout", "must be positive")
	}
	if s.FlushInterval <= 0 {
		errs.add("store.flush_interval", "must be positive")
	}
	if strings.ContainsAny(s.KeyPrefix, "{}") {
		errs.add("store.key_prefix", `must not contain "{" or "}": keys carry their own Redis Cluster hash tags`)
	}
}

// validateStoreTLS checks the tls block and, with readFiles, reads its
// files.
func validateStoreTLS(errs *Errors, s Store, readFiles bool) {
	t := s.TLS
	files := t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
	switch {
	case (t.Enabled || files) && !s.Shared():
		errs.add("store.tls", "no Redis is configured (set redis_url, cluster or sentinel)")
		return
	case t.Enabled && strings.HasPrefix(strings.ToLower(s.RedisURL), "redis://"):
		errs.add("store.tls.enabled", "redis_url is redis://: write rediss:// for TLS")
		return
	case !s.TLSOn() && files:
		errs.add("store.tls.enabled", "is false, yet TLS files or a server name are set (set enabled: true, or rediss:// in redis_url)")
		return
	case !s.TLSOn():
		return
	}
	if t.CAFile != "" && readFiles {
		if _, err := loadCA(t.CAFile); err != nil {
			errs.add("store.tls.ca_file", "%v", err)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		errs.add("store.tls.key_file", "required with store.tls.cert_file")
	case t.CertFile == "" && t.KeyFile != "":
		errs.add("store.tls.cert_file", "required with store.tls.key_file")
	case t.CertFile != "" && readFiles:
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			errs.add("store.tls.cert_file", "cannot load the certificate and its key: %v", err)
		}
	}
}

// checkRedisURL describes what is wrong with a redis_url, or is empty. It
// never quotes the URL, which may hold a password.
func checkRedisURL(raw string) string {
	const want = "want redis://[user:password@]host:port[/db], rediss://… or unix:///path"
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return want
	}
	scheme = strings.ToLower(scheme)
	authority := rest
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	if (scheme == "redis" || scheme == "rediss") && strings.Contains(authority, ",") {
		return "holds a list of hosts: redis_url names one Redis; use store.cluster.addrs for a Redis Cluster or store.sentinel for Sentinel"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return want
	}
	if u.Fragment != "" {
		return want + ", without a fragment"
	}
	switch scheme {
	case "unix":
		if u.Path == "" {
			return "want unix:///path/to/redis.sock"
		}
		for k, v := range u.Query() {
			if k != "db" {
				return fmt.Sprintf("query parameter %q is not supported (only db; the store block sets the rest)", k)
			}
			if _, err := strconv.ParseUint(v[0], 10, 16); len(v) != 1 || err != nil {
				return "db must be a number"
			}
		}
		return ""
	case "redis", "rediss":
	default:
		return want
	}
	if u.Hostname() == "" {
		return want + ": the host is missing"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 || n > math.MaxUint16 {
			return want + ": the port is not valid"
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if _, err := strconv.ParseUint(db, 10, 16); err != nil {
			return want + ": the path must be a database number"
		}
	}
	if u.RawQuery != "" || u.ForceQuery {
		return "query parameters are not supported: the store block sets the pool, timeouts and TLS"
	}
	return ""
}

// checkAddrs checks a list of host:port addresses.
func checkAddrs(errs *Errors, key string, addrs []string) {
	seen := map[string]int{}
	for i, a := range addrs {
		p := index(key, i)
		host, port, err := net.SplitHostPort(a)
		n, perr := strconv.ParseUint(port, 10, 16)
		switch {
		case err != nil || perr != nil || host == "" || n == 0:
			errs.add(p, "want host:port such as 10.0.0.1:6379, got %q", a)
			continue
		case strings.ContainsAny(host, ",/ "):
			errs.add(p, "want one host:port per item, got %q", a)
			continue
		}
		if j, dup := seen[a]; dup {
			errs.add(p, "listed twice (also %s)", index(key, j))
		}
		seen[a] = i
	}
}
