package app

import (
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/sources"
)

// SourceSpec is the specification the http adapter builds a configured
// source from: `aggregator sources check` calls the portal with the very
// adapter a replica would, outside the breakers and limiter.
func SourceSpec(sc config.Source) sources.Spec { return sourceSpec(sc) }
