package keyref

import (
	"context"

	"github.com/sluicehq/sluice/internal/seal"
	"github.com/sluicehq/sluice/internal/seal/awskms"
)

// newKMS builds the AWS KMS wrapper of a --kms-key reference; the
// credentials come from the AWS configuration chain of the process.
func newKMS(ctx context.Context, key, region, endpoint string) (seal.Wrapper, error) {
	w, err := awskms.New(ctx, awskms.Options{KeyID: key, Region: region, Endpoint: endpoint})
	if err != nil {
		return nil, err
	}
	return w, nil
}
