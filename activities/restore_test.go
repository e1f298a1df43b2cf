package activities

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sluicehq/sluice/internal/apply"
	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/errcode"
	_ "github.com/sluicehq/sluice/internal/target/mysql"
	"github.com/sluicehq/sluice/internal/testenv"
)

// A restore applies the incrementals after its full under a position of
// its own: refused with its code before the target is prepared; once
// prepared at the full, each incremental applies once (a retry of an
// applied one returns its count and applies nothing again), on one lane
// or on several (an apply planned before restores named the link before,
// After "", finds it in the chain); at the end the position names the last link, held by no
// run, and its marks are gone. One lane on SQLite, three on MariaDB.
func TestRestoreAppliesUnderItsOwnPosition(t *testing.T) {
	for _, lanes := range []int{1, 3} {
		t.Run(map[int]string{1: "one lane", 3: "three lanes"}[lanes], func(t *testing.T) {
			f := newStartFixture(t)
			db := func() *sql.DB {
				d, err := sql.Open("sqlite", f.ref.DSN)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				return d
			}
			if lanes > 1 {
				name := testenv.CreateMySQLDB(t, "restorelanes")
				f.ref = credentials.DSNRef{Driver: "mysql", DSN: testenv.MySQLDSN(name)}
				db = func() *sql.DB { return testenv.MySQL(t, name) }
			}
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestActivityEnvironment()
			a := &Activities{}
			env.RegisterActivity(a)
			tp := TargetParams{Store: f.store, Target: f.ref, ChainID: f.b.Cat.ChainID, FullID: f.full, ApplyConcurrency: lanes, Incrementals: 2}
			applyLink := func(id, after string) (int64, error) {
				v, err := env.ExecuteActivity(a.ApplyIncremental, ApplyIncrementalParams{TargetParams: tp, Incremental: id, After: after})
				if err != nil {
					return 0, err
				}
				var n int64
				return n, v.Get(&n)
			}
			_, err := applyLink(f.inc1, f.full)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != string(errcode.RestorePositionMissing) {
				t.Fatalf("before the prepare: %v, want %s", err, errcode.RestorePositionMissing)
			}

			if _, err := env.ExecuteActivity(a.PrepareTarget, tp); err != nil {
				t.Fatal(err)
			}
			if _, err := env.ExecuteActivity(a.LoadTable, LoadTableParams{TargetParams: tp, Table: "public.t"}); err != nil {
				t.Fatal(err)
			}
			for _, step := range []struct{ id, after string }{{f.inc1, f.full}, {f.inc1, f.full}, {f.inc2, ""}} {
				if n, err := applyLink(step.id, step.after); err != nil || n != 1 {
					t.Fatalf("apply %s: %d changes, %v; want 1", step.id, n, err)
				}
			}
			if _, err := env.ExecuteActivity(a.EndRestore, tp); err != nil {
				t.Fatal(err)
			}
			tgt := f.open()
			defer tgt.Close(context.Background())
			row, found, err := tgt.State().ReadState(context.Background(), RestoreStream(tp.ChainID))
			if err != nil || !found {
				t.Fatalf("the restore's position: found %t, %v", found, err)
			}
			tok, err := apply.Decode(row.Token, row.Checksum)
			if err != nil || tok.LastApplied != f.inc2 || tok.Owner != "" || tok.InProgress != nil {
				t.Fatalf("the restore's position %+v (%v), want past %s and held by no run", tok, err, f.inc2)
			}
			d := db()
			var rows, marks int
			if err := d.QueryRow(`SELECT count(*) FROM t`).Scan(&rows); err != nil || rows != 3 {
				t.Fatalf("%d rows (%v), want 3: the full's and one from each incremental", rows, err)
			}
			if err := d.QueryRow(`SELECT count(*) FROM sluice_cdc_apply_marks`).Scan(&marks); err != nil || marks != 0 {
				t.Fatalf("%d marks (%v) left, want none", marks, err)
			}
		})
	}
}

// A restore of a full alone leaves no control table in the target, and
// takes away the position an earlier restore of the chain left there.
func TestRestoreOfAFullAloneWritesNoPosition(t *testing.T) {
	f := newStartFixture(t)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	a := &Activities{}
	env.RegisterActivity(a)
	tp := TargetParams{Store: f.store, Target: f.ref, ChainID: f.b.Cat.ChainID, FullID: f.full}
	if _, err := env.ExecuteActivity(a.PrepareTarget, tp); err != nil {
		t.Fatal(err)
	}
	if n := f.controlTables(); n != 0 {
		t.Fatalf("%d control tables after preparing a restore of a full alone, want none", n)
	}
	tp.Incrementals, tp.Replace = 2, true
	if _, err := env.ExecuteActivity(a.PrepareTarget, tp); err != nil {
		t.Fatal(err)
	}
	tp.Incrementals = 0
	if _, err := env.ExecuteActivity(a.PrepareTarget, tp); err != nil {
		t.Fatal(err)
	}
	tgt := f.open()
	defer tgt.Close(context.Background())
	if _, found, err := tgt.State().ReadState(context.Background(), RestoreStream(tp.ChainID)); err != nil || found {
		t.Fatalf("the earlier restore's position: found %t, %v; want it gone", found, err)
	}
}
