// Command sluice-worker hosts sluice's workflows and activities on a Temporal
// task queue and serves /livez, /readyz and /metrics on its admin endpoint.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/worker"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/config"
	_ "github.com/sluicehq/sluice/internal/engines" // registers the target engines
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/temporalcfg"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/workflows"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 1 && args[0] == "version" {
		return printVersion(os.Stdout)
	}
	var cfg temporalcfg.Config
	fs := pflag.NewFlagSet("sluice-worker", pflag.ContinueOnError)
	cfg.Bind(fs)
	var admin adminConfig
	admin.bind(fs)
	var otlpEndpoint string
	tracing.BindFlag(fs, &otlpEndpoint)
	rolesFlag := fs.String("roles", envOr("SLUICE_WORKER_ROLES", config.DefaultRoles),
		"comma-separated parts of sluice this worker hosts: producer (backup full, stream, incremental), broker (sync from-backup and its cold start), restore, maintenance (verify, compact) (env SLUICE_WORKER_ROLES)")
	showVersion := fs.Bool("version", false, "print the build's module version, VCS commit and Go version, and exit (also: sluice-worker version)")
	siteName := fs.String(config.SiteFlag, os.Getenv(config.SiteEnv), "a [sites.NAME] table of the configuration file: the site's namespace, task queue and roles, unless given as flags (env "+config.SiteEnv+")")
	configPath := fs.String("config", os.Getenv("SLUICE_CONFIG"), "TOML configuration file ([temporal] and [worker] tables); flags and the environment override it (env SLUICE_CONFIG)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "sluice-worker: %s: %v\n", errcode.Usage, err)
		return errcode.ExitUsage
	}
	if *showVersion {
		return printVersion(os.Stdout)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "sluice-worker: %s: unexpected argument %q (the only command is \"version\")\n", errcode.Usage, fs.Arg(0))
		return errcode.ExitUsage
	}
	var file *config.File
	if *configPath != "" {
		f, err := config.Load(*configPath)
		if err != nil {
			return refuse(err)
		}
		if _, err := config.Apply(fs, f, os.Getenv); err != nil {
			return refuse(err)
		}
		file = f
	}
	if *siteName != "" {
		site, err := file.Site(*siteName)
		if err != nil {
			return refuse(err)
		}
		if err := site.UseSite(fs); err != nil {
			return refuse(err)
		}
	}
	roles, err := workflows.ParseRoles(*rolesFlag)
	if err != nil {
		return refuse(err)
	}
	// A role's credentials are checked now, not at its first activity.
	if err := checkRoleCredentials(file, roles); err != nil {
		return refuse(err)
	}
	adminSet, err := admin.resolve()
	if err != nil {
		return refuse(err)
	}
	// TLS files, the API key and the payload key are checked before anything
	// starts, so a half-configured transport is a usage error, not a dial failure.
	if err := cfg.Check(); err != nil {
		return refuse(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tel, err := telemetry.New(telemetry.Options{Logger: logger})
	if err != nil {
		logger.Error("cannot set up metrics", "err", err)
		return errcode.ExitRuntime
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	cfg.MetricsHandler = tel.TemporalMetricsHandler()
	// Spans of workflows and activities, when --otlp-endpoint names a collector.
	trc, err := tracing.Setup(ctx, tracing.Options{Endpoint: otlpEndpoint, ServiceName: "sluice-worker",
		OnError: func(err error) { logger.Warn("trace export failed", "err", err) }})
	if err != nil {
		return refuse(err)
	}
	defer func() { _ = trc.Close(5 * time.Second) }()
	if trc.Enabled() {
		logger.Info("exporting trace spans", "endpoint", trc.Endpoint())
	}
	cfg.Interceptors = trc.ClientInterceptors()

	cl, err := cfg.Dial(ctx, logger)
	if err != nil {
		logger.Error("cannot reach Temporal", "err", err)
		return errcode.ExitStatus(err)
	}
	defer cl.Close()

	// WorkflowPanicPolicy stays the SDK's default (BlockWorkflow): a run
	// whose workflow code panics or does not replay waits, retrying its
	// workflow task, until a fixed worker takes it (taskwatch.go reports it).
	w := worker.New(cl, cfg.TaskQueue, worker.Options{
		// Send heartbeats (and the progress they carry) within a couple of
		// seconds, so `sluice` and the UI show live progress.
		DefaultHeartbeatThrottleInterval: time.Second,
		MaxHeartbeatThrottleInterval:     2 * time.Second,
		Interceptors:                     testHookInterceptors(os.Getenv(panicWorkflowsEnv)),
	})
	// Each run this worker hosts gets a verdict; transitions are logged
	// once, and /status and /metrics show them.
	tracker := health.NewTracker(logger, nil)
	if err := tel.TrackRuns(tracker); err != nil {
		logger.Error("cannot set up run metrics", "err", err)
		return errcode.ExitRuntime
	}
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				tracker.Statuses()
			}
		}
	}()
	if err := startTaskWatch(ctx, cl, cfg, tracker, logger); err != nil {
		return refuse(err)
	}
	workflows.RegisterRoles(w, &activities.Activities{Health: tracker, Observe: tel}, roles)

	ready := &readiness{client: cl}
	if adminSet.addr != "" {
		srv, _, err := serveAdmin(adminSet, ready, tel, logger)
		if err != nil {
			return refuse(err)
		}
		defer srv.Close()
	}
	if err := w.Start(); err != nil {
		logger.Error("worker failed to start", "err", err)
		return errcode.ExitRuntime
	}
	ready.started.Store(true)
	logger.Info("sluice worker polling", "temporal", cfg.String(), "roles", workflows.RoleList(roles))
	<-ctx.Done()
	ready.started.Store(false)
	w.Stop()
	logger.Info("sluice worker stopped")
	return 0
}

// refuse reports a coded error and its hint on stderr and returns its exit status.
func refuse(err error) int {
	fmt.Fprintf(os.Stderr, "sluice-worker: %v\n", err)
	if e, ok := errcode.As(err); ok {
		if h := e.HintText(); h != "" {
			fmt.Fprintf(os.Stderr, "hint: %s\n", h)
		}
	}
	return errcode.ExitStatus(err)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// checkRoleCredentials resolves, for each role, the password references of
// the configuration's connections that role reads: sources for producer and
// maintenance, targets for broker, restore and maintenance. A worker whose
// roles need a secret it cannot read refuses to start, naming it.
func checkRoleCredentials(f *config.File, roles []workflows.Role) error {
	for _, r := range roles {
		var kinds []config.Kind
		switch r {
		case workflows.RoleProducer:
			kinds = []config.Kind{config.Sources}
		case workflows.RoleBroker, workflows.RoleRestore:
			kinds = []config.Kind{config.Targets}
		case workflows.RoleMaintenance:
			kinds = []config.Kind{config.Sources, config.Targets}
		}
		for _, k := range kinds {
			if err := f.UnresolvedPasswords(k, "role "+string(r)); err != nil {
				return err
			}
		}
	}
	return nil
}
