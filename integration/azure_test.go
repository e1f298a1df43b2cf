package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/sluicehq/sluice/internal/testenv"
)

// azureKeyVar is the worker environment variable holding the Azurite
// account key (services.env sets it); the store options only name it.
const azureKeyVar = "AZURITE_ACCOUNT_KEY"

// azureEndpoint returns the Azure blob service of the tests (Azurite),
// skipping the test when none is configured, failing it under
// SLUICE_REQUIRE_SERVICES=1.
func azureEndpoint(t *testing.T) string {
	t.Helper()
	ep := os.Getenv("SLUICE_TEST_AZURE_ENDPOINT")
	if ep == "" {
		testenv.Missing(t, "SLUICE_TEST_AZURE_ENDPOINT is not set (Azurite, from deploy/dev/services.sh)")
	}
	if os.Getenv(azureKeyVar) == "" {
		// The worker started with the test binary's environment: setting
		// the variable now would not reach it.
		testenv.Missing(t, "%s is not set: source services.env before the tests", azureKeyVar)
	}
	return ep
}

// azureAccount is the storage account of the test service.
func azureAccount() string {
	if a := os.Getenv("SLUICE_TEST_AZURE_ACCOUNT"); a != "" {
		return a
	}
	return "devstoreaccount1"
}

// azureChain returns a fresh azblob:// chain URL, in a container created for
// the test (and deleted after it), and the store flags that reach it: the
// endpoint, the account and the name of the variable holding the key.
func azureChain(t *testing.T) (url string, flags []string) {
	t.Helper()
	ep := azureEndpoint(t)
	account := azureAccount()
	cred, err := azblob.NewSharedKeyCredential(account, os.Getenv(azureKeyVar))
	if err != nil {
		t.Fatalf("account key in $%s: %v", azureKeyVar, err)
	}
	cl, err := azblob.NewClientWithSharedKeyCredential(strings.TrimRight(ep, "/")+"/", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	container := fmt.Sprintf("sluice-it-%d", time.Now().UnixNano())
	ctx := context.Background()
	if _, err := cl.CreateContainer(ctx, container, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		t.Fatalf("create container %s at %s: %v", container, ep, err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("SLUICE_TEST_KEEP_FAILED_DBS") != "" {
			t.Logf("keeping container %s", container)
			return
		}
		if _, err := cl.DeleteContainer(context.Background(), container, nil); err != nil {
			t.Logf("cleanup: delete container %s: %v", container, err)
		}
	})
	prefix := strings.ToLower(t.Name())
	return "azblob://" + container + "/" + prefix, []string{
		"--backup-option", "endpoint=" + ep,
		"--backup-option", "account_key_env=" + azureKeyVar,
		"--backup-option", "account=" + account,
	}
}

// requireNoAccountKey checks that the workflows' histories (raw protobuf,
// which keeps payload bytes verbatim) and the worker's log name the key's
// variable at most, never the key.
func requireNoAccountKey(t *testing.T, ids ...string) {
	t.Helper()
	key := os.Getenv(azureKeyVar)
	cl := temporalClient(t)
	defer cl.Close()
	var raw strings.Builder
	for _, id := range ids {
		hist, _ := rawHistory(t, cl, id)
		raw.WriteString(hist)
	}
	if !strings.Contains(raw.String(), azureKeyVar) {
		t.Fatalf("the histories of %v do not name %s: were they read?", ids, azureKeyVar)
	}
	if strings.Contains(raw.String(), key) {
		t.Errorf("the account key appears in the history of one of %v", ids)
	}
	if strings.Contains(h.workerLog.String(), key) {
		t.Errorf("the account key appears in the worker log")
	}
}

// TestBrokerReplaysFromAzure runs the producer and a broker on a live
// workload through an azblob:// chain on Azurite.
func TestBrokerReplaysFromAzure(t *testing.T) {
	url, flags := azureChain(t)
	brokerScenario(t, url, flags, []int{2}, 150)
	requireNoAccountKey(t, "backup-full/"+url, "producer/"+url)
}

// TestTwoProducersRaceOnAzure races two first fulls on one new azblob://
// chain (raceFirstFulls): the create-only catalog write (If-None-Match: *)
// lets exactly one commit, and neither history holds the account key.
func TestTwoProducersRaceOnAzure(t *testing.T) {
	url, flags := azureChain(t)
	urls := raceFirstFulls(t, url, flags)
	requireNoAccountKey(t, "backup-full/"+urls[0], "backup-full/"+urls[1])
}
