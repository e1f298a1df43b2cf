package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/payloadcodec"
)

// workflowFailure is how a workflow ended, ready to print.
type workflowFailure struct {
	code    string
	message string
	hint    string
	exit    int
}

func (w *workflowFailure) Error() string { return w.message }

// launch describes one workflow the CLI starts.
type launch struct {
	id        string
	workflow  any
	input     any
	attrs     temporal.SearchAttributes
	result    any
	progress  func(ctx context.Context, cl client.Client, id, runID string) string
	onSuccess func()
}

// start starts a workflow and, unless --detach, follows it to its end with a
// progress line, cancelling it on Ctrl+C.
func (c *cli) start(ctx context.Context, l launch) error {
	cl, err := c.temporal.Dial(ctx, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	codec, err := c.temporal.PayloadCodec()
	if err != nil {
		return err
	}
	opts := client.StartWorkflowOptions{
		ID:        l.id,
		TaskQueue: c.temporal.TaskQueue,
		// A second run of the same work is refused, never silently joined.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    l.attrs,
	}
	run, err := cl.ExecuteWorkflow(ctx, opts, l.workflow, l.input)
	if err != nil && isSearchAttributeError(err) {
		fmt.Fprintf(c.stderr, "warning: Temporal has no SluiceChain/SluiceRole search attributes (register them, see docs/operations.md); starting without them\n")
		opts.TypedSearchAttributes = temporal.SearchAttributes{}
		run, err = cl.ExecuteWorkflow(ctx, opts, l.workflow, l.input)
	}
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return errcode.Wrap(errcode.AlreadyRunning, err, "workflow %s is already running", l.id)
		}
		return errcode.Wrap(errcode.TemporalUnreachable, err, "start workflow %s", l.id)
	}
	fmt.Fprintf(c.stderr, "started workflow %s (run %s) on task queue %s\n", run.GetID(), run.GetRunID(), c.temporal.TaskQueue)
	if c.detach {
		fmt.Fprintf(c.stdout, "%s %s\n", run.GetID(), run.GetRunID())
		return nil
	}

	done := make(chan error, 1)
	go func() { done <- run.Get(context.Background(), l.result) }()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	last := ""
	cancelled := false
	for {
		select {
		case err := <-done:
			if err != nil {
				return c.failure(err)
			}
			if l.onSuccess != nil {
				l.onSuccess()
			}
			return nil
		case <-tick.C:
			if l.progress == nil {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			line := l.progress(context.WithValue(pctx, codecKey{}, codec), cl, run.GetID(), run.GetRunID())
			cancel()
			if line != "" && line != last {
				fmt.Fprintf(c.stderr, "  %s\n", line)
				last = line
			}
		case <-ctx.Done():
			if !cancelled {
				cancelled = true
				fmt.Fprintf(c.stderr, "interrupted: cancelling workflow %s\n", run.GetID())
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := cl.CancelWorkflow(cctx, run.GetID(), run.GetRunID()); err != nil {
					fmt.Fprintf(c.stderr, "warning: cancel failed: %v\n", err)
				}
				cancel()
			}
			ctx = context.Background()
		}
	}
}

// failure converts a workflow's failure into its code, hint and exit status.
func (c *cli) failure(err error) error {
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		spec, _ := errcode.Lookup(errcode.Canceled)
		return &workflowFailure{code: string(spec.Code), message: string(spec.Code) + ": the workflow was cancelled", hint: spec.Hint, exit: spec.Exit}
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		code := errcode.Code(app.Type())
		spec, known := errcode.Lookup(code)
		if known {
			hint := spec.Hint
			var detail string
			if app.HasDetails() && app.Details(&detail) == nil && detail != "" {
				hint = detail
			}
			msg := app.Message()
			if !strings.HasPrefix(msg, string(code)) {
				msg = string(code) + ": " + msg
			}
			return &workflowFailure{code: string(code), message: msg, hint: hint, exit: spec.Exit}
		}
		return &workflowFailure{message: app.Message(), exit: errcode.ExitRuntime}
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return &workflowFailure{message: "the workflow timed out: " + err.Error(), hint: "Check that a sluice-worker polls task queue " + c.temporal.TaskQueue + ".", exit: errcode.ExitRuntime}
	}
	return &workflowFailure{message: err.Error(), exit: errcode.ExitRuntime}
}

func isSearchAttributeError(err error) bool {
	var inv *serviceerror.InvalidArgument
	return errors.As(err, &inv) && strings.Contains(strings.ToLower(inv.Error()), "search attribute")
}

// heartbeatDetails returns the last heartbeat of each pending activity, decoded as JSON objects.
func heartbeatDetails(ctx context.Context, cl client.Client, id, runID string) []map[string]any {
	desc, err := cl.DescribeWorkflow(ctx, id, runID)
	if err != nil || desc.RawResponse == nil {
		return nil
	}
	var out []map[string]any
	codec, _ := ctx.Value(codecKey{}).(*payloadcodec.Codec)
	for _, pa := range desc.RawResponse.GetPendingActivities() {
		payloads := pa.GetHeartbeatDetails().GetPayloads()
		if codec != nil {
			if payloads, err = codec.Decode(payloads); err != nil {
				return nil
			}
		}
		for _, p := range payloads {
			m := map[string]any{}
			if json.Unmarshal(p.GetData(), &m) == nil {
				out = append(out, m)
			}
		}
	}
	return out
}

// queryStatus runs the workflow's status query into v.
func queryStatus(ctx context.Context, cl client.Client, id, runID string, v any) bool {
	res, err := cl.QueryWorkflow(ctx, id, runID, "status")
	if err != nil {
		return false
	}
	return res.Get(v) == nil
}

func num(m map[string]any, k string) int64 {
	f, _ := m[k].(float64)
	return int64(f)
}

// codecKey carries the payload codec to the progress readers, which decode
// heartbeat details themselves (they bypass the client's data converter).
type codecKey struct{}
