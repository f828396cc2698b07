package chaos

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/h1"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/server"
)

// replica is one aggregator replica served on loopback.
type replica struct {
	app       *app.App
	srv       *http.Server
	url       string
	transport *h1.Transport
	serving   chan struct{}
}

// configText is the configuration of every replica but its store and
// sources: small breaker settings, so that breakers trip and recover many
// times within a run.
func configText(o Options) string {
	return fmt.Sprintf(`server: {admin_token: %q}
problems: {base_uri: %q}
query: {deadline: %s, max_deadline: %s}
defaults:
  timeout: %s
  max_response_bytes: 262144
  retry: {max_retries: 1, initial_backoff: 50ms, max_backoff: 200ms}
  breaker: {window: %s, min_calls: %d, failure_ratio: 0.5, open_for: %s}
  rate_limit: {max_wait: 200ms, max_pause: 30s}
`, adminToken, problemBaseURI, o.QueryTimeout, maxDeadline, sourceTimeout, breakerWindow, breakerMin, openFor)
}

// sourcesYAML is the sources: section for the portals, with the timeout
// of each whose profile has its own.
func sourcesYAML(js []portalsim.Jurisdiction, urls map[string]string, cast []profile) (string, error) {
	text := portalsim.AggregatorYAML(js, urls)
	for i, j := range js {
		if d := cast[i].timeout; d > 0 {
			entry := fmt.Sprintf("  - id: %q\n", j.ID)
			if !strings.Contains(text, entry) {
				return "", fmt.Errorf("chaos: no %q in portalsim.AggregatorYAML's sources", entry)
			}
			text = strings.Replace(text, entry, entry+fmt.Sprintf("    timeout: %s\n", d), 1)
		}
	}
	return text, nil
}

// startReplica builds replica i as production does, with a transport that
// tags its portal calls and a logger whose every line is scanned.
func (r *run) startReplica(cfg *config.Config, i int) (*replica, error) {
	where := fmt.Sprintf("log of replica %d", i+1)
	logger := slog.New(&logTap{
		replica:      i,
		next:         slog.NewJSONHandler(r.pii.writer(where), &slog.HandlerOptions{Level: slog.LevelDebug}),
		onTransition: r.onTransition,
		onDegraded:   r.episodes.degrade,
		onWarn: func(msg string) {
			r.tally.mu.Lock()
			r.tally.warnings[msg]++
			r.tally.mu.Unlock()
		},
	})
	tr := app.NewTransport()
	a, err := app.New(cfg, app.Options{Logger: logger, Transport: &tap{next: tr, replica: i, log: r.calls}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	srv := server.HTTPServer(ln.Addr().String(), r.handlerTimes.wrap(a.Server), time.Duration(cfg.Server.ReadTimeout), maxDeadline)
	srv.ErrorLog = log.New(r.pii.writer(fmt.Sprintf("server log of replica %d", i+1)), "", 0)
	rp := &replica{app: a, srv: srv, url: "http://" + ln.Addr().String(), transport: tr, serving: make(chan struct{})}
	go func() {
		defer close(rp.serving)
		_ = srv.Serve(ln)
	}()
	return rp, nil
}

func (rp *replica) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := rp.srv.Shutdown(ctx)
	if err != nil {
		_ = rp.srv.Close()
	}
	<-rp.serving
	err = errors.Join(err, rp.app.Close())
	rp.transport.CloseIdleConnections()
	return err
}

// redisPrefix checks that Redis answers and returns a key prefix of the
// run's own, and the function that deletes its keys.
func redisPrefix(ctx context.Context, url string) (string, func() error, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return "", nil, fmt.Errorf("chaos: redis URL: %w", err)
	}
	c := redis.NewClient(o)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return "", nil, fmt.Errorf("chaos: no Redis at %s: %w", url, err)
	}
	var b [6]byte
	_, _ = crand.Read(b[:])
	prefix := "chaos-" + hex.EncodeToString(b[:]) + ":"
	drop := func() error {
		defer c.Close()
		ctx := context.Background()
		var keys []string
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
				return err
			}
			keys = keys[n:]
		}
		return nil
	}
	return prefix, drop, nil
}
