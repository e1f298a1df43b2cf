package health

import "time"

// A run whose workflow task keeps failing (its workflow code panics, or no
// longer replays its history) executes nothing: no poll, no activity, no
// answer to a query. By the ages alone it would read not_running, yet it
// exists and its failure says why it is stuck, so it is judged stalled with
// CauseWorkflowTaskFailing for as long as the failure is known. Only whoever
// reads Temporal learns of it (the worker's watch of its task queue, the
// CLI's status), never an activity, so it travels in no heartbeat.

// StallError is the error behind a stall: the workflow task's failure while
// it keeps failing, else the last failed attempt's error.
func (f Facts) StallError() string {
	if f.TaskFailure != "" {
		return f.TaskFailure
	}
	return f.FailError
}

// TaskFailing records that run k's workflow task keeps failing with msg. The
// run is stalled (workflow_task_failing) until TaskRecovered, however long
// nothing else reports on it.
func (t *Tracker) TaskFailing(k Key, msg string) {
	if msg == "" {
		msg = "the workflow task keeps failing"
	}
	t.update(k, func(r *run, _ time.Time) { r.facts.TaskFailure = msg })
}

// TaskRecovered records that run k's workflow task no longer fails; only
// that cause clears, whatever else the run reported stays.
func (t *Tracker) TaskRecovered(k Key) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.runs[k]; r != nil {
		r.facts.TaskFailure = ""
	}
}
