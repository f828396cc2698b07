package app

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/sources"
)

// An Adapter builds the portal adapter of one configured source, for the
// sources whose `type` it is registered under (Options.Adapters). The
// fan-out wraps whatever it returns in the source's breakers, rate limit,
// retries and metrics, so an adapter only speaks the portal's dialect and
// classifies each failure as a *sources.Error.
type Adapter func(cfg config.Source, env AdapterEnv) (fanout.Source, error)

// AdapterEnv is what the replica shares with the adapters it builds.
type AdapterEnv struct {
	// Client makes HTTP calls over the replica's pooled transport.
	Client *http.Client
	// Now is the replica's clock.
	Now    func() time.Time
	Logger *slog.Logger
}

// httpAdapter is the configuration-driven adapter of type http (SPEC 8).
func httpAdapter(cfg config.Source, env AdapterEnv) (fanout.Source, error) {
	return sources.New(sourceSpec(cfg), env.Client, env.Now)
}

// adapters are the types known to a replica: http, and those of opts.
func adapters(opts Options) map[string]Adapter {
	known := map[string]Adapter{config.HTTPType: httpAdapter}
	maps.Copy(known, opts.Adapters)
	return known
}

// CheckSources reports what config.Parse cannot see: sources whose type no
// adapter is registered under (extra: the types Go code adds), and http
// sources that their adapter refuses. `validate` runs it; New does too.
func CheckSources(cfg *config.Config, extra map[string]Adapter) error {
	known := adapters(Options{Adapters: extra})
	var errs config.Errors
	for i, s := range cfg.Sources {
		key := fmt.Sprintf("sources[%d]", i)
		if _, ok := known[s.Type]; !ok {
			errs = append(errs, config.Error{Key: key + ".type",
				Msg: fmt.Sprintf("unknown type %q (known: %s)", s.Type, strings.Join(slices.Sorted(maps.Keys(known)), ", "))})
			continue
		}
		if s.Type == config.HTTPType {
			if _, err := sources.New(sourceSpec(s), nil, nil); err != nil {
				errs = append(errs, config.Error{Key: key, Msg: err.Error()})
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}
