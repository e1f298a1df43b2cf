package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/sluicehq/sluice/internal/testenv"
)

// gcsEndpoint returns the GCS emulator of the tests (fake-gcs-server),
// skipping the test when none is configured, failing it under
// SLUICE_REQUIRE_SERVICES=1.
func gcsEndpoint(t *testing.T) string {
	t.Helper()
	ep := os.Getenv("SLUICE_TEST_GCS_ENDPOINT")
	if ep == "" {
		testenv.Missing(t, "SLUICE_TEST_GCS_ENDPOINT is not set (fake-gcs-server, from deploy/dev/services.sh)")
	}
	if os.Getenv("STORAGE_EMULATOR_HOST") == "" {
		// The worker was started with the test binary's environment, and
		// only this variable lets the client library skip authentication.
		testenv.Missing(t, "STORAGE_EMULATOR_HOST is not set: source services.env before the tests")
	}
	return ep
}

// gcsChain returns a fresh gs:// chain URL in a bucket created for the test
// (emptied and deleted after it) and the store flags that reach it.
func gcsChain(t *testing.T) (url string, flags []string) {
	t.Helper()
	ep := gcsEndpoint(t)
	ctx := context.Background()
	cl, err := storage.NewClient(ctx, option.WithEndpoint(strings.TrimRight(ep, "/")+"/storage/v1/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	bucket := fmt.Sprintf("sluice-it-%d", time.Now().UnixNano())
	b := cl.Bucket(bucket)
	if err := b.Create(ctx, "sluice-it", nil); err != nil {
		var ge *googleapi.Error
		if !errors.As(err, &ge) || ge.Code != http.StatusConflict {
			t.Fatalf("create bucket %s at %s: %v", bucket, ep, err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("SLUICE_TEST_KEEP_FAILED_DBS") != "" {
			t.Logf("keeping bucket %s", bucket)
			return
		}
		it := b.Objects(ctx, nil)
		for {
			a, err := it.Next()
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				t.Logf("cleanup: list %s: %v", bucket, err)
				return
			}
			_ = b.Object(a.Name).Delete(ctx)
		}
		if err := b.Delete(ctx); err != nil {
			t.Logf("cleanup: delete bucket %s: %v", bucket, err)
		}
	})
	return "gs://" + bucket + "/" + strings.ToLower(t.Name()), []string{"--backup-option", "endpoint=" + ep}
}

// TestBrokerReplaysFromGCS runs the producer and a broker on a live workload
// through a gs:// chain on fake-gcs-server, then checks the chain with
// verify-chain through the same URL.
func TestBrokerReplaysFromGCS(t *testing.T) {
	url, flags := gcsChain(t)
	brokerScenario(t, url, flags, []int{2}, 150)
	r := sluice(t, append([]string{"backup", "verify-chain", "--target", url}, flags...)...)
	if r.exit != 0 {
		t.Fatalf("verify-chain on %s: %s", url, r)
	}
}

// TestTwoProducersRaceOnGCS races two first fulls on one new gs:// chain
// (raceFirstFulls): the create-only catalog write (ifGenerationMatch=0) lets
// exactly one commit.
func TestTwoProducersRaceOnGCS(t *testing.T) {
	url, flags := gcsChain(t)
	raceFirstFulls(t, url, flags)
}
