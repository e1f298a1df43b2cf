package postgres

import (
	"context"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/source"
)

// EngineName is the engine a PostgreSQL chain records (chain.SourceInfo.Engine).
const EngineName = "postgres"

// The options of the postgres source driver (credentials.DSNRef.Options).
const (
	// OptionPublication names the publication incrementals read
	// (default DefaultPublication); a full with a chain slot ensures it
	// before the slot exists.
	OptionPublication = "publication"
	// OptionSlotName names the chain slot a full creates (default
	// DefaultSlotName of the store URL).
	OptionSlotName = "slot_name"
	// OptionSetReplicaIdentity is what a full with a chain slot does about
	// tables the publication would publish without a usable replica
	// identity: IdentityRefuse (the default) or IdentityAuto.
	OptionSetReplicaIdentity = "set_replica_identity"
	// optionFollowFailover is the MySQL-family driver's failover option,
	// refused here with what to do instead.
	optionFollowFailover = "follow_failover"
)

func init() {
	source.Register(EngineName, "postgres://user@host:5432/db", openEngine, "postgresql", "pg")
	source.RegisterTraits(EngineName, source.Traits{NotCarried: NotCarried})
}

// engine is a PostgreSQL source: its DSN and the driver's options. Every
// operation connects for its own duration.
type engine struct {
	dsn                             string
	publication, slotName, identity string
}

var (
	_ source.Source  = (*engine)(nil)
	_ source.Capture = (*Capture)(nil)
)

// openEngine checks the driver's options; it does not connect.
func openEngine(_ context.Context, dsn string, options map[string]string) (source.Source, error) {
	e := &engine{dsn: dsn}
	var unknown []string
	for k, v := range options {
		switch k {
		case OptionPublication:
			e.publication = v
		case OptionSlotName:
			e.slotName = v
		case OptionSetReplicaIdentity:
			e.identity = v
		case optionFollowFailover:
			return nil, &errcode.Error{Code: errcode.ConfigInvalid,
				Message: "--follow-failover is for MySQL-family sources: a PostgreSQL 15 replication slot does not survive a failover",
				Hint:    "After a PostgreSQL failover, take a new full with --chain-slot into a new chain on the promoted server (docs/operations.md, \"After a failover\")."}
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, errcode.New(errcode.ConfigInvalid, "source option(s) %s: the postgres driver takes %s, %s and %s",
			strings.Join(unknown, ", "), OptionPublication, OptionSlotName, OptionSetReplicaIdentity)
	}
	return e, nil
}

func (e *engine) Engine() string { return EngineName }

func (e *engine) Close() {}

// FullBackup is the package's FullBackup with the driver's options: it
// commits the chain's first full itself.
func (e *engine) FullBackup(ctx context.Context, ch *chain.Chain, o source.FullOptions) (*chain.Manifest, error) {
	fo := e.fullOptions(o)
	fo.ChainSlot, fo.SlotName, fo.Publication, fo.SetReplicaIdentity = o.ChainLog, e.slotName, e.publication, e.identity
	if o.OnTableFixed != nil {
		fo.OnReplicaIdentitySet = func(g IdentityGap) { o.OnTableFixed(tableIssue(g)) }
	}
	return FullBackup(ctx, ch, fo)
}

// RotationFull is the package's RotationFull: chunks only, committed by the
// caller.
func (e *engine) RotationFull(ctx context.Context, ch *chain.Chain, o source.FullOptions, src chain.SourceInfo) (*chain.Manifest, func(), error) {
	return RotationFull(ctx, ch, e.fullOptions(o), src)
}

// fullOptions carries what every full takes.
func (e *engine) fullOptions(o source.FullOptions) FullBackupOptions {
	return FullBackupOptions{DSN: e.dsn, Parallel: o.Parallel, ChunkBytes: o.ChunkBytes, AttemptID: o.AttemptID,
		Progress: o.Progress, AfterSnapshot: o.AfterSnapshot, Now: o.Now, Filter: o.Filter}
}

// OpenCapture opens a capture on the chain slot the chain records, reading
// the driver's publication.
func (e *engine) OpenCapture(ctx context.Context, o source.CaptureOptions) (source.Capture, error) {
	if o.Source.Slot == "" {
		return nil, errSlotMissing(nil, "the chain was taken without --chain-slot, so no slot anchors its incrementals")
	}
	co := CaptureOptions{DSN: e.dsn, Slot: o.Source.Slot, Publication: e.publication, Source: o.Source, Owner: o.Owner, Filter: o.Filter}
	if o.OnTakeOver != nil {
		co.OnTakeOver = func(pid int32) { o.OnTakeOver(int64(pid)) }
	}
	c, err := OpenCapture(ctx, co, o.Start, o.Schema)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// tableIssue is an identity gap as the engine-neutral interface reports it.
func tableIssue(g IdentityGap) source.TableIssue {
	return source.TableIssue{Table: g.Table, Why: g.Why, Fails: g.Fails, Fix: g.Fix}
}

func tableIssues(gaps []IdentityGap) []source.TableIssue {
	out := make([]source.TableIssue, len(gaps))
	for i, g := range gaps {
		out[i] = tableIssue(g)
	}
	return out
}
