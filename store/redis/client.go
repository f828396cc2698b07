package redisstore

import (
	"crypto/tls"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Connection says which Redis the stores use (SPEC 11, store block): a
// standalone one (URL), a Redis Cluster (ClusterAddrs) or a primary that
// Sentinels manage (SentinelMaster and SentinelAddrs); exactly one.
type Connection struct {
	// URL is redis://, rediss:// or unix://; it carries its own
	// credentials.
	URL string
	// ClusterAddrs are seed nodes of a Redis Cluster.
	ClusterAddrs []string
	// SentinelMaster is the name the Sentinels at SentinelAddrs know the
	// primary by.
	SentinelMaster string
	SentinelAddrs  []string
	// Username and Password authenticate to a cluster's nodes or to the
	// Sentinel-managed primary (not to the Sentinels themselves).
	Username, Password string
	// TLS, when set, secures every connection (with a rediss:// URL, it
	// replaces the default configuration, for a private CA or a client
	// certificate).
	TLS *tls.Config
	// PoolSize is the connections per node; 0 is go-redis's default.
	PoolSize int
	// Timeout bounds every call (DefaultTimeout when zero).
	Timeout time.Duration
}

// NewClient builds the go-redis client of c, with the options ClientOptions
// gives a standalone one: calls bounded by their context and by Timeout on
// the socket, no retry inside the client (the local fallback is the
// retry). A Cluster client follows MOVED and ASK redirects, so a failover
// (a replica promoted) is followed without a restart; a Sentinel client
// asks the Sentinels for the new primary.
func NewClient(c Connection) (redis.UniversalClient, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	switch {
	case c.URL != "":
		o, err := ClientOptions(c.URL, timeout)
		if err != nil {
			return nil, err
		}
		if c.TLS != nil {
			t := c.TLS.Clone()
			if t.ServerName == "" && o.TLSConfig != nil {
				t.ServerName = o.TLSConfig.ServerName
			}
			o.TLSConfig = t
		}
		o.PoolSize = c.PoolSize
		return redis.NewClient(o), nil
	case len(c.ClusterAddrs) > 0:
		o := universal(c, timeout)
		o.Addrs = c.ClusterAddrs
		o.IsClusterMode = true
		// A redirect is followed at once; a node that is gone is asked
		// again after the cluster's view is reloaded, within the call's
		// deadline.
		o.MaxRedirects = 3
		return redis.NewUniversalClient(o), nil
	case c.SentinelMaster != "":
		o := universal(c, timeout)
		o.Addrs = c.SentinelAddrs
		o.MasterName = c.SentinelMaster
		return redis.NewUniversalClient(o), nil
	}
	return nil, errors.New("redis store: no redis_url, cluster or sentinel configured")
}

func universal(c Connection, timeout time.Duration) *redis.UniversalOptions {
	return &redis.UniversalOptions{
		Username: c.Username, Password: c.Password, TLSConfig: c.TLS, PoolSize: c.PoolSize,
		ContextTimeoutEnabled: true,
		ReadTimeout:           timeout, WriteTimeout: timeout, PoolTimeout: timeout,
		DialTimeout: max(timeout, time.Second),
		MaxRetries:  -1,
	}
}
