// Package kmstest reaches the KMS emulator the dev services start, for
// the tests of the AWS KMS key wrapper and of what uses it.
package kmstest

import (
	"context"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/sluicehq/sluice/internal/testenv"
)

// Env gives the AWS SDK credentials and a region when the environment has
// none (the emulator checks no signature, but the SDK signs), and keeps it
// off the instance metadata service, whose probing is slow off EC2.
func Env(t *testing.T) {
	t.Helper()
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		t.Setenv("AWS_ACCESS_KEY_ID", "sluice-test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "sluice-test-secret")
	}
	if os.Getenv("AWS_REGION") == "" {
		t.Setenv("AWS_REGION", "us-east-1")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// Endpoint returns the KMS emulator deploy/dev/services.sh starts
// (SLUICE_TEST_KMS_ENDPOINT) after Env, skipping the test when none is
// configured and failing it instead under CI or SLUICE_REQUIRE_SERVICES=1.
func Endpoint(t *testing.T) string {
	t.Helper()
	ep := os.Getenv("SLUICE_TEST_KMS_ENDPOINT")
	if ep == "" {
		testenv.Missing(t, "SLUICE_TEST_KMS_ENDPOINT is not set (the KMS emulator local-kms; source services.env)")
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		t.Fatalf("SLUICE_TEST_KMS_ENDPOINT=%q is not a URL", ep)
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		testenv.Missing(t, "the KMS emulator is not reachable at %s (%v)", ep, err)
	}
	c.Close()
	Env(t)
	return ep
}

// Client is a KMS client of the emulator at ep, for a test's own calls.
func Client(ep string) *kms.Client {
	return kms.New(kms.Options{Region: "us-east-1", BaseEndpoint: aws.String(ep),
		Credentials: credentials.NewStaticCredentialsProvider("sluice-test", "sluice-test-secret", "")})
}

// CreateKey creates a symmetric key on the emulator at ep and returns its
// ARN.
func CreateKey(t *testing.T, ep string) string {
	t.Helper()
	out, err := Client(ep).CreateKey(context.Background(), &kms.CreateKeyInput{
		Description: aws.String("sluice test " + t.Name()),
		KeySpec:     types.KeySpecSymmetricDefault,
		KeyUsage:    types.KeyUsageTypeEncryptDecrypt,
	})
	if err != nil {
		t.Fatalf("create a KMS key on %s: %v", ep, err)
	}
	arn := aws.ToString(out.KeyMetadata.Arn)
	if arn == "" {
		t.Fatalf("CreateKey on %s answered without an ARN", ep)
	}
	return arn
}
