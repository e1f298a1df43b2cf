package activities

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/credentials"
	"github.com/sluicehq/sluice/internal/dur"
	"github.com/sluicehq/sluice/internal/verify"
)

// VerifyParams name the two databases a comparison reads and how.
type VerifyParams struct {
	Source credentials.DSNRef `json:"source"`
	Target credentials.DSNRef `json:"target"`
	Depth  verify.Depth       `json:"depth"`
	Filter verify.Filter      `json:"filter,omitzero"`
	// MaxRows bounds the differing rows named per table at rows depth.
	MaxRows int `json:"max_rows,omitempty"`
}

// VerifyProgress is the heartbeat of VerifyTables.
type VerifyProgress struct {
	TablesDone  int    `json:"tables_done"`
	TablesTotal int    `json:"tables_total"`
	Table       string `json:"table,omitempty"`
}

// VerifyTables compares the source with the target, each read in one
// snapshot; the outcome names every table that differs. A retry compares
// afresh.
func (a *Activities) VerifyTables(ctx context.Context, p VerifyParams) (verify.Outcome, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	src, err := openSource(ctx, p.Source, nil)
	if err != nil {
		return verify.Outcome{}, a.temporalError(err)
	}
	defer src.Close()
	dst, err := openTarget(ctx, p.Target)
	if err != nil {
		return verify.Outcome{}, a.temporalError(err)
	}
	defer dst.Close(context.Background())
	var mu sync.Mutex
	var prog VerifyProgress
	hb.report(func() any { mu.Lock(); defer mu.Unlock(); return prog })
	out, err := verify.Run(ctx, src, dst, verify.Options{Depth: p.Depth, Filter: p.Filter, MaxRows: p.MaxRows, Progress: func(done, total int, table string) {
		mu.Lock()
		prog = VerifyProgress{TablesDone: done, TablesTotal: total, Table: table}
		mu.Unlock()
	}})
	return out, a.temporalError(err)
}

// WaitBrokerParams ask to wait until a broker applied its chain's tip.
type WaitBrokerParams struct {
	Store   StoreRef           `json:"store"`
	Target  credentials.DSNRef `json:"target"`
	Stream  string             `json:"stream"`
	Timeout dur.Duration       `json:"timeout"`
}

// WaitBrokerAtTip polls the broker's position in its target until it has
// applied the chain's newest incremental as of the start, heartbeating
// where it stands.
func (a *Activities) WaitBrokerAtTip(ctx context.Context, p WaitBrokerParams) (verify.BrokerAt, error) {
	hb := a.heartbeat(ctx, nil)
	defer hb.stop()
	ch, tgt, err := a.chainAndTarget(ctx, p.Store, p.Target)
	if err != nil {
		return verify.BrokerAt{}, a.temporalError(err)
	}
	defer tgt.Close(context.Background())
	var mu sync.Mutex
	var at verify.BrokerAt
	hb.report(func() any { mu.Lock(); defer mu.Unlock(); return at })
	res, err := verify.WaitBroker(ctx, ch, tgt.State(), p.Stream, p.Timeout.D(), time.Second, func(b verify.BrokerAt) {
		mu.Lock()
		at = b
		mu.Unlock()
	})
	return res, a.temporalError(err)
}
