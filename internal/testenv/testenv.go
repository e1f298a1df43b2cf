// Package testenv gives tests the real services deploy/dev/services.sh starts:
// PostgreSQL databases created and dropped per test, an S3 bucket on the
// local S3-compatible server, and the Temporal address. When a service is
// missing a test fails under CI or SLUICE_REQUIRE_SERVICES=1, and is skipped
// otherwise.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	// Tests reach the real PostgreSQL to build databases, workloads and comparisons.
	"github.com/jackc/pgx/v5"
)

// Defaults match deploy/dev/services.sh.
const (
	defaultPG       = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultS3       = "http://127.0.0.1:7070"
	defaultTemporal = "127.0.0.1:7233"
	// Bucket is the S3 bucket integration tests write under.
	Bucket = "sluice-it"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Required reports whether missing services must fail tests rather than skip them.
func Required() bool {
	return os.Getenv("CI") != "" || os.Getenv("SLUICE_REQUIRE_SERVICES") == "1"
}

// Missing fails or skips t because a service is not there.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + "; start the services with `make services`"
	if Required() {
		t.Fatal(msg)
	}
	t.Skip(msg + " (SLUICE_REQUIRE_SERVICES=1 fails instead of skipping)")
}

func reachable(hostport string) bool {
	c, err := net.DialTimeout("tcp", hostport, 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// AdminDSN returns the DSN of a PostgreSQL superuser on the test server.
func AdminDSN() string { return env("SLUICE_TEST_PG", defaultPG) }

// DSN returns AdminDSN pointed at database db.
func DSN(db string) string {
	u, err := url.Parse(AdminDSN())
	if err != nil {
		panic(err)
	}
	u.Path = "/" + db
	return u.String()
}

// TemporalAddress returns the Temporal frontend tests use, failing or
// skipping when nothing listens there.
func TemporalAddress(t testing.TB) string {
	t.Helper()
	addr := env("TEMPORAL_ADDRESS", defaultTemporal)
	if !reachable(addr) {
		Missing(t, "Temporal is not reachable at %s", addr)
	}
	return addr
}

// Admin connects to the test server's maintenance database.
func Admin(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, AdminDSN())
	if err != nil {
		Missing(t, "PostgreSQL is not reachable at %s: %v", AdminDSN(), err)
	}
	return conn
}

// CreateDB creates an empty database whose name starts with prefix, drops it
// when the test ends, and returns its name.
func CreateDB(t testing.TB, prefix string) string {
	t.Helper()
	name := strings.ToLower(fmt.Sprintf("sluice_it_%s_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1e9))
	conn := Admin(t)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("SLUICE_TEST_KEEP_FAILED_DBS") != "" {
			t.Logf("kept database %s of the failed test (SLUICE_TEST_KEEP_FAILED_DBS)", name)
			return
		}
		c := Admin(t)
		defer c.Close(context.Background())
		ctx := context.Background()
		// Drop slots a failed test left on the database, then the database.
		_, _ = c.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, name)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return name
}

// Exec runs SQL statements in database db and fails the test on error.
func Exec(t testing.TB, db string, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), DSN(db))
	if err != nil {
		t.Fatalf("connect %s: %v", db, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("exec in %s: %v\n%s", db, err, sql)
	}
}

// S3Endpoint returns the local S3-compatible server's URL, failing or
// skipping when it is not reachable.
func S3Endpoint(t testing.TB) string {
	t.Helper()
	ep := env("SLUICE_TEST_S3_ENDPOINT", defaultS3)
	u, err := url.Parse(ep)
	if err != nil || !reachable(u.Host) {
		Missing(t, "the S3-compatible server is not reachable at %s", ep)
	}
	return ep
}

var bucketOnce sync.Once
var bucketErr error

// S3Bucket makes sure the test bucket exists on the local S3 server and
// returns the endpoint. Credentials come from the AWS environment variables
// services.env sets (defaults applied here when unset).
func S3Bucket(t testing.TB) string {
	t.Helper()
	ep := S3Endpoint(t)
	SetS3Credentials()
	bucketOnce.Do(func() {
		ctx := context.Background()
		cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(env("AWS_REGION", "us-east-1")))
		if err != nil {
			bucketErr = err
			return
		}
		cl := s3.NewFromConfig(cfg, func(o *s3.Options) {
			o.BaseEndpoint = aws.String(ep)
			o.UsePathStyle = true
		})
		_, err = cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)})
		var owned interface{ ErrorCode() string }
		if err != nil && errors.As(err, &owned) && (owned.ErrorCode() == "BucketAlreadyOwnedByYou" || owned.ErrorCode() == "BucketAlreadyExists") {
			err = nil
		}
		bucketErr = err
	})
	if bucketErr != nil {
		t.Fatalf("create bucket %s on %s: %v", Bucket, ep, bucketErr)
	}
	return ep
}

// SetS3Credentials sets the dev S3 server's credentials in the environment
// when none are set, so child processes inherit them.
func SetS3Credentials() {
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		os.Setenv("AWS_ACCESS_KEY_ID", "sluice")
		os.Setenv("AWS_SECRET_ACCESS_KEY", "sluice-dev-secret")
	}
	if os.Getenv("AWS_REGION") == "" {
		os.Setenv("AWS_REGION", "us-east-1")
	}
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}
