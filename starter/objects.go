package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/target"
)

// objectFlags say whether a reader runs the chain's recorded schema
// objects: --trust-store-objects and --skip-missing-roles.
type objectFlags struct {
	trust, skipMissingRoles bool
}

func (f *objectFlags) bind(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.trust, activities.FlagTrustStoreObjects, false,
		"run the views, routines, triggers, policies, comments and grants the chain records (statements) although its signature is not verified (--verify-key-file with --require-signature runs them without this flag)")
	cmd.Flags().BoolVar(&f.skipMissingRoles, activities.FlagSkipMissingRoles, false,
		"skip and list the recorded grants and policies that name a role the target lacks, instead of refusing")
}

func (f *objectFlags) value() activities.ObjectsParams {
	return activities.ObjectsParams{Trust: f.trust, SkipMissingRoles: f.skipMissingRoles}
}

// printObjects says what became of the recorded schema objects: the count
// created per kind, those skipped and why, or why none was run.
func printObjects(w io.Writer, r *activities.ObjectsReport) {
	if r == nil || r.Recorded == 0 {
		return
	}
	if r.NotRun != "" {
		fmt.Fprintf(w, "schema objects not run: %d recorded (%s): %s\n", r.Recorded, strings.Join(target.Summary(r.NotRunKinds), ", "), r.NotRun)
		return
	}
	if len(r.Created) > 0 {
		fmt.Fprintf(w, "schema objects created: %s\n", strings.Join(target.Summary(r.Created), ", "))
	}
	if len(r.Replaced) > 0 {
		fmt.Fprintf(w, "schema objects replaced: %s\n", strings.Join(target.Summary(r.Replaced), ", "))
	}
	if len(r.Dropped) > 0 {
		fmt.Fprintf(w, "schema objects dropped: %s\n", strings.Join(target.Summary(r.Dropped), ", "))
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "schema objects skipped: %d\n", len(r.Skipped))
		for _, s := range r.Skipped {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
}
