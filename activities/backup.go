package activities

import (
	"context"
	"fmt"
	"sync"

	"go.temporal.io/sdk/activity"

	"github.com/sluicehq/sluice/internal/credentials"
	pgsource "github.com/sluicehq/sluice/internal/source/postgres"
)

// FullBackupParams are the inputs of the FullBackup activity.
type FullBackupParams struct {
	Store     StoreRef           `json:"store"`
	Source    credentials.DSNRef `json:"source"`
	ChainSlot bool               `json:"chain_slot,omitempty"`
	SlotName  string             `json:"slot_name,omitempty"`
	Parallel  int                `json:"parallel,omitempty"`
	// Publication is ensured before the chain slot is created.
	Publication string `json:"publication,omitempty"`
	// SetReplicaIdentity is what the chain slot's full does about tables the
	// publication would publish without a usable replica identity:
	// "refuse" (the default) or "auto" (pgsource.IdentityRefuse, IdentityAuto).
	SetReplicaIdentity string `json:"set_replica_identity,omitempty"`
}

// FullBackupResult is what a committed full reports: IDs and counts, never data.
type FullBackupResult struct {
	ChainID     string `json:"chain_id"`
	FullID      string `json:"full_id"`
	EndPosition string `json:"end_position"`
	Slot        string `json:"slot,omitempty"`
	Tables      int    `json:"tables"`
	Rows        int64  `json:"rows"`
	StoredBytes int64  `json:"stored_bytes"`
	// ReplicaIdentitySet lists the tables whose replica identity this full
	// set (--set-replica-identity auto), each with the statement it ran.
	ReplicaIdentitySet []pgsource.IdentityGap `json:"replica_identity_set,omitempty"`
}

// FullBackup takes a PostgreSQL full backup and commits it as the first link
// of a new chain. The snapshot cannot outlive the activity, so a retry starts
// over from a new snapshot; the attempt's chunks go to their own folder, which
// nothing names unless the attempt commits.
func (a *Activities) FullBackup(ctx context.Context, p FullBackupParams) (FullBackupResult, error) {
	dsn, err := p.Source.Resolve()
	if err != nil {
		return FullBackupResult{}, a.temporalError(err)
	}
	ch, err := a.openChain(ctx, p.Store)
	if err != nil {
		return FullBackupResult{}, a.temporalError(err)
	}
	info := activity.GetInfo(ctx)
	var mu sync.Mutex
	var last pgsource.Progress
	stop := a.heartbeat(ctx, func() any {
		mu.Lock()
		defer mu.Unlock()
		return last
	})
	defer stop()
	var identitySet []pgsource.IdentityGap
	m, err := pgsource.FullBackup(ctx, ch, pgsource.FullBackupOptions{
		DSN:                dsn,
		ChainSlot:          p.ChainSlot,
		SlotName:           p.SlotName,
		Publication:        p.Publication,
		Parallel:           p.Parallel,
		AttemptID:          fmt.Sprintf("%s-%d", info.WorkflowExecution.RunID, info.Attempt),
		SetReplicaIdentity: p.SetReplicaIdentity,
		OnReplicaIdentitySet: func(g pgsource.IdentityGap) {
			activity.GetLogger(ctx).Info("REPLICA-IDENTITY-SET: gave a published table a usable replica identity, so its updates and deletes keep working",
				"store", p.Store.URL, "table", g.Table, "was", g.Why, "ran", g.Fix)
			identitySet = append(identitySet, g)
		},
		Progress: func(pr pgsource.Progress) {
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
