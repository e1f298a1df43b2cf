package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/temporalcfg"
	"github.com/sluicehq/sluice/internal/tracing"
	"github.com/sluicehq/sluice/workflows"
)

// cli holds what every command shares: where output goes, how to reach
// Temporal, and the configuration file (see config.go).
type cli struct {
	stdout, stderr io.Writer
	temporal       temporalcfg.Config
	detach         bool
	configPath     string
	// site is --site: a [sites.NAME] table of the file.
	site         string
	config       *config.File
	settings     []config.Setting
	otlpEndpoint string
	tracing      *tracing.Tracing
}

func newCLI(stdout, stderr io.Writer) *cli {
	return &cli{stdout: stdout, stderr: stderr}
}

// usageError marks an error in the command line itself.
func usageError(format string, args ...any) error {
	return errcode.New(errcode.Usage, format, args...)
}

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Replicate a database through a backup chain",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	c.temporal.Bind(root.PersistentFlags())
	tracing.BindFlag(root.PersistentFlags(), &c.otlpEndpoint)
	c.bindConfig(root)
	setVersion(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError("%v", err)
	})

	backup := &cobra.Command{Use: "backup", Short: "Write backups into a chain"}
	backup.AddCommand(c.backupFullCmd(), c.backupIncrementalCmd(), c.backupStreamCmd(), c.verifyChainCmd(), c.listCmd(), c.inspectCmd(), c.pruneCmd(), c.compactCmd(), c.keygenCmd(), c.rekeyCmd())
	root.AddCommand(backup, c.restoreCmd(), c.syncCmd(), c.verifyCmd(), c.validateConfigCmd(), c.codecServerCmd(), c.versionCmd())
	return root
}

// run executes the command line and returns the process exit status.
func (c *cli) run(ctx context.Context, args []string) int {
	root := c.root()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	c.closeTracing()
	if err == nil {
		return errcode.ExitOK
	}
	c.printEnded(cmd, err)
	if strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "unknown flag") ||
		strings.Contains(err.Error(), "required flag") || strings.HasPrefix(err.Error(), "accepts ") {
		err = usageError("%v", err)
	}
	return c.report(err)
}

// report prints an error with its code and hint and returns its exit status.
func (c *cli) report(err error) int {
	if e, ok := errcode.As(err); ok {
		fmt.Fprintf(c.stderr, "sluice: %s\n", err)
		if h := e.HintText(); h != "" {
			fmt.Fprintf(c.stderr, "hint: %s\n", h)
		}
		return e.Exit()
	}
	var wf *workflowFailure
	if errors.As(err, &wf) {
		fmt.Fprintf(c.stderr, "sluice: %s\n", wf.message)
		if wf.hint != "" {
			fmt.Fprintf(c.stderr, "hint: %s\n", wf.hint)
		}
		return wf.exit
	}
	fmt.Fprintf(c.stderr, "sluice: %v\n", err)
	return errcode.ExitRuntime
}

// storeFlags are the flags every command that opens a backup store takes,
// and the key references of its chain (keys.go) for the commands that bind
// them with bindKeys.
type storeFlags struct {
	endpoint  string
	region    string
	pathStyle bool
	options   []string
	keys      keyFlags
}

// bindKeys registers the key flags use names (keys.go); where says who
// reads the references (readByWorker, readHere, readEither).
func (s *storeFlags) bindKeys(cmd *cobra.Command, use keyUse, where string) {
	s.keys.bind(cmd, use, where)
}

func (s *storeFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.endpoint, "backup-endpoint", "", "S3-compatible endpoint URL for s3:// stores (default: AWS)")
	cmd.Flags().StringVar(&s.region, "backup-region", "", `S3 region for s3:// stores ("auto" and empty use the AWS configuration, else us-east-1)`)
	cmd.Flags().BoolVar(&s.pathStyle, "backup-path-style", false, "use path-style S3 addressing (most S3-compatible servers need it)")
	cmd.Flags().StringArrayVar(&s.options, "backup-option", nil, "a store option KEY=VALUE (repeatable; each store lists its own). Recorded in workflow history: name secrets by reference (an environment variable of the worker), never by value")
}

func (s *storeFlags) ref(flag, url string) (activities.StoreRef, error) {
	url, err := normalizeStoreURL(flag, url)
	if err != nil {
		return activities.StoreRef{}, err
	}
	opts := blobstore.Options{}
	if s.endpoint != "" {
		opts[blobstore.OptEndpoint] = s.endpoint
	}
	if s.region != "" {
		opts[blobstore.OptRegion] = s.region
	}
	if s.pathStyle {
		opts[blobstore.OptPathStyle] = "true"
	}
	for _, kv := range s.options {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return activities.StoreRef{}, usageError("--backup-option %q: write KEY=VALUE", kv)
		}
		if _, dup := opts[k]; dup {
			return activities.StoreRef{}, usageError("--backup-option %s is given twice (or also by --backup-endpoint, --backup-region or --backup-path-style)", k)
		}
		opts[k] = v
	}
	if len(opts) == 0 {
		opts = nil
	}
	trust, err := s.keys.ref()
	if err != nil {
		return activities.StoreRef{}, err
	}
	return activities.StoreRef{URL: url, Options: opts, Trust: trust}, nil
}

