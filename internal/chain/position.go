package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// brokerPositionPrefix starts the key of every broker's reported position.
const brokerPositionPrefix = ControlPrefix + "position-broker-"

// BrokerPosition is what a broker reports into the chain's store about
// where it stands, so that maintenance (retention) can tell which links a
// broker still needs. The broker's authoritative position lives in its
// target (sluice_cdc_state); this copy only ever lags it.
type BrokerPosition struct {
	// Stream is the broker's --stream-id.
	Stream string `json:"stream"`
	// ChainID is the chain the position belongs to.
	ChainID string `json:"chain_id"`
	// LastApplied is the last link the broker fully applied.
	LastApplied string `json:"last_applied"`
	// UpdatedAt is when the broker last wrote the report.
	UpdatedAt time.Time `json:"updated_at"`
}

// BrokerPositionKey returns the key of stream's reported position,
// "control/position-broker-<stream>".
func BrokerPositionKey(stream string) string { return brokerPositionPrefix + stream }

// PutBrokerPosition writes (or replaces) a broker's reported position.
func (c *Chain) PutBrokerPosition(ctx context.Context, p BrokerPosition) error {
	p.UpdatedAt = NormalizeTime(p.UpdatedAt)
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode broker position: %w", err)
	}
	key := BrokerPositionKey(p.Stream)
	if err := c.store.Put(ctx, key, append(data, '\n')); err != nil {
		return c.unreachable(err, "write", key)
	}
	return nil
}

// BrokerPositions returns every broker position reported into the store,
// sorted by stream. A report that does not parse is returned with its
// stream (from its key) and no link, so a reader treats it as unknown
// rather than ignoring it.
func (c *Chain) BrokerPositions(ctx context.Context) ([]BrokerPosition, error) {
	objs, err := c.store.List(ctx, brokerPositionPrefix)
	if err != nil {
		return nil, c.unreachable(err, "list", brokerPositionPrefix)
	}
	var out []BrokerPosition
	for _, o := range objs {
		stream := strings.TrimPrefix(o.Key, brokerPositionPrefix)
		data, err := blobstore.ReadAll(ctx, c.store, o.Key)
		if errors.Is(err, blobstore.ErrNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, c.unreachable(err, "read", o.Key)
		}
		var p BrokerPosition
		if json.Unmarshal(data, &p) != nil || p.Stream != stream {
			p = BrokerPosition{Stream: stream, UpdatedAt: o.Modified}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out, nil
}

// DeleteBrokerPosition removes a broker's reported position, if any.
func (c *Chain) DeleteBrokerPosition(ctx context.Context, stream string) error {
	key := BrokerPositionKey(stream)
	if err := c.store.Delete(ctx, key); err != nil {
		return c.unreachable(err, "delete", key)
	}
	return nil
}
