package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/term"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/workflows"
)

func brokerID(stream string) string { return "broker/" + stream }

func (c *cli) syncCmd() *cobra.Command {
	sync := &cobra.Command{Use: "sync", Short: "Replicate into a target"}
	fb := &cobra.Command{Use: "from-backup", Short: "Replay a backup chain into a target, exactly once (the broker)"}
	fb.AddCommand(c.brokerRunCmd(), c.brokerStopCmd(), c.brokerStatusCmd(), c.brokerPauseCmd(), c.brokerResumeCmd(), c.brokerTuneCmd(), c.brokerCutoverCmd())
	sync.AddCommand(fb)
	return sync
}

func validStreamID(s string) error {
	if s == "" {
		return usageError("--stream-id is required: it names the stream's position in the target so a restart resumes it")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return usageError("--stream-id %q: use letters, digits, '-', '_' and '.'", s)
		}
	}
	return nil
}

func (c *cli) brokerRunCmd() *cobra.Command {
	var store storeFlags
	var tgt targetFlags
	var backupTarget, stream, atChainID, until, untilPosition string
	var concurrency int
	var poll, maxWait, applyDelay time.Duration
	var reset, yes bool
	var hf healthFlags
	var sf subsetFlags
	var of objectFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Tail the chain and apply every new incremental to the target",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.ref("--backup-target", backupTarget)
			if err != nil {
				return err
			}
			ref, name, err := tgt.ref()
			if err != nil {
				return err
			}
			if err := validStreamID(stream); err != nil {
				return err
			}
			if err := workflows.CheckApplyConcurrency(concurrency, tgt.maxLanes(), tgt.driver); err != nil {
				return usageError("%v", err)
			}
			if err := workflows.CheckPollInterval(poll); err != nil {
				return usageError("%v", err)
			}
			switch {
			case maxWait < time.Second || maxWait > 20*time.Minute:
				return usageError("--max-wait %s: give 1s to 20m", maxWait)
			case reset && atChainID != "":
				return usageError("--reset-target-data and --at-chain-id exclude each other: one rebuilds the target, the other asserts what it holds")
			case yes && !reset:
				return usageError("--yes confirms --reset-target-data; it means nothing alone")
			case applyDelay < 0 || applyDelay > maxApplyDelay:
				return usageError("--apply-delay %s: give 0 (none) to %s", applyDelay, maxApplyDelay)
			}
			if err := checkPointFlags("", until, untilPosition); err != nil {
				return err
			}
			subset, err := sf.value()
			if err != nil {
				return err
			}
			objects, err := of.value()
			if err != nil {
				return err
			}
			if reset && !yes {
				if err := c.confirmReset(name); err != nil {
					return err
				}
			}
			th, err := hf.thresholds(poll)
			if err != nil {
				return err
			}
			in := workflows.BrokerInput{
				BrokerParams: activities.BrokerParams{Store: st, Target: ref, Stream: stream, Health: th, Subset: subset, Objects: objects},
				Concurrency:  concurrency, PollInterval: dur.Duration(poll), MaxLanes: tgt.maxLanes(), MaxWait: dur.Duration(maxWait), Reset: reset, AtChainID: atChainID,
				Point: activities.BrokerPoint{Until: until, UntilPosition: untilPosition, ApplyDelay: dur.Duration(applyDelay)},
			}
			var res workflows.BrokerResult
			return c.start(cmd.Context(), launch{
				id:       brokerID(stream),
				workflow: workflows.BrokerWorkflow,
				input:    in,
				attrs: temporal.NewSearchAttributes(
					workflows.SearchAttrChain.ValueSet(st.URL),
					workflows.SearchAttrStream.ValueSet(stream),
					workflows.SearchAttrRole.ValueSet("broker")),
				result:   &res,
				progress: brokerProgress,
				onSuccess: func() {
					fmt.Fprintf(c.stdout, "broker %s %s: last applied %s, %d incrementals, %d changes applied\n",
						stream, res.Status.Phase, res.Status.LastApplied, res.Status.Incrementals, res.Status.ChangesApplied)
					if res.Status.Objects != nil {
						fmt.Fprintf(c.stdout, "schema objects (%s):\n", res.Status.ObjectsAt)
						printObjects(c.stdout, res.Status.Objects)
					}
					if res.Status.Reached {
						fmt.Fprint(c.stdout, describeReached(res.Status))
					}
				},
			})
		},
	}
	store.bind(cmd)
	store.bindKeys(cmd, keysOpen|keysVerify, readByWorker)
	tgt.bind(cmd)
	cmd.Flags().StringVar(&backupTarget, "backup-target", "", "backup store URL of the chain: "+blobstore.Forms())
	cmd.Flags().StringVar(&stream, "stream-id", "", "names this stream's position in the target (required)")
	cmd.Flags().IntVar(&concurrency, "apply-concurrency", 1, "lanes applying in parallel, hashed by table and key")
	cmd.Flags().DurationVar(&poll, "poll-interval", 10*time.Second, "how often the chain's catalog is read for new links")
	cmd.Flags().DurationVar(&maxWait, "max-wait", workflows.DefaultBrokerMaxWait, "longest one wait for new links lasts before the broker starts the next (each costs a few history events)")
	hf.bind(cmd)
	cmd.Flags().BoolVar(&reset, "reset-target-data", false, "drop the target's tables, restore the chain through its tail, then tail it")
	cmd.Flags().BoolVar(&yes, "yes", false, "with --reset-target-data: do not ask for confirmation")
	cmd.Flags().StringVar(&atChainID, "at-chain-id", "", "assert the target already holds the chain through this link, and tail from there")
	cmd.Flags().StringVar(&until, "until", "", "apply every transaction that committed at or before this RFC 3339 time (inclusive), then end with exit 0 keeping the position; waits until the chain holds a transaction after it")
	cmd.Flags().StringVar(&untilPosition, "until-position", "", "like --until, at a source position (inclusive): a PostgreSQL commit LSN, or a GTID set or binlog file:offset, as backup inspect prints them; also reached when a link ends exactly there")
	sf.bind(cmd)
	of.bind(cmd)
	cmd.Flags().DurationVar(&applyDelay, "apply-delay", 0, "keep the target at least this far behind the source's commit times (a delayed replica; e.g. 1h); transactions wait in the broker until they are old enough")
	cmd.Flags().BoolVar(&c.detach, "detach", false, "return once the workflow has started")
	return cmd
}

