package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/blobstore"
)

// Roles that have stop markers.
const (
	// RoleProducer is the chain's producer; it has one marker per chain.
	RoleProducer = "producer"
	// RoleBroker is a broker; it has one marker per stream.
	RoleBroker = "broker"
)

// StopMarker asks a run to stop at its next unit-of-work boundary. Its
// presence is what counts; the fields are for the operator.
type StopMarker struct {
	// RequestedAt is when the stop was asked for.
	RequestedAt time.Time `json:"requested_at"`
	// By names who asked (a host or user), if known.
	By string `json:"by,omitempty"`
	// Reason is free text, if given.
	Reason string `json:"reason,omitempty"`
}

// StopMarkerKey returns the key of a stop marker: "control/stop-<role>", or
// "control/stop-<role>-<stream>" when stream is not empty (brokers).
func StopMarkerKey(role, stream string) string {
	if stream == "" {
		return ControlPrefix + "stop-" + role
	}
	return ControlPrefix + "stop-" + role + "-" + stream
}

// PutStopMarker writes (or replaces) the stop marker for role and stream.
func (c *Chain) PutStopMarker(ctx context.Context, role, stream string, m StopMarker) error {
	m.RequestedAt = NormalizeTime(m.RequestedAt)
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode stop marker: %w", err)
	}
	key := StopMarkerKey(role, stream)
	if err := c.store.Put(ctx, key, append(data, '\n')); err != nil {
		return c.unreachable(err, "write", key)
	}
	return nil
}

// GetStopMarker reports whether a stop marker exists for role and stream and
// returns it. A marker whose content does not parse still counts as present
// and is returned with zero fields.
func (c *Chain) GetStopMarker(ctx context.Context, role, stream string) (StopMarker, bool, error) {
	key := StopMarkerKey(role, stream)
	data, err := blobstore.ReadAll(ctx, c.store, key)
	if errors.Is(err, blobstore.ErrNotFound) {
		return StopMarker{}, false, nil
	}
	if err != nil {
		return StopMarker{}, false, c.unreachable(err, "read", key)
	}
	var m StopMarker
	if json.Unmarshal(data, &m) != nil {
		m = StopMarker{}
	}
	return m, true, nil
}

// ClearStopMarker removes the stop marker for role and stream, if any.
func (c *Chain) ClearStopMarker(ctx context.Context, role, stream string) error {
	key := StopMarkerKey(role, stream)
	if err := c.store.Delete(ctx, key); err != nil {
		return c.unreachable(err, "delete", key)
	}
	return nil
}
