package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/activities"
	"github.com/sluicehq/sluice/internal/target"
)

// objectFlags say whether and how a reader runs the chain's recorded
// schema objects: --trust-store-objects, --skip-missing-roles and
// --object-definer.
type objectFlags struct {
	trust, skipMissingRoles bool
	definer                 string
}

func (f *objectFlags) bind(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.trust, activities.FlagTrustStoreObjects, false,
		"run the views, routines, triggers, events, policies, comments and grants the chain records (statements) although its signature is not verified (--verify-key-file with --require-signature runs them without this flag)")
	cmd.Flags().BoolVar(&f.skipMissingRoles, activities.FlagSkipMissingRoles, false,
		"skip and list the recorded grants and policies that name a role the target lacks, instead of refusing")
	cmd.Flags().StringVar(&f.definer, activities.FlagObjectDefiner, "",
		"MySQL-family targets: create every recorded view, routine, trigger and event as this account (USER@HOST, or CURRENT_USER for the account sluice connects as) instead of its recorded DEFINER")
}

// value returns the flags as the activities take them, refusing a
// malformed --object-definer.
func (f *objectFlags) value() (activities.ObjectsParams, error) {
	p := activities.ObjectsParams{Trust: f.trust, SkipMissingRoles: f.skipMissingRoles, Definer: strings.TrimSpace(f.definer)}
	if p.Definer != "" && !validDefiner(p.Definer) {
		return p, usageError("--%s %q is not an account: give USER@HOST (either part may be quoted, as 'user'@'%%'), a role, or CURRENT_USER",
			activities.FlagObjectDefiner, f.definer)
	}
	return p, nil
}

// validDefiner reports whether account can name a MySQL-family account
// or role: CURRENT_USER (or CURRENT_USER()), a name, or a user and a host
// either side of the last @, no part empty once its quotes (' or `) are
// taken off. Whether the target has it is the target's to say
// (SLUICE-E-TARGET-DEFINER-MISSING).
func validDefiner(account string) bool {
	if strings.EqualFold(strings.TrimSuffix(account, "()"), "CURRENT_USER") {
		return true
	}
	part := func(s string) bool {
		s = strings.TrimSpace(s)
		if len(s) >= 2 && (s[0] == '\'' || s[0] == '`') && s[len(s)-1] == s[0] {
			s = s[1 : len(s)-1]
		}
		return s != ""
	}
	at := strings.LastIndex(account, "@")
	if at < 0 {
		return part(account)
	}
	return part(account[:at]) && part(account[at+1:])
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
