package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/temporalcfg"
	"github.com/sluicehq/sluice/internal/wftask"
)

// taskWatchEvery is how often the worker looks for runs on its task queue
// whose workflow task keeps failing.
const taskWatchEvery = 15 * time.Second

// watchedTypes are the workflow types whose runs have a health verdict.
var watchedTypes = []string{"BrokerWorkflow", "ProducerWorkflow"}

// watchService is the part of Temporal's WorkflowService the watch calls.
type watchService interface {
	wftask.Service
	ListWorkflowExecutions(ctx context.Context, in *workflowservice.ListWorkflowExecutionsRequest, opts ...grpc.CallOption) (*workflowservice.ListWorkflowExecutionsResponse, error)
}

// taskWatch finds the running producers and brokers of a task queue whose
// workflow task keeps failing (a panic, non-determinism after a deploy) and
// reports them to the tracker, which judges them stalled
// (workflow_task_failing) until their task recovers. It lists the runs
// rather than following those whose activities this worker executed: a run
// stuck since a bad deploy never ran an activity on the fresh worker.
type taskWatch struct {
	svc       watchService
	namespace string
	queue     string
	dc        converter.DataConverter
	tracker   *health.Tracker
	log       *slog.Logger
	// failing holds the runs this watch reported failing.
	failing map[health.Key]bool
	// listErr is the last listing error logged, so a lasting one is logged once.
	listErr string
}

func newTaskWatch(svc watchService, namespace, queue string, dc converter.DataConverter, tracker *health.Tracker, log *slog.Logger) *taskWatch {
	return &taskWatch{svc: svc, namespace: namespace, queue: queue, dc: dc, tracker: tracker, log: log, failing: map[health.Key]bool{}}
}

// run looks every interval until ctx ends, the first time at once.
func (w *taskWatch) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// query is the visibility query for the queue's running producers and brokers.
func (w *taskWatch) query() string {
	types := make([]string, len(watchedTypes))
	for i, t := range watchedTypes {
		types[i] = quote(t)
	}
	return fmt.Sprintf("TaskQueue = %s AND ExecutionStatus = 'Running' AND WorkflowType IN (%s)", quote(w.queue), strings.Join(types, ", "))
}

func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// once lists the running runs and checks each one's workflow task. A run
// reported failing whose task works again gets that cause cleared; one no
// longer listed as running (an operator terminated it) is forgotten. A reset
// run keeps its workflow ID and is judged by its new run.
func (w *taskWatch) once(ctx context.Context) {
	seen := map[health.Key]bool{}
	req := &workflowservice.ListWorkflowExecutionsRequest{Namespace: w.namespace, PageSize: 100, Query: w.query()}
	for {
		resp, err := w.svc.ListWorkflowExecutions(ctx, req)
		if err != nil {
			if ctx.Err() == nil && err.Error() != w.listErr {
				w.log.Warn("cannot list the task queue's runs to check their workflow tasks", "task_queue", w.queue, "err", err)
				w.listErr = err.Error()
			}
			return // nothing cleared or forgotten on a partial view
		}
		for _, ex := range resp.GetExecutions() {
			id, runID := ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()
			k, ok := keyOf(id)
			if !ok {
				continue
			}
			seen[k] = true
			f, err := wftask.Check(ctx, w.svc, w.dc, w.namespace, id, runID)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					w.log.Debug("cannot check a workflow task", "workflow_id", id, "err", err)
				}
			case f != nil:
				w.tracker.TaskFailing(k, f.Message)
				w.failing[k] = true
			case w.failing[k]:
				w.tracker.TaskRecovered(k)
				delete(w.failing, k)
			}
		}
		if len(resp.GetNextPageToken()) == 0 {
			break
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
	if w.listErr != "" {
		w.log.Info("listing the task queue's runs works again", "task_queue", w.queue)
		w.listErr = ""
	}
	for k := range w.failing {
		if !seen[k] {
			w.tracker.Ended(k)
			delete(w.failing, k)
		}
	}
}

// keyOf maps a workflow ID to the health key of its run: broker/<stream>
// and producer/<chain URL> (see the CLI's brokerID and producerID).
func keyOf(workflowID string) (health.Key, bool) {
	for _, role := range []string{"broker", "producer"} {
		if name, ok := strings.CutPrefix(workflowID, role+"/"); ok && name != "" {
			return health.Key{Role: role, Name: name}, true
		}
	}
	return health.Key{}, false
}

// startTaskWatch runs the watch of cfg's task queue in the background until
// ctx ends.
func startTaskWatch(ctx context.Context, cl client.Client, cfg temporalcfg.Config, tracker *health.Tracker, log *slog.Logger) error {
	dc, _, err := cfg.Converters()
	if err != nil {
		return fmt.Errorf("set up the workflow task watch: %w", err)
	}
	go newTaskWatch(cl.WorkflowService(), cfg.Namespace, cfg.TaskQueue, dc, tracker, log).run(ctx, taskWatchEvery)
	return nil
}
