package pgerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	// The package codes PostgreSQL's own errors: its tests provoke them.
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/testenv"
)

var side = Side{Privileges: errcode.TargetPrivileges, Unreachable: errcode.TargetUnreachable, Value: errcode.TargetValueRefused}

func TestClassifyCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want errcode.Code
	}{
		{&pgconn.PgError{Code: "42501"}, errcode.TargetPrivileges},
		{&pgconn.PgError{Code: "28P01"}, errcode.TargetUnreachable},
		{&pgconn.PgError{Code: "57P01"}, errcode.TargetUnreachable},
		{&pgconn.PgError{Code: "08006"}, errcode.TargetUnreachable},
		{&pgconn.PgError{Code: "53300"}, errcode.TargetUnreachable},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), errcode.TargetUnreachable},
		{&pgconn.PgError{Code: "22001"}, errcode.TargetValueRefused},
		{&pgconn.PgError{Code: "22P02"}, errcode.TargetValueRefused},
		{&pgconn.PgError{Code: "23505"}, ""},
		{&pgconn.PgError{Code: "55000"}, ""},
		{errors.New("something else"), ""},
	} {
		got := side.Classify(tc.err, "apply")
		e, ok := errcode.As(got)
		switch {
		case tc.want == "" && ok:
			t.Errorf("%v: want no code, got %s", tc.err, e.Code)
		case tc.want != "" && (!ok || e.Code != tc.want):
			t.Errorf("%v: want %s, got %v", tc.err, tc.want, got)
		}
	}
}

// A database that refuses connections (ALLOW_CONNECTIONS false) is
// unreachable, as a stopped server is: the run retries until it accepts.
func TestClassifyDatabaseNotAcceptingConnections(t *testing.T) {
	db := testenv.CreateDB(t, "closed")
	testenv.Exec(t, "postgres", `ALTER DATABASE `+db+` ALLOW_CONNECTIONS false`)
	t.Cleanup(func() { testenv.Exec(t, "postgres", `ALTER DATABASE `+db+` ALLOW_CONNECTIONS true`) })
	_, err := pgx.Connect(context.Background(), testenv.DSN(db))
	if err == nil {
		t.Fatal("connected to a database that refuses connections")
	}
	if got := side.Classify(err, "connect"); !errcode.Is(got, errcode.TargetUnreachable) {
		t.Fatalf("want %s, got %v", errcode.TargetUnreachable, got)
	}
}

// A side that names no value code leaves a data exception uncoded.
func TestDataExceptionWithoutValueCode(t *testing.T) {
	got := Side{Privileges: errcode.SourcePrivileges, Unreachable: errcode.SourceUnreachable}.Classify(&pgconn.PgError{Code: "22001"}, "read")
	if _, ok := errcode.As(got); ok {
		t.Fatalf("want no code, got %v", got)
	}
}
