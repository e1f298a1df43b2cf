package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/chainview"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/retention"
)

func (c *cli) pruneCmd() *cobra.Command {
	var store storeFlags
	var target string
	var keepSegments int
	var keepDuration time.Duration
	var dryRun, force, asJSON bool
	catalog := chain.DefaultCatalogRetention
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Drop a chain's oldest segments by a retention policy (reads and writes the store directly; no worker needed)",
		Long: `Drops whole segments from the front of the chain: with --keep-segments N all but
the newest N, with --keep-duration D those a restore of any point of the last D
does not need (a segment goes once the segment after it began more than D ago).
The newest segment is never dropped. The catalog write that drops them commits
first and their manifests and chunks are deleted after it; a prune that dies in
between leaves a journal the next prune finishes.

Brokers report where they stand into the store each tick. A segment a broker
has not replayed yet is not dropped: the prune is refused with
SLUICE-E-PRUNE-BROKER-BEHIND (exit 3) naming the brokers, unless --force, after
which those brokers refuse with SLUICE-E-BROKER-POSITION-PRUNED and need
--reset-target-data. --dry-run prints the plan and changes nothing.

Then the catalog's own history is trimmed: the commits (one small object per
catalog generation) older than --catalog-keep-age and beyond the newest
--catalog-keep-commits, once a checkpoint covers them, and all but the newest
two checkpoints older than --catalog-keep-age.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.ref("--target", target)
			if err != nil {
				return err
			}
			policy := retention.Policy{KeepSegments: keepSegments, KeepDuration: dur.Duration(keepDuration)}
			switch {
			case keepSegments < 0 || keepDuration < 0:
				return usageError("--keep-segments and --keep-duration must be positive")
			case keepSegments > 0 && keepDuration > 0:
				return usageError("give --keep-segments or --keep-duration, not both")
			case keepSegments == 0 && keepDuration == 0:
				return usageError("give --keep-segments N or --keep-duration D")
			}
			if err := catalog.Validate(); err != nil {
				return usageError("--catalog-keep-commits, --catalog-keep-age: %v", err)
			}
			ctx := cmd.Context()
			ch, err := openChainHere(ctx, st)
			if err != nil {
				return err
			}
			res, err := retention.Prune(ctx, ch, retention.Options{Policy: policy, DryRun: dryRun, Force: force, Refuse: true, Catalog: catalog})
			if err != nil && !errcode.Is(err, errcode.PruneBrokerBehind) {
				return err
			}
			if asJSON {
				b, jerr := json.MarshalIndent(res, "", "  ")
				if jerr != nil {
					return jerr
				}
				fmt.Fprintln(c.stdout, string(b))
			} else {
				c.printPrune(st.URL, res, dryRun)
			}
			return err
		},
	}
	store.bind(cmd)
	// Prune needs no key to read (a sealed manifest lists its chunks in
	// the clear); it signs the catalog generation it commits.
	store.bindKeys(cmd, keysVerify|keysSign, readHere)
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain: "+blobstore.Forms())
	cmd.Flags().IntVar(&keepSegments, "keep-segments", 0, "keep the newest N segments")
	cmd.Flags().DurationVar(&keepDuration, "keep-duration", 0, "keep every segment needed to restore any point of the last D (e.g. 168h)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be dropped and deleted; change nothing")
	cmd.Flags().BoolVar(&force, "force", false, "drop segments brokers have not replayed yet (they must then be rebuilt with --reset-target-data)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan and the outcome as JSON")
	cmd.Flags().IntVar(&catalog.Commits, "catalog-keep-commits", catalog.Commits, "keep at least the newest N catalog commits")
	cmd.Flags().DurationVar(&catalog.Age, "catalog-keep-age", catalog.Age, "keep catalog commits and checkpoints younger than D (at least 1h)")
	return cmd
}

// printPrune renders a prune's plan and outcome for an operator.
func (c *cli) printPrune(url string, res retention.Result, dryRun bool) {
	for _, b := range res.Brokers {
		where := fmt.Sprintf("needs segment %d on", b.Needs)
		switch {
		case b.OtherChain:
			where = "reports a position in another chain (" + short(b.ChainID) + "); ignored"
		case b.Lost:
			where = "is past recovery by replay: its link is no longer in the chain (rebuild it with --reset-target-data)"
		case b.Needs >= res.Keep+len(res.Drop):
			where = "needs only the newest segment"
		}
		fmt.Fprintf(c.stdout, "broker %s: last applied %s, reported %s ago; %s\n", b.Stream, short(b.LastApplied),
			time.Since(b.UpdatedAt).Round(time.Second), where)
	}
	verb := "dropped"
	if dryRun {
		verb = "would drop"
	}
	for _, s := range res.Drop {
		fmt.Fprintf(c.stdout, "%s segment %d: full %s, %d links, %s to %s\n", verb, s.Index, short(s.Full), s.Links,
			s.From.Format(time.RFC3339), s.Until.Format(time.RFC3339))
	}
	for _, b := range res.Held {
		fmt.Fprintf(c.stdout, "held back by broker %s: it still has to replay segment %d\n", b.Stream, b.Needs)
	}
	switch {
	case len(res.Drop) == 0 && len(res.Held) == 0:
		fmt.Fprintf(c.stdout, "chain %s (generation %d): nothing to prune (%s); %d segments kept\n", url, res.Generation, res.Policy, res.Keep)
	case dryRun:
		fmt.Fprintf(c.stdout, "dry run: %d segments would go (%d objects, %s), %d stay; nothing was changed\n",
			len(res.Drop), res.Objects, chainview.HumanBytes(res.Bytes), res.Keep)
	case len(res.Drop) > 0:
		fmt.Fprintf(c.stdout, "chain %s: generation %d drops %d segments; %d objects deleted (%s); %d segments kept\n",
			url, res.Committed, len(res.Drop), res.Deleted, chainview.HumanBytes(res.Bytes), res.Keep)
	}
	if n := res.CatalogCommits + res.CatalogCheckpoints; n > 0 {
		fmt.Fprintf(c.stdout, "catalog history: %d commits and %d checkpoints deleted\n", res.CatalogCommits, res.CatalogCheckpoints)
	}
	if res.Pending > 0 {
		fmt.Fprintf(c.stdout, "%d maintenance journal(s) left for a later run (a commit in progress, or objects still readable)\n", res.Pending)
	}
}
