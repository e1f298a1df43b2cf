package engines

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// What the remote stores link: their cloud SDKs, and what those pull in.
// Only the store packages below internal/blobstore may link them.
var storeSDKs = []string{
	"github.com/aws/aws-sdk-go-v2/service/s3",
	"cloud.google.com/go/storage",
	"google.golang.org/api/",
	"github.com/Azure/",
	"github.com/AzureAD/",
}

// neutral lists the packages that must link no cloud store SDK: the stores
// register from their own packages, which only internal/engines imports.
// Those that hold a key seal (internal/keyref links internal/seal/awskms)
// may link the AWS core for KMS; the others link nothing of AWS at all.
var neutral = []struct {
	pkg string
	kms bool
}{
	{"github.com/sluicehq/sluice/internal/blobstore", false},
	{"github.com/sluicehq/sluice/internal/chain", false},
	{"github.com/sluicehq/sluice/internal/apply", false},
	{"github.com/sluicehq/sluice/internal/producer", false},
	{"github.com/sluicehq/sluice/internal/source", false},
	{"github.com/sluicehq/sluice/internal/target", false},
	{"github.com/sluicehq/sluice/activities", true},
	{"github.com/sluicehq/sluice/workflows", true},
}

// The neutral core links no cloud store SDK: `go list -deps` of each
// neutral package names none of their packages.
func TestNeutralPackagesLinkNoCloudSDK(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list dependencies with: %v", err)
	}
	args := []string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}
	for _, n := range neutral {
		args = append(args, n.pkg)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(gobin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[f[0]] = f[1:]
	}
	for _, n := range neutral {
		d, ok := deps[n.pkg]
		if !ok {
			t.Errorf("go list did not list %s", n.pkg)
			continue
		}
		forbidden := storeSDKs
		if !n.kms {
			forbidden = append([]string{"github.com/aws/"}, storeSDKs...)
		}
		for _, prefix := range forbidden {
			var hits []string
			for _, dep := range d {
				if strings.HasPrefix(dep, prefix) {
					hits = append(hits, dep)
				}
			}
			if len(hits) > 0 {
				t.Errorf("%s links %d packages of %s, %s among them: a store's SDK belongs in the store's package below internal/blobstore, which only internal/engines imports", n.pkg, len(hits), prefix, hits[0])
			}
		}
	}
}
