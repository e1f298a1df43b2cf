package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chainview"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/workflows"
)

// producerFlags are what every producer command shares.
type producerFlags struct {
	src         sourceFlags
	store       storeFlags
	target      string
	publication string
	filters     filterFlags
	// followFailover lets a MySQL-family chain go on from a promoted
	// replica, resumed by GTID.
	followFailover bool
}

func (p *producerFlags) bind(cmd *cobra.Command) {
	p.src.bind(cmd)
	p.store.bind(cmd)
	// A producer continues a chain: it reads its catalog and tip, and
	// seals and signs what it commits as the chain's full did.
	p.store.bindKeys(cmd, keysOpen|keysEncrypt|keysSign|keysVerify, readByWorker)
	cmd.Flags().StringVar(&p.target, "target", "", "backup store URL of the chain: "+blobstore.Forms())
	cmd.Flags().StringVar(&p.publication, "publication", "", "publication to read (default: sluice_all_tables, created FOR ALL TABLES when missing)")
	cmd.Flags().BoolVar(&p.followFailover, "follow-failover", false, "MySQL-family source: --source may be a replica promoted after a failover; resume by GTID once its binlog holds the chain's position")
	p.filters.bind(cmd)
}

func (p *producerFlags) params() (activities.ProducerParams, error) {
	ref, err := p.src.ref()
	if err != nil {
		return activities.ProducerParams{}, err
	}
	st, err := p.store.ref("--target", p.target)
	if err != nil {
		return activities.ProducerParams{}, err
	}
	follow := ""
	if p.followFailover {
		follow = "true"
	}
	ref.Options = sourceOptions(ref.Options, map[string]string{activities.OptionPublication: p.publication, activities.OptionFollowFailover: follow})
	spec, err := p.filters.value()
	if err != nil {
		return activities.ProducerParams{}, err
	}
	return activities.ProducerParams{Store: st, Source: ref, Filter: spec}, nil
}

// sourceOptions adds the driver options flags set (empty values are left
// out) to a source reference's options; nil when there are none, so a run
// without them records none.
func sourceOptions(opts, set map[string]string) map[string]string {
	for k, v := range set {
		if v == "" {
			continue
		}
		if opts == nil {
			opts = map[string]string{}
		}
		opts[k] = v
	}
	return opts
}

func producerID(storeURL string) string { return "producer/" + storeURL }

func (c *cli) backupIncrementalCmd() *cobra.Command {
	var pf producerFlags
	cmd := &cobra.Command{
		Use:   "incremental",
		Short: "Commit one incremental: the source's changes from the chain's tip up to now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := pf.params()
			if err != nil {
				return err
			}
			var res activities.WindowResult
			return c.start(cmd.Context(), launch{
				id:       "backup-incremental/" + p.Store.URL,
				workflow: workflows.IncrementalWorkflow,
				input:    workflows.IncrementalInput{ProducerParams: p},
				attrs: temporal.NewSearchAttributes(
					workflows.SearchAttrChain.ValueSet(p.Store.URL),
					workflows.SearchAttrRole.ValueSet("backup-incremental")),
				result: &res,
				onSuccess: func() {
					if !res.Committed {
						fmt.Fprintf(c.stdout, "no new transactions since the chain's tip; nothing committed (slot retains %s)\n", chainview.HumanBytes(res.Slot.RetainedBytes))
						return
					}
					fmt.Fprintf(c.stdout, "incremental %s committed: %d transactions, %d changes, %s → %s, %s stored\n",
						res.LinkID, res.Transactions, res.Changes, res.Start, res.End, chainview.HumanBytes(res.StoredBytes))
				},
			})
		},
	}
	pf.bind(cmd)
	cmd.Flags().BoolVar(&c.detach, "detach", false, "return once the workflow has started")
	return cmd
}

func (c *cli) backupStreamCmd() *cobra.Command {
	stream := &cobra.Command{Use: "stream", Short: "Run, stop or inspect the continuous producer of a chain"}
	stream.AddCommand(c.streamRunCmd(), c.streamStopCmd(), c.streamStatusCmd(), c.streamPauseCmd(), c.streamResumeCmd())
	return stream
}

