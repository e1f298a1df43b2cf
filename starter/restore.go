package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/credentials"
	_ "github.com/sluicehq/sluice/internal/engines" // registers the target engines
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/pitr"
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
	var backupTarget, through, until, untilPosition string
	var parallel, concurrency int
	var replace bool
	var sf subsetFlags
	var of objectFlags
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
			if err := workflows.CheckApplyConcurrency(concurrency, tgt.maxLanes(), tgt.driver); err != nil {
				return err
			}
			if err := checkPointFlags(through, until, untilPosition); err != nil {
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
			var res workflows.RestoreResult
			return c.start(cmd.Context(), launch{
				id:       "restore/" + name,
				workflow: workflows.RestoreWorkflow,
				input: workflows.RestoreInput{Store: st, Target: ref, Parallel: parallel, Replace: replace, Through: through,
					Until: until, UntilPosition: untilPosition, Subset: subset, Objects: objects, ApplyConcurrency: concurrency},
				attrs: temporal.NewSearchAttributes(
					workflows.SearchAttrChain.ValueSet(st.URL),
					workflows.SearchAttrRole.ValueSet("restore")),
				result:   &res,
				progress: restoreProgress,
				onSuccess: func() {
					fmt.Fprintf(c.stdout, "restored full %s into %s: %d tables, %d rows\n", res.FullID, name, res.Tables, res.Rows)
					printExcluded(c.stdout, subset, res.Excluded)
					if res.Incrementals > 0 {
						fmt.Fprintf(c.stdout, "applied %d incrementals (%d changes) through %s\n", res.Incrementals, res.Changes, res.Through)
					}
					if res.Point != "" {
						fmt.Fprint(c.stdout, describePoint(res))
					}
					printObjects(c.stdout, res.Objects)
					if res.NotCarried != "" {
						fmt.Fprintf(c.stdout, "not carried by the chain, so not restored: %s\n", res.NotCarried)
					}
				},
			})
		},
	}
	store.bind(cmd)
	store.bindKeys(cmd, keysOpen|keysVerify, readByWorker)
	tgt.bind(cmd)
	cmd.Flags().StringVar(&backupTarget, "backup-target", "", "backup store URL of the chain: "+blobstore.Forms())
	cmd.Flags().IntVar(&parallel, "parallel", 2, "tables loaded at once")
	cmd.Flags().IntVar(&concurrency, "apply-concurrency", 1, "lanes applying each incremental after the full, hashed by table and key as the broker's (1: each incremental in one transaction)")
	cmd.Flags().StringVar(&through, "through", "", "restore up to and including this link ID (default: the chain's tip)")
	cmd.Flags().StringVar(&until, "until", "", "restore every transaction that committed at or before this RFC 3339 time (inclusive; e.g. 2026-12-05T14:03:00Z) and none after")
	cmd.Flags().StringVar(&untilPosition, "until-position", "", "restore every transaction at or before this source position (inclusive): a PostgreSQL commit LSN such as 0/16B3748, or for the MySQL family a GTID set or binlog file:offset, as backup inspect prints them")
	cmd.Flags().BoolVar(&replace, "replace-existing", false, "drop and recreate target tables that already hold rows instead of refusing")
	sf.bind(cmd)
	of.bind(cmd)
	cmd.Flags().BoolVar(&c.detach, "detach", false, "return once the workflow has started")
	return cmd
}

// checkPointFlags refuses more than one of --through, --until and
// --until-position, and an --until that is no RFC 3339 time, before
// anything starts.
func checkPointFlags(through, until, untilPosition string) error {
	var given []string
	for _, f := range []struct{ name, value string }{{"--through", through}, {"--until", until}, {"--until-position", untilPosition}} {
		if f.value != "" {
			given = append(given, f.name)
		}
	}
	if len(given) > 1 {
		return usageError("%s name where to stop in different ways; give only one", strings.Join(given, " and "))
	}
	if until != "" {
		if _, err := pitr.ParseTime(until); err != nil {
			return err
		}
	}
	return nil
}

// describePoint says where a restore to a point stopped: the last
// transaction it applied and the first it left out.
func describePoint(res workflows.RestoreResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "restored to %s\n", res.Point)
	if res.Last != nil {
		fmt.Fprintf(&b, "last transaction applied: committed %s at %s (incremental %s)\n", res.Last.CommitTime.Format(time.RFC3339Nano), res.Last.Position, res.Last.Link)
	} else {
		fmt.Fprintf(&b, "last transaction applied: none after full %s\n", res.FullID)
	}
	if res.Next != nil {
		fmt.Fprintf(&b, "first transaction left out: committed %s at %s (incremental %s)\n", res.Next.CommitTime.Format(time.RFC3339Nano), res.Next.Position, res.Next.Link)
	} else {
		b.WriteString("first transaction left out: none, the point is at or after the chain's newest transaction\n")
	}
	return b.String()
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
