package activities

import (
	"context"

	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/source"
)

// Driver options that runs' inputs carry as fields of their own (they were
// recorded before inputs had options maps): the postgres driver's names for
// the publication, the chain slot's name and the replica-identity mode.
const (
	optionPublication        = "publication"
	optionSlotName           = "slot_name"
	optionSetReplicaIdentity = "set_replica_identity"
)

// openSource resolves a source's password reference here, in the worker,
// and opens the source through the registry by its driver. fields are the
// input's own option fields by option name: each one set replaces the same
// option of ref.Options.
func openSource(ctx context.Context, ref credentials.DSNRef, fields map[string]string) (source.Source, error) {
	dsn, err := ref.Resolve()
	if err != nil {
		return nil, err
	}
	options := make(map[string]string, len(ref.Options)+len(fields))
	for k, v := range ref.Options {
		options[k] = v
	}
	for k, v := range fields {
		if v != "" {
			options[k] = v
		}
	}
	return source.Open(ctx, ref.Driver, dsn, options)
}
