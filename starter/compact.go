package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/compact"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/workflows"
)

func (c *cli) compactCmd() *cobra.Command {
	var store storeFlags
	var target string
	var dryRun, smart, local, asJSON bool
	var keep time.Duration
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Merge the small change chunks of a chain's capped segments into fewer, larger ones",
		Long: `Rewrites how each capped segment stores its incrementals: their change chunks are
merged into chunks of about 16 MiB holding the same records in the same order, and
the segment's layout (named by the catalog) says where each incremental's records
lie. Links keep their IDs and manifests; a broker stopped inside such an
incremental resumes where it was. The open segment is never compacted, and a
segment is compacted once.

--smart-compaction also folds each incremental's changes per key across its
transactions (an insert and its updates become one insert, an insert then a delete
nothing). That drops every apply identity, which the layout records: a broker
inside such an incremental refuses with SLUICE-E-BROKER-INCREMENTAL-REWRITTEN, and a
keyless table in one refuses with SLUICE-E-BROKER-KEYLESS-TABLE. Never smart-compact
a segment a broker still has to replay.

Each segment commits on its own. The chunks it replaced stay readable for
--keep-replaced (readers that loaded the catalog before may still read them); a
later compact or prune deletes them. Runs as a workflow, or in this process with
--local; --dry-run prints what would be merged and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := store.ref("--target", target)
			if err != nil {
				return err
			}
			if keep < 0 {
				return usageError("--keep-replaced %s: give 0 or more", keep)
			}
			p := activities.CompactParams{Store: st, Smart: smart, KeepReplaced: dur.Duration(keep)}
			var res compact.Result
			if dryRun || local {
				ctx := cmd.Context()
				ch, err := openChainHere(ctx, st)
				if err != nil {
					return err
				}
				if res, err = compact.Compact(ctx, ch, compact.Options{DryRun: dryRun, Smart: smart, KeepReplaced: keep}); err != nil {
					return err
				}
			} else {
				err := c.start(cmd.Context(), launch{
					id:       "compact/" + st.URL,
					workflow: workflows.CompactWorkflow,
					input:    p,
					attrs: temporal.NewSearchAttributes(
						workflows.SearchAttrChain.ValueSet(st.URL),
						workflows.SearchAttrRole.ValueSet("compact")),
					result:   &res,
					progress: compactProgress,
				})
				if err != nil || c.detach {
					return err
				}
			}
			if asJSON {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(c.stdout, string(b))
				return nil
			}
			compacted := 0
			for _, s := range res.Segments {
				fmt.Fprintln(c.stdout, s)
				if s.Generation > 0 {
					compacted++
				}
			}
			fmt.Fprintf(c.stdout, "chain %s: %d of %d capped segments compacted; %d replaced objects deleted, %d maintenance journal(s) pending\n",
				st.URL, compacted, len(res.Segments), res.Deleted, res.Pending)
			return nil
		},
	}
	store.bind(cmd)
	// Compaction reads the chain's chunks and writes new ones: given the
	// chain's key, it seals them as the chain is sealed.
	store.bindKeys(cmd, keysOpen|keysVerify|keysSign|keysImplyEncrypt, readEither)
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the chain: "+blobstore.Forms())
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be merged; change nothing")
	cmd.Flags().BoolVar(&smart, "smart-compaction", false, "also fold each incremental's changes per key across its transactions, dropping apply identities")
	cmd.Flags().DurationVar(&keep, "keep-replaced", compact.DefaultKeepReplaced, "keep replaced chunks readable this long for readers of the older catalog; a later compact or prune deletes them (0: at once)")
	cmd.Flags().BoolVar(&local, "local", false, "compact in this process instead of a workflow")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	cmd.Flags().BoolVar(&c.detach, "detach", false, "return once the workflow has started")
	return cmd
}

func compactProgress(ctx context.Context, cl client.Client, id, runID string) string {
	for _, hb := range heartbeatDetails(ctx, cl, id, runID) {
		if _, ok := hb["segments_done"]; ok {
			return fmt.Sprintf("%d segments done, %d compacted", num(hb, "segments_done"), num(hb, "segments_compacted"))
		}
	}
	return ""
}
