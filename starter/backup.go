package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chainview"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
	"github.com/sluicehq/sluice/workflows"
)

// sourceFlags name a source database without putting its password in history.
type sourceFlags struct {
	driver, dsn, passwordEnv, passwordFile string
}

func (s *sourceFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.driver, "source-driver", source.DefaultDriver, "source engine: "+strings.Join(source.Drivers(), ", "))
	cmd.Flags().StringVar(&s.dsn, "source", "", "source DSN without a password, e.g. "+source.Form(source.DefaultDriver))
	cmd.Flags().StringVar(&s.passwordEnv, "source-password-env", "", "name of an environment variable of the worker that holds the source password")
	cmd.Flags().StringVar(&s.passwordFile, "source-password-file", "", "path, on the worker's host, of a file holding the source password")
}

// ref checks the flags and returns the reference. A source of the default
// driver names none, so its runs' inputs and workflow IDs are those of runs
// recorded before drivers existed.
func (s *sourceFlags) ref() (credentials.DSNRef, error) {
	driver, ok := source.Canonical(s.driver)
	if !ok {
		return credentials.DSNRef{}, errcode.New(errcode.ConfigInvalid, "--source-driver %q is not known; use one of %s", s.driver, strings.Join(source.Drivers(), ", "))
	}
	ref, err := credentials.NewDSNRef("--source", s.dsn, s.passwordEnv, s.passwordFile)
	if err != nil {
		return ref, err
	}
	if driver != source.DefaultDriver {
		ref.Driver = driver
	}
	// A malformed DSN is refused here rather than by a worker.
	if tr, err := source.TraitsOf(driver); err == nil && tr.CheckDSN != nil {
		if err := tr.CheckDSN(s.dsn); err != nil {
			return ref, err
		}
	}
	return ref, nil
}

func (c *cli) backupFullCmd() *cobra.Command {
	var src sourceFlags
	var store storeFlags
	var target, slotName, publication, setIdentity string
	var chainSlot bool
	var parallel int
	var filters filterFlags
	cmd := &cobra.Command{
		Use:   "full",
		Short: "Take a full backup of the source as the first link of a new chain",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ref, err := src.ref()
			if err != nil {
				return err
			}
			st, err := store.ref("--target", target)
			if err != nil {
				return err
			}
			if parallel < 1 || parallel > 64 {
				return usageError("--parallel %d: give 1 to 64", parallel)
			}
			if slotName != "" && !chainSlot {
				return usageError("--slot-name names the chain slot; it needs --chain-slot")
			}
			if publication != "" && !chainSlot {
				return usageError("--publication is read by incrementals; it needs --chain-slot")
			}
			switch setIdentity {
			case "refuse", "auto":
			default:
				return usageError("--set-replica-identity %q: give refuse or auto", setIdentity)
			}
			if setIdentity == "auto" && !chainSlot {
				return usageError("--set-replica-identity auto readies the tables the chain's publication publishes; it needs --chain-slot")
			}
			if setIdentity != "auto" {
				setIdentity = "" // refuse is the driver's default
			}
			ref.Options = sourceOptions(ref.Options, map[string]string{
				activities.OptionSlotName: slotName, activities.OptionPublication: publication, activities.OptionSetReplicaIdentity: setIdentity})
			c.warnUnencrypted(st)
			spec, err := filters.value()
			if err != nil {
				return err
			}
			in := workflows.FullBackupInput{Store: st, Source: ref, ChainSlot: chainSlot, Parallel: parallel, Filter: spec}
			var res activities.FullBackupResult
			return c.start(cmd.Context(), launch{
				id:       "backup-full/" + st.URL,
				workflow: workflows.FullBackupWorkflow,
				input:    in,
				attrs: temporal.NewSearchAttributes(
					workflows.SearchAttrChain.ValueSet(st.URL),
					workflows.SearchAttrRole.ValueSet("backup-full")),
				result:   &res,
				progress: backupProgress,
				onSuccess: func() {
					for _, g := range res.ReplicaIdentitySet {
						fmt.Fprintf(c.stdout, "replica identity set: %s (it had %s)\n", g.Fix, g.Why)
					}
					fmt.Fprintf(c.stdout, "full %s committed: %d tables, %d rows, %s stored, anchored at %s\n",
						res.FullID, res.Tables, res.Rows, chainview.HumanBytes(res.StoredBytes), res.EndPosition)
					switch {
					case res.Engine != "" && res.Engine != source.DefaultDriver:
						fmt.Fprintf(c.stdout, "incrementals follow from %s (replica %s); the source keeps that binlog only until it expires: start the producer\n", res.EndPosition, res.Slot)
					case res.Slot != "":
						fmt.Fprintf(c.stdout, "chain slot %s now retains WAL from %s: feed the chain or drop the slot\n", res.Slot, res.EndPosition)
					}
				},
			})
		},
	}
	src.bind(cmd)
	store.bind(cmd)
	store.bindKeys(cmd, keysOpen|keysEncrypt|keysSign, readByWorker)
	cmd.Flags().StringVar(&target, "target", "", "backup store URL of the new chain: "+blobstore.Forms())
	cmd.Flags().BoolVar(&chainSlot, "chain-slot", false, "create the chain's logical replication slot and anchor the snapshot on it, so incrementals follow with no gap")
	cmd.Flags().StringVar(&slotName, "slot-name", "", "name of the chain slot (default: derived from --target)")
	cmd.Flags().StringVar(&publication, "publication", "", "with --chain-slot: the publication incrementals read (default sluice_all_tables, created FOR ALL TABLES when missing)")
	cmd.Flags().StringVar(&setIdentity, "set-replica-identity", "refuse",
		"with --chain-slot, for published tables whose updates and deletes would fail for want of a replica identity: refuse (list them with their fix) or auto (run each fix: USING INDEX a NOT NULL unique index, else FULL)")
	cmd.Flags().IntVar(&parallel, "parallel", 2, "tables copied at once")
	filters.bind(cmd)
	cmd.Flags().BoolVar(&c.detach, "detach", false, "return once the workflow has started")
	return cmd
}

func backupProgress(ctx context.Context, cl client.Client, id, runID string) string {
	for _, hb := range heartbeatDetails(ctx, cl, id, runID) {
		if _, ok := hb["tables_total"]; ok {
			return fmt.Sprintf("tables %d/%d, %d rows, %s read, %s stored",
				num(hb, "tables_done"), num(hb, "tables_total"), num(hb, "rows"),
				chainview.HumanBytes(num(hb, "raw_bytes")), chainview.HumanBytes(num(hb, "stored_bytes")))
		}
	}
	return ""
}
