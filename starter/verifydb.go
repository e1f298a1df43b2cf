package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/verify"
	"github.com/sluicehq/sluice/workflows"
)

func (c *cli) verifyCmd() *cobra.Command {
	var src sourceFlags
	var tf targetFlags
	var store storeFlags
	var depth, waitBroker, backupTarget string
	var include, exclude []string
	var waitTimeout time.Duration
	var maxRows int
	var asJSON, local bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Compare a target with its source, table by table: row counts, or a checksum of every row",
		Long: `Reads every table of the source (as a full backup would record them) and the
target's table of the same name, each side in one consistent snapshot, and compares
them: --depth count compares row counts; --depth checksum also compares an
order-independent digest of every row's values, normalised by their neutral kind
(and by the target's documented storage rules), so the target may be of another
engine; --depth rows compares as checksum does and, for a table that differs, names
the differing rows (their keys and both sides' values, up to --max-rows per table),
found by narrowing digests over segments of the key space instead of holding a
table in memory; a keyless table is compared as a multiset of rows. Each table that
differs is named with how; a column missing on either side is a difference too.

The two snapshots are taken one after the other, the source's first: a source that
is being written moves in between, and a target fed through a chain lags it. For an
exact comparison stop the source's writes, or stop the producer and pass
--wait-broker STREAM --backup-target URL, which waits until that broker applied the
chain's newest incremental before comparing.

Runs as a workflow (progress in the Temporal UI; the worker reads both databases),
or with --local in this process (passwords are then read here).
Exit 0: equal; 1: differences (SLUICE-E-VERIFY-MISMATCH, or
SLUICE-E-VERIFY-COLUMNS-DIFFER when a table's columns differ); 2: usage; 3: a refusal.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sref, err := src.ref()
			if err != nil {
				return err
			}
			tref, tname, err := tf.ref()
			if err != nil {
				return err
			}
			// A comparison reads the target: it must never create one.
			tref.Options = maps.Clone(tref.Options)
			if tref.Options == nil {
				tref.Options = map[string]string{}
			}
			tref.Options[target.OptMustExist] = "true"
			d := verify.Depth(depth)
			if !slices.Contains(verify.Depths, d) {
				return usageError("--depth %q: give count, checksum or rows", depth)
			}
			if maxRows < 1 || maxRows > verify.MaxMaxRows {
				return usageError("--max-rows %d: give 1 to %d", maxRows, verify.MaxMaxRows)
			}
			if cmd.Flags().Changed("max-rows") && d != verify.DepthRows {
				return usageError("--max-rows is read at --depth rows only")
			}
			filter := verify.Filter{Include: include, Exclude: exclude}
			if err := filter.Validate(); err != nil {
				return usageError("%v", err)
			}
			var st *activities.StoreRef
			switch {
			case waitBroker != "" && backupTarget == "":
				return usageError("--wait-broker needs --backup-target, the broker's chain")
			case waitBroker == "" && backupTarget != "":
				return usageError("--backup-target is read by --wait-broker; give both or neither")
			case waitBroker == "" && store.keys.given():
				return usageError("the chain's key flags are read with --wait-broker and --backup-target")
			case waitTimeout <= 0:
				return usageError("--wait-timeout %s: give a positive duration", waitTimeout)
			case waitBroker != "":
				ref, err := store.ref("--backup-target", backupTarget)
				if err != nil {
					return err
				}
				st = &ref
			}
			in := workflows.VerifyInput{VerifyParams: activities.VerifyParams{Source: sref, Target: tref, Depth: d, Filter: filter, MaxRows: maxRows},
				WaitBroker: waitBroker, Store: st, WaitTimeout: dur.Duration(waitTimeout)}
			var res workflows.VerifyResult
			if local {
				if res, err = verifyLocally(cmd.Context(), in); err != nil {
					return err
				}
			} else {
				err := c.start(cmd.Context(), launch{
					id:       "verify/" + tname,
					workflow: workflows.VerifyWorkflow,
					input:    in,
					attrs:    temporal.NewSearchAttributes(workflows.SearchAttrRole.ValueSet("verify")),
					result:   &res,
					progress: verifyProgress,
				})
				if err != nil {
					return err
				}
			}
			if err := res.CheckSelected(); err != nil {
				return err
			}
			if asJSON {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(c.stdout, string(b))
			} else {
				c.printVerify(res)
			}
			return res.Mismatch()
		},
	}
	src.bind(cmd)
	tf.bind(cmd)
	store.bind(cmd)
	store.bindKeys(cmd, keysOpen|keysVerify, readEither)
	cmd.Flags().StringVar(&depth, "depth", string(verify.DepthCount), "count (row counts), checksum (also a digest of every row's values) or rows (also names the differing rows)")
	cmd.Flags().IntVar(&maxRows, "max-rows", verify.DefaultMaxRows, fmt.Sprintf("with --depth rows: name at most this many differing rows per table (1 to %d)", verify.MaxMaxRows))
	cmd.Flags().StringArrayVar(&include, "include-table", nil, "compare only tables matching this pattern (repeatable; schema.name, or a bare name in any schema; * and ? match)")
	cmd.Flags().StringArrayVar(&exclude, "exclude-table", nil, "leave out tables matching this pattern (repeatable)")
	cmd.Flags().StringVar(&waitBroker, "wait-broker", "", "first wait until this broker stream applied its chain's newest incremental (needs --backup-target)")
	cmd.Flags().StringVar(&backupTarget, "backup-target", "", "with --wait-broker: the broker's chain: "+blobstore.Forms())
	cmd.Flags().DurationVar(&waitTimeout, "wait-timeout", 10*time.Minute, "with --wait-broker: refuse (SLUICE-E-VERIFY-BROKER-BEHIND) if the broker is not there by then")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	cmd.Flags().BoolVar(&local, "local", false, "compare in this process instead of a workflow (reads the password references here)")
	return cmd
}

// verifyLocally runs a comparison in the CLI's own process.
func verifyLocally(ctx context.Context, in workflows.VerifyInput) (workflows.VerifyResult, error) {
	var res workflows.VerifyResult
	open := func(ref credentials.DSNRef) (target.Target, error) {
		dsn, err := ref.Resolve()
		if err != nil {
			return nil, err
		}
		return target.Open(ctx, ref.Driver, dsn, ref.Options)
	}
	dst, err := open(in.Target)
	if err != nil {
		return res, err
	}
	defer dst.Close(context.Background())
	if in.WaitBroker != "" {
		ch, err := openChainHere(ctx, *in.Store)
		if err != nil {
			return res, err
		}
		at, err := verify.WaitBroker(ctx, ch, dst.State(), in.WaitBroker, in.WaitTimeout.D(), time.Second, nil)
		if err != nil {
			return res, err
		}
		res.Broker = &at
	}
	dsn, err := in.Source.Resolve()
	if err != nil {
		return res, err
	}
	src, err := source.Open(ctx, in.Source.Driver, dsn, in.Source.Options)
	if err != nil {
		return res, err
	}
	defer src.Close()
	res.Outcome, err = verify.Run(ctx, src, dst, verify.Options{Depth: in.Depth, Filter: in.Filter, MaxRows: in.MaxRows})
	return res, err
}

// printVerify renders a comparison for an operator.
func (c *cli) printVerify(res workflows.VerifyResult) {
	if res.Broker != nil {
		fmt.Fprintf(c.stdout, "broker %s applied %s, the chain's tip %s when the wait began\n", res.Broker.Stream, short(res.Broker.LastApplied), short(res.Broker.Tip))
	}
	for _, t := range res.Tables {
		sum := ""
		if t.SourceChecksum != "" && t.Status == verify.StatusEqual {
			sum = ", checksum " + t.SourceChecksum[:16]
		}
		if t.Status == verify.StatusEqual {
			fmt.Fprintf(c.stdout, "equal    %s: %d rows%s\n", t.Name, t.SourceRows, sum)
			continue
		}
		fmt.Fprintf(c.stdout, "DIFFERS  %s: %s\n", t.Name, t.Detail)
		for _, r := range t.Rows {
			fmt.Fprintf(c.stdout, "         %s\n", verify.FormatRow(t, r))
		}
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(c.stdout, "skipped  %s\n", s)
	}
	fmt.Fprintf(c.stdout, "snapshots: source at %s, target at %s; a source written meanwhile moves between them, and a target fed through a chain lags it (stop the writes, or the producer and --wait-broker, for an exact comparison)\n",
		res.SourceAt.UTC().Format(time.RFC3339), res.TargetAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(c.stdout, "verify: %s\n", res.Outcome)
}

func verifyProgress(ctx context.Context, cl client.Client, id, runID string) string {
	for _, hb := range heartbeatDetails(ctx, cl, id, runID) {
		if _, ok := hb["tables_total"]; ok {
			return fmt.Sprintf("compared %d of %d tables; now %v", num(hb, "tables_done"), num(hb, "tables_total"), hb["table"])
		}
		if _, ok := hb["tip"]; ok {
			return fmt.Sprintf("waiting for broker %v: at %v, tip %v", hb["stream"], hb["last_applied"], hb["tip"])
		}
	}
	return ""
}
