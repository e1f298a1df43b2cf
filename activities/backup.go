package activities

import (
	"context"
	"fmt"
	"os"
	"sync"

	"go.temporal.io/sdk/activity"

	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/filter"
	"github.com/sluicehq/sluice/internal/source"
)

// FullBackupParams are the inputs of the FullBackup activity.
type FullBackupParams struct {
	Store  StoreRef           `json:"store"`
	Source credentials.DSNRef `json:"source"`
	// ChainSlot anchors the chain on a durable position in the source's log
	// (a PostgreSQL replication slot) that incrementals continue from.
	ChainSlot bool `json:"chain_slot,omitempty"`
	Parallel  int  `json:"parallel,omitempty"`
	// SlotName, Publication and SetReplicaIdentity are read from runs
	// recorded before source options existed and never written: new runs
	// carry them in Source.Options (OptionSlotName, OptionPublication,
	// OptionSetReplicaIdentity).
	SlotName           string `json:"slot_name,omitempty"`
	Publication        string `json:"publication,omitempty"`
	SetReplicaIdentity string `json:"set_replica_identity,omitempty"`
	// Filter is what crosses into the chain: table patterns, excluded
	// columns and masks, the mask key by reference only (issue 29).
	Filter filter.Spec `json:"filter,omitzero"`
}

// FullBackupResult is what a committed full reports: IDs and counts, never data.
type FullBackupResult struct {
	ChainID     string `json:"chain_id"`
	FullID      string `json:"full_id"`
	EndPosition string `json:"end_position"`
	Slot        string `json:"slot,omitempty"`
	// Engine is the source engine the chain records (empty in results
	// recorded before it was added: PostgreSQL).
	Engine      string `json:"engine,omitempty"`
	Tables      int    `json:"tables"`
	Rows        int64  `json:"rows"`
	StoredBytes int64  `json:"stored_bytes"`
	// ReplicaIdentitySet lists the tables whose replica identity this full
	// set (--set-replica-identity auto), each with the statement it ran.
	ReplicaIdentitySet []source.TableIssue `json:"replica_identity_set,omitempty"`
}

// FullBackup takes a full backup of the source and commits it as the first
// link of a new chain (Source.FullBackup makes that catalog write itself).
// The snapshot cannot outlive the activity, so a retry starts over from a new
// snapshot; the attempt's chunks go to their own folder, which nothing names
// unless the attempt commits.
func (a *Activities) FullBackup(ctx context.Context, p FullBackupParams) (FullBackupResult, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	src, err := openSource(ctx, p.Source, map[string]string{
		OptionSlotName: p.SlotName, OptionPublication: p.Publication, OptionSetReplicaIdentity: p.SetReplicaIdentity,
	})
	if err != nil {
		return FullBackupResult{}, a.temporalError(err)
	}
	defer src.Close()
	flt, err := filter.Compile(p.Filter, os.LookupEnv)
	if err != nil {
		return FullBackupResult{}, a.temporalError(err)
	}
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return FullBackupResult{}, a.temporalError(err)
	}
	info := activity.GetInfo(ctx)
	var mu sync.Mutex
	var last source.Progress
	hb.report(func() any {
		mu.Lock()
		defer mu.Unlock()
		return last
	})
	var identitySet []source.TableIssue
	m, err := src.FullBackup(ctx, ch, source.FullOptions{
		ChainLog:  p.ChainSlot,
		Parallel:  p.Parallel,
		Filter:    flt,
		AttemptID: fmt.Sprintf("%s-%d", info.WorkflowExecution.RunID, info.Attempt),
		OnTableFixed: func(g source.TableIssue) {
			activity.GetLogger(ctx).Info("REPLICA-IDENTITY-SET: gave a published table a usable replica identity, so its updates and deletes keep working",
				"store", p.Store.URL, "table", g.Table, "was", g.Why, "ran", g.Fix)
			identitySet = append(identitySet, g)
		},
		Progress: func(pr source.Progress) {
			mu.Lock()
			last = pr
			mu.Unlock()
		},
	})
	if err != nil {
		return FullBackupResult{}, a.temporalError(err)
	}
	res := FullBackupResult{
		ChainID:            m.ID,
		FullID:             m.ID,
		EndPosition:        m.EndPosition,
		Slot:               m.Source.Slot,
		Engine:             m.Source.Engine,
		Tables:             len(m.Tables),
		Rows:               m.Rows,
		ReplicaIdentitySet: identitySet,
	}
	for _, t := range m.Tables {
		for _, c := range t.Chunks {
			res.StoredBytes += c.Size
		}
	}
	return res, nil
}
