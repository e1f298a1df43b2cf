package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
)

// loginRole is SQL that creates the login role name (with REPLICATION) unless
// it exists; roles are cluster-wide, so tests share them.
func loginRole(name string) string {
	return fmt.Sprintf(`DO $$ BEGIN
		  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN
		    CREATE ROLE %[1]s LOGIN REPLICATION;
		  END IF;
		END $$;
		`, name)
}

// passwordRole is SQL that (re)creates sluice_pw_user, a login role that
// authenticates with sourcePassword over scram-sha-256 on 127.0.0.1 (the
// services script adds that pg_hba rule).
func passwordRole() string {
	return loginRole("sluice_pw_user") + fmt.Sprintf(`ALTER ROLE sluice_pw_user PASSWORD '%s';`, sourcePassword)
}

// asPasswordUser returns dsn with sluice_pw_user as its user.
func asPasswordUser(dsn string) string {
	return strings.Replace(dsn, "postgres@", "sluice_pw_user@", 1)
}

// rawHistory returns workflow id's history as raw protobuf, event after
// event: the binary encoding keeps payload bytes as they are (JSON would
// base64 them), so a secret anywhere in an event shows up verbatim.
func rawHistory(t *testing.T, cl client.Client, id string) (string, int) {
	t.Helper()
	iter := cl.GetWorkflowHistory(context.Background(), id, "", false, 0)
	var history strings.Builder
	events := 0
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		history.Write(b)
		events++
	}
	return history.String(), events
}