// maxApplyDelay bounds --apply-delay: a week of chain the store must keep.
const maxApplyDelay = 7 * 24 * time.Hour

// describeReached says where a broker that reached its --until stopped.
func describeReached(st workflows.BrokerStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "reached %s", st.Until)
	if st.Inside != "" {
		fmt.Fprintf(&b, "; the position is inside incremental %s", st.Inside)
	}
	b.WriteString("\n")
	if st.LastTransaction != nil {
		fmt.Fprintf(&b, "last transaction applied: committed %s at %s (incremental %s)\n", st.LastTransaction.CommitTime.Format(time.RFC3339Nano), st.LastTransaction.Position, st.LastTransaction.Link)
	}
	if st.NextTransaction != nil {
		fmt.Fprintf(&b, "first transaction left out: committed %s at %s (incremental %s)\n", st.NextTransaction.CommitTime.Format(time.RFC3339Nano), st.NextTransaction.Position, st.NextTransaction.Link)
	}
	b.WriteString("run again without --until to continue from here, exactly once\n")
	return b.String()
}

// confirmReset asks the operator to type "reset"; without a terminal there
// is nobody to ask, so --yes is required.
func (c *cli) confirmReset(target string) error {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return errcode.New(errcode.ResetNotConfirmed, "--reset-target-data would drop the chain's tables in %s, and no terminal is attached to confirm it", target)
	}
	fmt.Fprintf(c.stderr, "--reset-target-data drops the chain's tables in %s and restores them from the chain.\nType reset to go on: ", target)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) != "reset" {
		return errcode.New(errcode.ResetNotConfirmed, "the reset of %s was not confirmed", target)
	}
	return nil
}

func brokerProgress(ctx context.Context, cl client.Client, id, runID string) string {
	var st workflows.BrokerStatus
	if !queryStatus(ctx, cl, id, runID, &st) {
		return ""
	}
	line := fmt.Sprintf("%s: last applied %s, %d behind (%.0fs), %d changes applied", st.Phase, short(st.LastApplied), st.LinksBehind, st.SecondsBehind, st.ChangesApplied)
	if st.LastError != "" {
		line += "; last error: " + st.LastError
	}
	return line
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func (c *cli) brokerStopCmd() *cobra.Command {
	var store storeFlags
	var backupTarget, stream, reason string
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Ask a broker (or every broker of the chain) to stop between incrementals; works from any host that reaches the store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.ref("--backup-target", backupTarget)
			if err != nil {
				return err
			}
			if stream != "" {
				if err := validStreamID(stream); err != nil {
					return err
				}
			}
			who, id := "every broker of the chain", ""
			if stream != "" {
				who, id = "broker "+stream, brokerID(stream)
			}
			if err := c.requestStop(cmd.Context(), st, chain.RoleBroker, stream, reason, id); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "stop marker written to %s; %s stops at its next tick\n", st.URL, who)
			return nil
		},
	}
	store.bind(cmd)
	cmd.Flags().StringVar(&backupTarget, "backup-target", "", "backup store URL of the chain")
	cmd.Flags().StringVar(&stream, "stream-id", "", "the stream to stop (default: every broker of the chain)")
	cmd.Flags().StringVar(&reason, "reason", "", "free text recorded in the stop marker")
	return cmd
}

func (c *cli) brokerStatusCmd() *cobra.Command {
	var stream string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a broker's position, how far behind it is, what it applied and its health",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validStreamID(stream); err != nil {
				return err
			}
			var st workflows.BrokerStatus
			view, err := c.queryRunning(cmd.Context(), brokerID(stream), &st)
			if err != nil {
				return err
			}
			return c.printRun(view, st, st.Facts(), st.Thresholds, asJSON)
		},
	}
	cmd.Flags().StringVar(&stream, "stream-id", "", "the stream (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}