// normalizeStoreURL refuses URLs the worker could not open, before anything
// starts, and writes an absolute path as a file:// URL.
func normalizeStoreURL(flag, url string) (string, error) {
	switch {
	case url == "":
		return "", usageError("%s is required (%s)", flag, blobstore.Forms())
	case strings.HasPrefix(url, "s3://"):
		if bucket, _, _ := strings.Cut(strings.TrimPrefix(url, "s3://"), "/"); bucket == "" {
			return "", errcode.New(errcode.ConfigInvalid, "%s %q names no bucket", flag, url)
		}
		return strings.TrimRight(url, "/"), nil
	case strings.HasPrefix(url, "file:///"):
		return strings.TrimRight(url, "/"), nil
	case strings.HasPrefix(url, "/"):
		return "file://" + strings.TrimRight(url, "/"), nil
	}
	// Any other store the worker registers (blobstore.Register) by scheme.
	if scheme, rest, ok := strings.Cut(url, "://"); ok && scheme != "file" && rest != "" && blobstore.Registered(scheme) {
		return strings.TrimRight(url, "/"), nil
	}
	return "", errcode.New(errcode.ConfigInvalid, "%s %q: the accepted forms are %s", flag, url, blobstore.Forms())
}

// runView is what `status` learns of a running workflow: its status query's
// answer (when a worker gave one) and the activities pending in it and in
// its running children (a rotation).
type runView struct {
	answered bool
	queryErr error
	pending  []*workflowpb.PendingActivityInfo
	task     taskState // see taskfailure.go
}

// statusQueryTimeout bounds the status query: with no worker alive, Temporal
// holds a query until one polls, and the run's verdict is wanted now.
const statusQueryTimeout = 5 * time.Second

// queryRunning runs the status query of the latest run of workflow id into v
// and describes the run; a workflow that does not exist or has ended is
// SLUICE-E-NOT-RUNNING. A query no worker answers in time is not an error:
// the view says so, and the pending activities still tell the verdict.
func (c *cli) queryRunning(ctx context.Context, id string, v any) (runView, error) {
	cl, err := c.temporal.Dial(ctx, nil)
	if err != nil {
		return runView{}, err
	}
	defer cl.Close()
	describe := func(id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
		return cl.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: c.temporal.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID}})
	}
	desc, err := describe(id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return runView{}, errcode.New(errcode.NotRunning, "no workflow %s", id)
		}
		return runView{}, errcode.Wrap(errcode.TemporalUnreachable, err, "describe %s", id)
	}
	if status := desc.GetWorkflowExecutionInfo().GetStatus(); status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return runView{}, c.ended(ctx, cl, id, desc.GetWorkflowExecutionInfo())
	}
	view := runView{pending: desc.GetPendingActivities(), task: c.checkTask(ctx, cl, desc)}
	for _, child := range desc.GetPendingChildren() {
		cd, err := describe(child.GetWorkflowId(), child.GetRunId())
		if err != nil {
			continue // the child ended meanwhile; its parent's state says what it did
		}
		view.pending = append(view.pending, cd.GetPendingActivities()...)
	}
	qctx, cancel := context.WithTimeout(ctx, statusQueryTimeout)
	defer cancel()
	res, err := cl.QueryWorkflow(qctx, id, "", workflows.QueryStatus)
	if err != nil {
		if ctx.Err() != nil {
			return runView{}, ctx.Err()
		}
		view.queryErr = err
		return view, nil
	}
	if err := res.Get(v); err != nil {
		return runView{}, fmt.Errorf("decode the status of %s: %w", id, err)
	}
	view.answered = true
	return view, nil
}

// requestStop writes a stop marker into the store — any host that reaches
// the store can stop a run — and, when Temporal is reachable and workflowID
// is given, also signals the workflow so a run waiting for work stops at once.
func (c *cli) requestStop(ctx context.Context, st activities.StoreRef, role, stream, reason, workflowID string) error {
	bs, err := blobstore.Open(ctx, st.URL, st.Options)
	if err != nil {
		return errcode.Wrap(errcode.ConfigInvalid, err, "open backup store %s", st.URL)
	}
	host, _ := os.Hostname()
	if err := chain.Open(bs).PutStopMarker(ctx, role, stream, chain.StopMarker{RequestedAt: time.Now(), By: host, Reason: reason}); err != nil {
		return err
	}
	if workflowID == "" {
		return nil
	}
	cl, err := c.temporal.Dial(ctx, nil)
	if err != nil {
		return nil // the marker alone stops it at its next tick
	}
	defer cl.Close()
	if err := cl.SignalWorkflow(ctx, workflowID, "", workflows.SignalStop, nil); err != nil {
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			fmt.Fprintf(c.stderr, "warning: could not signal %s: %v\n", workflowID, err)
		}
	}
	return nil
}
