package activities

import (
	"context"

	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/source"
)

// Options of the postgres source driver that the CLI's flags set
// (--publication, --slot-name, --set-replica-identity). New runs carry them
// in the source reference's options; runs recorded before inputs had options
// carry them as fields of their own, which openSource still reads.
const (
	OptionPublication        = "publication"
	OptionSlotName           = "slot_name"
	OptionSetReplicaIdentity = "set_replica_identity"
)

// OptionFollowFailover is the mysql source driver's option that
// --follow-failover sets: the chain may go on from a promoted replica.
const OptionFollowFailover = "follow_failover"

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
