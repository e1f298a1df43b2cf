package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"

	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/workflows"
)

// The pause, resume and tune commands signal a running producer or broker
// through Temporal (unlike stop, they leave no marker in the store: a run
// that no worker executes cannot be paused).

// signalRun sends sig with v to the running workflow id.
func signalRun[T any](ctx context.Context, c *cli, id string, sig workflows.Signal[T], v T) error {
	cl, err := c.temporal.Dial(ctx, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := sig.Send(ctx, cl, id, v); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return errcode.New(errcode.NotRunning, "no running workflow %s", id)
		}
		return errcode.Wrap(errcode.TemporalUnreachable, err, "signal %s to %s", sig.Name, id)
	}
	return nil
}

func (c *cli) streamPauseCmd() *cobra.Command {
	var target, reason string
	cmd := &cobra.Command{
		Use:   "pause",
		Short: "Pause the chain's producer after its current window; the source keeps its log meanwhile",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := normalizeStoreURL("--target", target)
			if err != nil {
				return err
			}
			if err := signalRun(cmd.Context(), c, producerID(url), workflows.SignalPause, workflows.PauseRequest{Reason: reason}); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "pause sent to %s: it commits its current window, then captures nothing until `sluice backup stream resume --target %s`\n", producerID(url), url)
			fmt.Fprintln(c.stdout, "while it is paused nothing reads the source's log: PostgreSQL retains WAL for the chain's slot (watch slot_retained_bytes), a MySQL-family source may purge the binlog the chain needs")
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain")
	cmd.Flags().StringVar(&reason, "reason", "", "free text the status shows beside the pause")
	return cmd
}

func (c *cli) streamResumeCmd() *cobra.Command {
	var target, reason string
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Resume a paused producer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := normalizeStoreURL("--target", target)
			if err != nil {
				return err
			}
			if err := signalRun(cmd.Context(), c, producerID(url), workflows.SignalResume, workflows.ResumeRequest{Reason: reason}); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "resume sent to %s\n", producerID(url))
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain")
	cmd.Flags().StringVar(&reason, "reason", "", "free text the run logs with the resume")
	return cmd
}

func (c *cli) brokerPauseCmd() *cobra.Command {
	var stream, reason string
	cmd := &cobra.Command{
		Use:   "pause",
		Short: "Pause a broker after the incremental it applies; its position stays where it is",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validStreamID(stream); err != nil {
				return err
			}
			if err := signalRun(cmd.Context(), c, brokerID(stream), workflows.SignalPause, workflows.PauseRequest{Reason: reason}); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "pause sent to %s: it finishes the incremental it applies, then applies nothing until `sluice sync from-backup resume --stream-id %s`\n", brokerID(stream), stream)
			return nil
		},
	}
	cmd.Flags().StringVar(&stream, "stream-id", "", "the stream (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "free text the status shows beside the pause")
	return cmd
}

func (c *cli) brokerResumeCmd() *cobra.Command {
	var stream, reason string
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Resume a paused broker; it catches up from its position, exactly once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validStreamID(stream); err != nil {
				return err
			}
			if err := signalRun(cmd.Context(), c, brokerID(stream), workflows.SignalResume, workflows.ResumeRequest{Reason: reason}); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "resume sent to %s\n", brokerID(stream))
			return nil
		},
	}
	cmd.Flags().StringVar(&stream, "stream-id", "", "the stream (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "free text the run logs with the resume")
	return cmd
}

func (c *cli) brokerTuneCmd() *cobra.Command {
	var stream string
	var concurrency int
	var poll time.Duration
	cmd := &cobra.Command{
		Use:   "tune",
		Short: "Change a running broker's --apply-concurrency and --poll-interval from its next incremental and poll",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validStreamID(stream); err != nil {
				return err
			}
			fs := cmd.Flags()
			req := workflows.TuneRequest{}
			if fs.Changed("apply-concurrency") {
				if err := workflows.CheckApplyConcurrency(concurrency, 0, ""); err != nil {
					return usageError("%v", err)
				}
				req.ApplyConcurrency = concurrency
			}
			if fs.Changed("poll-interval") {
				if err := workflows.CheckPollInterval(poll); err != nil {
					return usageError("%v", err)
				}
				req.PollInterval = dur.Duration(poll)
			}
			if req == (workflows.TuneRequest{}) {
				return usageError("give --apply-concurrency, --poll-interval or both")
			}
			// The run checks the rest (its target's lane limit, its
			// health thresholds) and reports a refusal in its status.
			if err := signalRun(cmd.Context(), c, brokerID(stream), workflows.SignalTune, req); err != nil {
				return err
			}
			return c.reportTune(cmd.Context(), stream, req)
		},
	}
	cmd.Flags().StringVar(&stream, "stream-id", "", "the stream (required)")
	cmd.Flags().IntVar(&concurrency, "apply-concurrency", 0, "lanes applying in parallel from the next incremental (1 to 64; not given: unchanged)")
	cmd.Flags().DurationVar(&poll, "poll-interval", 0, "how often the chain's catalog is read, from the next wait (100ms to 1h; not given: unchanged)")
	return cmd
}

// reportTune says what the broker made of the tune, once its status shows
// it; a run that does not answer soon is left to `status`.
func (c *cli) reportTune(ctx context.Context, stream string, req workflows.TuneRequest) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var st workflows.BrokerStatus
		view, err := c.queryRunning(ctx, brokerID(stream), &st)
		if err != nil {
			return err
		}
		if view.answered && st.LastTune != nil && st.LastTune.Requested == req {
			if st.LastTune.Refused != "" {
				return errcode.New(errcode.Usage, "broker %s ignored the tune: %s", stream, st.LastTune.Refused)
			}
			fmt.Fprintf(c.stdout, "broker %s tuned: apply concurrency %d from its next incremental, poll interval %s from its next wait\n",
				stream, st.ApplyConcurrency, st.PollInterval)
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(c.stdout, "tune sent to %s; `sluice sync from-backup status --stream-id %s` shows the values in force (apply_concurrency, poll_interval, last_tune)\n", brokerID(stream), stream)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
