package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/multas/aggregator/tracing"
)

// tracingShutdownTimeout bounds the flush of the spans still queued at exit.
const tracingShutdownTimeout = 5 * time.Second

// processTracing is tracing as the process runs it: Shutdown flushes the
// spans still queued, within tracingShutdownTimeout.
type processTracing struct {
	*tracing.Tracing
	logger *slog.Logger
}

// setupTracing turns tracing on from the OTEL_* variables (SPEC 10). The
// SDK's own errors (an unreachable collector) become warnings in our log.
func setupTracing(ctx context.Context, getenv func(string) string, logger *slog.Logger) (processTracing, error) {
	t, err := tracing.Setup(ctx, getenv)
	if err != nil {
		return processTracing{}, fmt.Errorf("tracing: %w", err)
	}
	if t.Enabled {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("tracing error", "err", err.Error())
		}))
		logger.Info("tracing on: spans are exported over OTLP")
	}
	return processTracing{Tracing: t, logger: logger}, nil
}

// Shutdown flushes and stops the exporter.
func (p processTracing) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := p.Tracing.Shutdown(ctx); err != nil {
		p.logger.Warn("tracing: spans lost at shutdown", "err", err.Error())
	}
}