func (c *cli) streamRunCmd() *cobra.Command {
	var pf producerFlags
	var rollover, idle time.Duration
	var maxChanges, maxBytes int64
	var rotateAt, parallel, retainSegments int
	var rotateOnFilterChange bool
	var hf healthFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Commit an incremental every --rollover-window until stopped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := pf.params()
			if err != nil {
				return err
			}
			switch {
			case rollover < 100*time.Millisecond || rollover > 24*time.Hour:
				return usageError("--rollover-window %s: give 100ms to 24h", rollover)
			case maxChanges < 0 || maxBytes < 0:
				return usageError("--rollover-max-changes and --rollover-max-bytes must not be negative")
			case rotateAt < 0:
				return usageError("--retain-rotate-at-chain-length %d: give 0 (never) or more", rotateAt)
			case retainSegments < 0:
				return usageError("--retain-segments %d: give 0 (never prune) or more", retainSegments)
			case retainSegments > 0 && rotateAt == 0:
				return usageError("--retain-segments prunes after each rotation; give --retain-rotate-at-chain-length too")
			case parallel < 1 || parallel > 64:
				return usageError("--parallel %d: give 1 to 64", parallel)
			case idle < time.Second || idle > time.Hour:
				return usageError("--idle-window %s: give 1s to 1h", idle)
			}
			p.Parallel = parallel
			// A window polls the source about every second and commits
			// within a few more.
			if p.Health, err = hf.thresholds(producerPollEvery); err != nil {
				return err
			}
			in := workflows.ProducerInput{ProducerParams: p, Rollover: dur.Duration(rollover), MaxChanges: maxChanges, MaxBytes: maxBytes, RotateAt: rotateAt, Idle: dur.Duration(idle), RetainSegments: retainSegments,
				RotateOnFilterChange: rotateOnFilterChange}
			var res workflows.ProducerResult
			return c.start(cmd.Context(), launch{
				id:       producerID(p.Store.URL),
				workflow: workflows.ProducerWorkflow,
				input:    in,
				attrs: temporal.NewSearchAttributes(
					workflows.SearchAttrChain.ValueSet(p.Store.URL),
					workflows.SearchAttrRole.ValueSet("producer")),
				result:   &res,
				progress: producerProgress,
				onSuccess: func() {
					fmt.Fprintf(c.stdout, "producer stopped: %d links, %d windows, %d transactions, last link %s\n",
						res.Status.Links, res.Status.Windows, res.Status.Transactions, res.Status.LastLink)
				},
			})
		},
	}
	pf.bind(cmd)
	cmd.Flags().DurationVar(&rollover, "rollover-window", 10*time.Second, "commit an incremental this often (at the first transaction boundary after it)")
	cmd.Flags().Int64Var(&maxChanges, "rollover-max-changes", 1_000_000, "also commit once a window holds this many changes (0: no bound)")
	cmd.Flags().Int64Var(&maxBytes, "rollover-max-bytes", 512<<20, "also commit once a window read this many bytes of log (0: no bound)")
	cmd.Flags().IntVar(&rotateAt, "retain-rotate-at-chain-length", 0, "rotate into a new segment (a new full) after this many incrementals (0: never)")
	cmd.Flags().IntVar(&retainSegments, "retain-segments", 0, "after each rotation, prune the chain to its newest N segments, keeping those a broker has not replayed yet (0: never prune)")
	cmd.Flags().IntVar(&parallel, "parallel", 2, "tables a rotation's full copies at once")
	cmd.Flags().DurationVar(&idle, "idle-window", workflows.DefaultIdleWindow, "end a window that captured nothing after this long, and start the next (each costs a few history events)")
	cmd.Flags().BoolVar(&rotateOnFilterChange, "rotate-on-filter-change", false,
		"when the filters and masks given differ from those of the chain's newest segment, start a new segment (a new full) under them instead of refusing (SLUICE-E-FILTER-CHANGED)")
	cmd.Flags().BoolVar(&c.detach, "detach", false, "return once the workflow has started")
	hf.bind(cmd)
	return cmd
}

// producerPollEvery is how often a producer's window is taken to poll for
// the health thresholds' check.
const producerPollEvery = 2 * time.Second

func producerProgress(ctx context.Context, cl client.Client, id, runID string) string {
	var st workflows.ProducerStatus
	if !queryStatus(ctx, cl, id, runID, &st) {
		return ""
	}
	line := fmt.Sprintf("%s: %d links (%d in segment), %d transactions, %d changes, slot retains %s (%s)",
		st.Phase, st.Links, st.SegmentLength, st.Transactions, st.Changes, chainview.HumanBytes(st.SlotRetained), st.SlotWalStatus)
	if st.LastError != "" {
		line += "; last error: " + st.LastError
	}
	return line
}

func (c *cli) streamStopCmd() *cobra.Command {
	var store storeFlags
	var target, reason string
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Ask the chain's producer to stop after its current window (works from any host that reaches the store)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.ref("--target", target)
			if err != nil {
				return err
			}
			if err := c.requestStop(cmd.Context(), st, chain.RoleProducer, "", reason, producerID(st.URL)); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "stop marker written to %s; the producer ends after its current window\n", st.URL)
			return nil
		},
	}
	store.bind(cmd)
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain")
	cmd.Flags().StringVar(&reason, "reason", "", "free text recorded in the stop marker")
	return cmd
}

func (c *cli) streamStatusCmd() *cobra.Command {
	var target string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running producer's position, counts, slot health and last error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := normalizeStoreURL("--target", target)
			if err != nil {
				return err
			}
			var st workflows.ProducerStatus
			view, err := c.queryRunning(cmd.Context(), producerID(url), &st)
			if err != nil {
				return err
			}
			return c.printRun(view, st, st.Facts(), st.Thresholds, asJSON)
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}
