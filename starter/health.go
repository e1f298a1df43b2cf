package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sluicehq/sluice/internal/health"
)

// healthFlags are the verdict thresholds a producer or broker run is started
// with; they travel with the run, so the worker's metrics and `status` judge
// it by the same numbers.
type healthFlags struct {
	th health.Thresholds
}

func (h *healthFlags) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.DurationVar(&h.th.PollStall, "health-poll-stall", health.DefaultPollStall,
		"the run is stalled (poll_loop_not_turning) when it has not polled for this long; a delivery younger than this makes it healthy")
	fs.DurationVar(&h.th.DeliveryStall, "health-delivery-stall", health.DefaultDeliveryStall,
		"the run is stalled (chain_not_advancing) when work is pending and nothing was delivered for this long")
	fs.DurationVar(&h.th.NotRunning, "health-not-running", health.DefaultNotRunning,
		"the run is not_running when no worker reported on it for this long")
}

// thresholds checks the flags against how often the run polls.
func (h *healthFlags) thresholds(pollEvery time.Duration) (health.Thresholds, error) {
	if h.th.PollStall <= 0 || h.th.DeliveryStall <= 0 || h.th.NotRunning <= 0 {
		return health.Thresholds{}, usageError("--health-poll-stall, --health-delivery-stall and --health-not-running must be positive durations")
	}
	if err := h.th.Check(pollEvery); err != nil {
		return health.Thresholds{}, usageError("%v", err)
	}
	return h.th, nil
}

// verdictView is the verdict `status` prints beside the workflow's state.
type verdictView struct {
	Verdict     string  `json:"verdict"`
	Cause       string  `json:"cause,omitempty"`
	PollAge     float64 `json:"poll_age_seconds"`
	DeliveryAge float64 `json:"delivery_age_seconds"`
	// ReportAge is the age of the newest sign of a worker running the run.
	ReportAge float64 `json:"last_report_age_seconds"`
	// StallError is the error behind a stall, when one caused it.
	StallError string `json:"stall_error,omitempty"`
	// QueryUnanswered says why the workflow's own state is missing.
	QueryUnanswered string `json:"status_query_unanswered,omitempty"`
}

// judgeRun judges a run at now from what its workflow knows and what its
// pending activities report (their heartbeats carry the worker's facts and
// the run's thresholds; a failed attempt names its cause by its error code).
// When no worker answered the status query, the activities alone decide.
func (c *cli) judgeRun(view runView, wf health.Facts, th health.Thresholds, now time.Time) (verdictView, error) {
	dc, fc, err := c.temporal.Converters()
	if err != nil {
		return verdictView{}, err
	}
	f := wf
	if !view.answered {
		f = health.Facts{}
	}
	for _, pa := range view.pending {
		af, ath, carried := activityFacts(pa, dc, fc)
		if !carried && af.FailCause == "" {
			// An activity that reported no facts (just started, or one of a
			// child's) is a sign of life, not a claim about pending work.
			af.Pending = f.Pending
		}
		f = f.Merge(af)
		if !view.answered && ath != nil {
			th = *ath
		}
	}
	f = view.task.facts(f)
	v, cause := health.Judge(f, now, th)
	out := verdictView{Verdict: v, Cause: cause}
	out.PollAge, out.DeliveryAge = f.Ages(now)
	out.ReportAge = -1
	if !f.ReportedAt.IsZero() {
		out.ReportAge = now.Sub(f.ReportedAt).Seconds()
	}
	if v == health.Stalled {
		out.StallError = f.StallError()
	}
	if !view.answered {
		out.QueryUnanswered = fmt.Sprintf("no worker answered the status query within %s (%v): the verdict comes from the run's pending activities alone", statusQueryTimeout, view.queryErr)
	}
	out.QueryUnanswered = view.task.unanswered(view.answered, out.QueryUnanswered)
	return out, nil
}

// printRun prints a run's status (when its query was answered) with its verdict.
func (c *cli) printRun(view runView, status any, wf health.Facts, th health.Thresholds, asJSON bool) error {
	v, err := c.judgeRun(view, wf, th, time.Now())
	if err != nil {
		return err
	}
	parts := []any{v}
	if view.answered {
		parts = []any{status, v}
	}
	out, err := merged(parts...)
	if err != nil {
		return err
	}
	return c.printStatus(out, asJSON)
}

// activityFacts reads one pending activity: the facts its last heartbeat
// carried (carried says whether it carried any), the heartbeat itself as a
// sign of life, and a failed previous attempt. A timeout is no report: it is
// what a vanished worker leaves.
func activityFacts(pa *workflowpb.PendingActivityInfo, dc converter.DataConverter, fc converter.FailureConverter) (f health.Facts, th *health.Thresholds, carried bool) {
	if hb := pa.GetHeartbeatDetails(); hb != nil && len(hb.GetPayloads()) > 0 {
		var d struct {
			Health     *health.Facts      `json:"health"`
			Thresholds *health.Thresholds `json:"thresholds"`
		}
		if dc.FromPayload(hb.GetPayloads()[0], &d) == nil && d.Health != nil {
			f, th, carried = *d.Health, d.Thresholds, true
		}
	}
	if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
		for _, t := range []interface{ AsTime() time.Time }{pa.GetLastStartedTime(), pa.GetLastHeartbeatTime()} {
			if t != nil && t.AsTime().After(f.ReportedAt) {
				f.ReportedAt = t.AsTime()
			}
		}
	}
	if fl := pa.GetLastFailure(); fl != nil && pa.GetAttempt() > 1 {
		if app := fl.GetApplicationFailureInfo(); app != nil {
			at := pa.GetLastAttemptCompleteTime().AsTime()
			if at.After(f.ReportedAt) {
				// The failed attempt is the newest thing a worker said.
				f.ReportedAt = at
				f.FailCause = health.CauseOf(app.GetType())
				f.FailError = fc.FailureToError(fl).Error()
			}
		}
	}
	return f, th, carried
}
