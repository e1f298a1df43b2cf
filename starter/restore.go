package main

import (
	"context"
	"fmt"

	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/credentials"
	_ "github.com/sluicehq/sluice/internal/engines" // registers the target engines
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/workflows"
)

// targetFlags name a target database without putting its password in history.
type targetFlags struct {
	driver, dsn, passwordEnv, passwordFile string
}

func (t *targetFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.driver, "target-driver", "postgres", "target engine: "+strings.Join(target.Drivers(), ", "))
	cmd.Flags().StringVar(&t.dsn, "target", "", "target DSN without a password, e.g. postgres://user@host:5432/db, or an SQLite file path")
	cmd.Flags().StringVar(&t.passwordEnv, "target-password-env", "", "name of an environment variable of the worker that holds the target password")
	cmd.Flags().StringVar(&t.passwordFile, "target-password-file", "", "path, on the worker's host, of a file holding the target password")
}

// ref checks the flags and returns the reference and a name for the target
// database (host:port/db) that identifies it in workflow IDs.
func (t *targetFlags) ref() (credentials.DSNRef, string, error) {
	driver, ok := target.Canonical(t.driver)
	if !ok {
		return credentials.DSNRef{}, "", errcode.New(errcode.ConfigInvalid, "--target-driver %q is not known; use one of %s", t.driver, strings.Join(target.Drivers(), ", "))
	}
	ref, err := credentials.NewDSNRef("--target", t.dsn, t.passwordEnv, t.passwordFile)
	if err != nil {
		return ref, "", err
	}
	if driver != target.DefaultDriver {
		// Runs recorded before drivers existed carry none: PostgreSQL.
		ref.Driver = driver
	}
	traits, err := target.TraitsOf(driver)
	if err != nil {
		return ref, "", err
	}
	name, err := traits.Describe(t.dsn)
	if err != nil {
		return ref, "", err
	}
	return ref, name, nil
}

// maxLanes is how many apply lanes the chosen driver takes (0: any).
func (t *targetFlags) maxLanes() int {
	traits, err := target.TraitsOf(t.driver)
	if err != nil {
		return 0
	}
	return traits.MaxLanes
}

func (c *cli) restoreCmd() *cobra.Command {
	var tgt targetFlags
	var store storeFlags
	var backupTarget, through string
	var parallel int
	var replace bool
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Restore a chain into a target database",
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
			if parallel < 1 || parallel > 64 {
				return usageError("--parallel %d: give 1 to 64", parallel)
			}
			var res workflows.RestoreResult
			return c.start(cmd.Context(), launch{
				id:       "restore/" + name,
				workflow: workflows.RestoreWorkflow,
				input:    workflows.RestoreInput{Store: st, Target: ref, Parallel: parallel, Replace: replace, Through: through},
				attrs: temporal.NewSearchAttributes(
					workflows.SearchAttrChain.ValueSet(st.URL),
					workflows.SearchAttrRole.ValueSet("restore")),
				result:   &res,
				progress: restoreProgress,
				onSuccess: func() {
					fmt.Fprintf(c.stdout, "restored full %s into %s: %d tables, %d rows\n", res.FullID, name, res.Tables, res.Rows)
					if res.Incrementals > 0 {
						fmt.Fprintf(c.stdout, "applied %d incrementals (%d changes) through %s\n", res.Incrementals, res.Changes, res.Through)
					}
					if res.NotCarried != "" {
						fmt.Fprintf(c.stdout, "not carried by the chain, so not restored: %s\n", res.NotCarried)
					}
				},
			})
		},
	}
	store.bind(cmd)
	tgt.bind(cmd)
	cmd.Flags().StringVar(&backupTarget, "backup-target", "", "backup store URL of the chain: "+blobstore.Forms())
	cmd.Flags().IntVar(&parallel, "parallel", 2, "tables loaded at once")
	cmd.Flags().StringVar(&through, "through", "", "restore up to and including this link ID (default: the chain's tip)")
	cmd.Flags().BoolVar(&replace, "replace-existing", false, "drop and recreate target tables that already hold rows instead of refusing")
	cmd.Flags().BoolVar(&c.detach, "detach", false, "return once the workflow has started")
	return cmd
}

func restoreProgress(ctx context.Context, cl client.Client, id, runID string) string {
	var st workflows.RestoreStatus
	if !queryStatus(ctx, cl, id, runID, &st) {
		return ""
	}
	rows := st.RowsDone
	for _, hb := range heartbeatDetails(ctx, cl, id, runID) {
		rows += num(hb, "rows")
	}
	if st.IncrementalsTotal > 0 && st.TablesDone == st.TablesTotal {
		return fmt.Sprintf("%s: incrementals %d/%d, %d changes", st.Phase, st.IncrementalsDone, st.IncrementalsTotal, st.ChangesDone)
	}
	return fmt.Sprintf("%s: tables %d/%d, %d/%d rows", st.Phase, st.TablesDone, st.TablesTotal, rows, st.RowsTotal)
}
