package postgres

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/target"
	"github.com/sluicehq/sluice/internal/testenv"
)

// superuserWarnings opens three lanes on a target at dsn, with the warning
// armed afresh and the default logger writing to a buffer, and returns how
// many times the superuser warning was logged.
func superuserWarnings(t *testing.T, dsn string) int {
	t.Helper()
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	superuserWarned = sync.Once{}
	ctx := context.Background()
	tgt, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close(ctx)
	for range 3 {
		l, err := tgt.OpenLane(ctx, target.LaneConfig{Schema: &chain.Schema{}, Stream: "superuser"})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Count(buf.String(), "target role is a superuser")
}

// The broker warns once when its target role is a superuser, however many
// lanes it opens, and never for a role holding only the privileges
// docs/security.md lists for the broker.
func TestSuperuserWarnedOnce(t *testing.T) {
	role := fmt.Sprintf("sluice_plain_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	admin := testenv.Admin(t)
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN NOSUPERUSER"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := testenv.Admin(t)
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()); err != nil {
			t.Logf("drop role %s: %v", role, err)
		}
	})
	db := testenv.CreateDB(t, "superuser")
	testenv.Exec(t, db, "GRANT CONNECT, TEMPORARY ON DATABASE "+pgx.Identifier{db}.Sanitize()+" TO "+pgx.Identifier{role}.Sanitize()+
		"; GRANT USAGE, CREATE ON SCHEMA public TO "+pgx.Identifier{role}.Sanitize())

	if n := superuserWarnings(t, testenv.DSN(db)); n != 1 {
		t.Errorf("a superuser target: %d warnings, want 1", n)
	}
	u, err := url.Parse(testenv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	if n := superuserWarnings(t, u.String()); n != 0 {
		t.Errorf("a plain role's target: %d warnings, want none", n)
	}
}
