package main

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/tracing"
)

// setupTracing turns on span export when --otlp-endpoint (its environment
// variables, or the file's worker.otlp_endpoint) names a collector: the
// client then opens a StartWorkflow span for each workflow it starts, and
// the worker's spans of that run are its children.
func (c *cli) setupTracing(ctx context.Context) error {
	if c.tracing.Enabled() {
		return nil
	}
	trc, err := tracing.Setup(ctx, tracing.Options{Endpoint: c.otlpEndpoint, ServiceName: "sluice",
		OnError: func(err error) { fmt.Fprintf(c.stderr, "warning: trace export failed: %v\n", err) }})
	if err != nil {
		return err
	}
	c.tracing = trc
	c.temporal.Interceptors = trc.ClientInterceptors()
	return nil
}

// closeTracing sends the spans still buffered, waiting a few seconds at most
// for the collector.
func (c *cli) closeTracing() {
	_ = c.tracing.Close(5 * time.Second)
}
