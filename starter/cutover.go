package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/workflows"
)

// defaultSequenceMargin is --sequence-margin's default: how far past the
// source's counters a cutover moves the target's.
const defaultSequenceMargin = 1000

// cutoverPoll is how often the cutover looks at the producer and broker.
const cutoverPoll = 500 * time.Millisecond

func cutoverID(stream string) string { return "cutover/" + stream }

func (c *cli) brokerCutoverCmd() *cobra.Command {
	var store storeFlags
	var tgt targetFlags
	var backupTarget, stream string
	var margin int64
	var wait time.Duration
	var force bool
	cmd := &cobra.Command{
		Use:   "cutover",
		Short: "Switch an application to the stream's target: wait for its broker to apply the chain's tip, stop it, and move every sequence a margin past the source's",
		Long: `The last step before an application writes to the target. In order:

1. The chain's producer must have ended (stop the application's writes, then
   ` + "`sluice backup stream stop`" + `: it commits the window it holds and ends), so the
   chain's tip is the source's last write. A producer whose stop is pending is
   waited for; one still running is refused (SLUICE-E-CUTOVER-PRODUCER-RUNNING)
   unless --force says the source is quiesced by other means.
2. The chain's tip is read, and the stream's running broker is waited for
   until it has applied it, then stopped (a stop marker, as ` + "`stop`" + ` writes) and
   waited for until it ends. A broker that is not running is not waited for:
   the target's position decides.
3. A broker worker checks that the target's position holds that tip
   (SLUICE-E-CUTOVER-BEHIND otherwise) and raises every sequence of the
   target to the source's value as of the position plus --sequence-margin,
   never lowering one; the values are those the chain's incrementals record,
   and the full's for a sequence that never moved since. Each sequence set
   is printed (from → to), and each one skipped or kept with the reason.

Steps 1 and 2 share --wait; past it the command exits 1
(SLUICE-E-CUTOVER-TIMEOUT) with sequences untouched. It is safe to run again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.ref("--backup-target", backupTarget)
			if err != nil {
				return err
			}
			ref, _, err := tgt.ref()
			if err != nil {
				return err
			}
			if err := validStreamID(stream); err != nil {
				return err
			}
			switch {
			case margin < 0:
				return usageError("--sequence-margin %d: give 0 or more", margin)
			case wait < time.Second:
				return usageError("--wait %s: give 1s or more", wait)
			}
			ctx := cmd.Context()
			deadline := time.Now().Add(wait)
			cl, err := c.temporal.Dial(ctx, nil)
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := c.cutoverProducer(ctx, cl, st, force, deadline, wait); err != nil {
				return err
			}
			ch, err := openChainHere(ctx, st)
			if err != nil {
				return err
			}
			cat, err := ch.LoadCatalog(ctx)
			if err != nil {
				return err
			}
			if err := chain.ValidateCatalog(cat); err != nil {
				return err
			}
			tip := cat.Tip().ID
			fmt.Fprintf(c.stderr, "chain %s: tip %s (catalog generation %d)\n", st.URL, tip, cat.Generation)
			if err := c.cutoverBroker(ctx, cl, st, stream, cat, deadline, wait); err != nil {
				return err
			}
			p := activities.CutoverParams{Store: st, Target: ref, Stream: stream, Tip: tip, Margin: margin}
			var res activities.CutoverResult
			return c.start(ctx, launch{
				id:       cutoverID(stream),
				workflow: workflows.CutoverWorkflow,
				input:    p,
				attrs: temporal.NewSearchAttributes(
					workflows.SearchAttrChain.ValueSet(st.URL),
					workflows.SearchAttrStream.ValueSet(stream),
					workflows.SearchAttrRole.ValueSet("broker")),
				result:    &res,
				onSuccess: func() { c.printCutover(stream, margin, res) },
			})
		},
	}
	store.bind(cmd)
	store.bindKeys(cmd, keysOpen|keysVerify, "read by this process and by the worker")
	tgt.bind(cmd)
	cmd.Flags().StringVar(&backupTarget, "backup-target", "", "backup store URL of the stream's chain (required: its tip is what the broker must reach): "+blobstore.Forms())
	cmd.Flags().StringVar(&stream, "stream-id", "", "the stream to cut over (required)")
	cmd.Flags().Int64Var(&margin, "sequence-margin", defaultSequenceMargin, "move every sequence this far past the source's value (0: exactly to it); covers what the source handed out that the chain did not record")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "longest the cutover waits for the producer to end and the broker to reach the chain's tip and end")
	cmd.Flags().BoolVar(&force, "force", false, "cut over although the chain's producer still runs: you assert the source takes no more writes (what it commits later does not reach the target)")
	return cmd
}

// describeRun returns the status of workflow id's latest run, and false
// when Temporal knows no such workflow.
func describeRun(ctx context.Context, cl client.Client, id string) (enumspb.WorkflowExecutionStatus, time.Time, bool, error) {
	desc, err := cl.DescribeWorkflow(ctx, id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return 0, time.Time{}, false, nil
		}
		return 0, time.Time{}, false, errcode.Wrap(errcode.TemporalUnreachable, err, "describe %s", id)
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	return info.GetStatus(), info.GetStartTime().AsTime(), true, nil
}

// cutoverProducer refuses a cutover while the chain's producer runs, unless
// force; one whose stop is pending is waited for until deadline.
func (c *cli) cutoverProducer(ctx context.Context, cl client.Client, st activities.StoreRef, force bool, deadline time.Time, wait time.Duration) error {
	id := producerID(st.URL)
	said := false
	for {
		status, started, found, err := describeRun(ctx, cl, id)
		if err != nil {
			return err
		}
		if !found || status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			if said {
				fmt.Fprintf(c.stderr, "producer %s ended\n", id)
			}
			return nil
		}
		if force {
			fmt.Fprintf(c.stderr, "warning: producer %s is running; --force: cutting over at the chain's tip as it is now, what the source commits later does not reach the target\n", id)
			return nil
		}
		stopping, err := c.producerStopping(ctx, cl, st, id, started)
		if err != nil {
			return err
		}
		if !stopping {
			return errcode.New(errcode.CutoverProducerRunning, "producer %s is running and no stop of it is pending", id)
		}
		if !said {
			fmt.Fprintf(c.stderr, "producer %s is stopping: waiting for it to commit its last window and end\n", id)
			said = true
		}
		if time.Now().After(deadline) {
			return errcode.New(errcode.CutoverTimeout, "producer %s did not end within --wait %s after its stop", id, wait)
		}
		if err := sleepCtx(ctx, cutoverPoll); err != nil {
			return err
		}
	}
}

// producerStopping reports whether a stop of the running producer id is
// pending: its status says so, or the store holds a stop marker written
// since its current run started.
func (c *cli) producerStopping(ctx context.Context, cl client.Client, st activities.StoreRef, id string, started time.Time) (bool, error) {
	qctx, cancel := context.WithTimeout(ctx, statusQueryTimeout)
	var ps workflows.ProducerStatus
	answered := queryStatus(qctx, cl, id, "", &ps)
	cancel()
	if answered && ps.StopRequested {
		return true, nil
	}
	bs, err := blobstore.Open(ctx, st.URL, st.Options)
	if err != nil {
		return false, errcode.Wrap(errcode.ConfigInvalid, err, "open backup store %s", st.URL)
	}
	m, found, err := chain.Open(bs).GetStopMarker(ctx, chain.RoleProducer, "")
	if err != nil {
		return false, err
	}
	return found && !m.RequestedAt.Before(started), nil
}

// cutoverBroker waits until the stream's running broker has applied the
// chain's tip (the last link of cat), stops it and waits until it ended.
// A broker that is not running is left to the target's position.
func (c *cli) cutoverBroker(ctx context.Context, cl client.Client, st activities.StoreRef, stream string, cat *chain.Catalog, deadline time.Time, wait time.Duration) error {
	id := brokerID(stream)
	links := cat.Links()
	tip := links[len(links)-1].ID
	// before holds the links short of the tip: a position on none of them
	// and in this chain holds the tip (a --force cutover's broker may have
	// gone past it).
	before := map[string]bool{}
	for _, l := range links[:len(links)-1] {
		before[l.ID] = true
	}
	last := ""
	for {
		status, _, found, err := describeRun(ctx, cl, id)
		if err != nil {
			return err
		}
		if !found || status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			fmt.Fprintf(c.stderr, "broker %s is not running: the target's position must hold the tip\n", id)
			return nil
		}
		qctx, cancel := context.WithTimeout(ctx, statusQueryTimeout)
		var bs workflows.BrokerStatus
		answered := queryStatus(qctx, cl, id, "", &bs)
		cancel()
		if answered {
			if bs.ChainID != "" && bs.ChainID != cat.ChainID {
				return errcode.New(errcode.BrokerChainMismatch, "broker %s applies chain %s; %s holds chain %s", id, bs.ChainID, st.URL, cat.ChainID)
			}
			if bs.LastApplied != "" && !before[bs.LastApplied] && bs.Applying == "" {
				fmt.Fprintf(c.stderr, "broker %s applied the tip (%s)\n", id, bs.LastApplied)
				break
			}
			line := fmt.Sprintf("waiting for broker %s to apply %s: %s, last applied %s, %d behind", id, short(tip), bs.Phase, short(bs.LastApplied), bs.LinksBehind)
			if bs.LastError != "" {
				line += "; last error: " + bs.LastError
			}
			if line != last {
				fmt.Fprintf(c.stderr, "  %s\n", line)
				last = line
			}
		}
		if time.Now().After(deadline) {
			return errcode.New(errcode.CutoverTimeout, "broker %s did not apply the chain's tip %s within --wait %s (last applied %s)", id, tip, wait, bs.LastApplied)
		}
		if err := sleepCtx(ctx, cutoverPoll); err != nil {
			return err
		}
	}
	if err := c.requestStop(ctx, st, chain.RoleBroker, stream, "cutover", id); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "stop requested: waiting for broker %s to end\n", id)
	for {
		status, _, _, err := describeRun(ctx, cl, id)
		if err != nil {
			return err
		}
		if status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			fmt.Fprintf(c.stderr, "broker %s ended (%s)\n", id, endedOfStatus(status))
			return nil
		}
		if time.Now().After(deadline) {
			return errcode.New(errcode.CutoverTimeout, "broker %s applied the tip but did not end within --wait %s after its stop", id, wait)
		}
		if err := sleepCtx(ctx, cutoverPoll); err != nil {
			return err
		}
	}
}

// printCutover prints what the cutover set, skipped and kept.
func (c *cli) printCutover(stream string, margin int64, res activities.CutoverResult) {
	at := res.LastApplied
	if res.Inside != "" {
		at += " (inside " + res.Inside + ")"
	}
	fmt.Fprintf(c.stdout, "cutover of stream %s: the target holds chain %s through %s; %d sequence counters, margin %d\n",
		stream, res.ChainID, at, res.Counters, margin)
	for _, s := range res.Sequences.Raised {
		fmt.Fprintf(c.stdout, "set      %s\n", s)
	}
	for _, s := range res.Sequences.Kept {
		fmt.Fprintf(c.stdout, "kept     %s\n", s)
	}
	for _, s := range res.Sequences.Skipped {
		fmt.Fprintf(c.stdout, "skipped  %s\n", s)
	}
	fmt.Fprintf(c.stdout, "%d set, %d already past, %d skipped; the broker is stopped: the application may write to the target\n",
		len(res.Sequences.Raised), len(res.Sequences.Kept), len(res.Sequences.Skipped))
}

// sleepCtx sleeps d unless ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
