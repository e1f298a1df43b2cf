// Package temporalcfg holds the one definition of how the sluice binaries
// find Temporal: flags, their environment fallbacks, and the dial.
package temporalcfg

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/sluicehq/sluice/internal/errcode"
)

// Defaults used when neither a flag nor the environment sets a value.
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
	DefaultTaskQueue = "sluice"
)

// Config says where the Temporal frontend is and which task queue sluice uses.
type Config struct {
	Address   string
	Namespace string
	TaskQueue string
	// MetricsHandler, when set, receives the SDK's own metrics. It is not a
	// flag: the worker sets it to its telemetry's handler.
	MetricsHandler client.MetricsHandler `json:"-"`
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Bind registers --temporal-address, --namespace and --task-queue on fs,
// defaulting to TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and SLUICE_TASK_QUEUE.
func (c *Config) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.Address, "temporal-address", envOr("TEMPORAL_ADDRESS", DefaultAddress), "Temporal frontend host:port (env TEMPORAL_ADDRESS)")
	fs.StringVar(&c.Namespace, "namespace", envOr("TEMPORAL_NAMESPACE", DefaultNamespace), "Temporal namespace (env TEMPORAL_NAMESPACE)")
	fs.StringVar(&c.TaskQueue, "task-queue", envOr("SLUICE_TASK_QUEUE", DefaultTaskQueue), "Temporal task queue the sluice worker polls (env SLUICE_TASK_QUEUE)")
}

// Dial connects to Temporal and checks that the frontend answers.
func (c Config) Dial(ctx context.Context, logger *slog.Logger) (client.Client, error) {
	opts := client.Options{HostPort: c.Address, Namespace: c.Namespace, MetricsHandler: c.MetricsHandler}
	if logger != nil {
		opts.Logger = tlog.NewStructuredLogger(logger)
	}
	cl, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, errcode.Wrap(errcode.TemporalUnreachable, err, "dial Temporal at %s", c.Address)
	}
	if _, err := cl.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		cl.Close()
		return nil, errcode.Wrap(errcode.TemporalUnreachable, err, "Temporal at %s is not healthy", c.Address)
	}
	return cl, nil
}

// String describes the configuration for logs.
func (c Config) String() string {
	return fmt.Sprintf("%s namespace=%s task-queue=%s", c.Address, c.Namespace, c.TaskQueue)
}
