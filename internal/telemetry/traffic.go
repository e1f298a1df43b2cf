package telemetry

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sluicehq/sluice/internal/chain"
)

// Traffic series, as Prometheus sees them. kind is "chunk" for the chunks of
// fulls and incrementals and "metadata" for everything else the chain holds
// (catalog generations, manifests, stop markers).
const (
	// MetricStoreWritten counts the bytes this worker wrote to backup stores.
	MetricStoreWritten = "sluice_store_written_bytes_total"
	// MetricStoreRead counts the bytes this worker read from backup stores.
	MetricStoreRead = "sluice_store_read_bytes_total"
	// MetricStoreFetch is a histogram of the time to fetch one object, from
	// the request to the last byte read.
	MetricStoreFetch = "sluice_store_fetch_seconds"
	// MetricApplyBatch is a histogram of how long each of a broker's apply
	// transactions stayed open, from begin to commit (labels role, name).
	MetricApplyBatch = "sluice_apply_batch_seconds"
	// MetricRestoreRows counts the rows restores copied into targets
	// (`sluice restore` and a broker's cold start).
	MetricRestoreRows = "sluice_restore_rows_total"
)

// instrument names as handed to OpenTelemetry; the exporter adds _total to
// counters and _seconds to instruments measured in seconds.
const (
	instStoreWritten = "sluice_store_written_bytes"
	instStoreRead    = "sluice_store_read_bytes"
	instStoreFetch   = "sluice_store_fetch"
	instApplyBatch   = "sluice_apply_batch"
	instRestoreRows  = "sluice_restore_rows"
)

// traffic holds the instruments of the traffic series.
type traffic struct {
	written, read, rows metric.Int64Counter
	fetch, batch        metric.Float64Histogram
}

func (t *Telemetry) registerTraffic() error {
	var err error
	tr := &t.traffic
	if tr.written, err = t.meter.Int64Counter(instStoreWritten,
		metric.WithDescription("Bytes written to backup stores, by kind (chunk, metadata).")); err != nil {
		return err
	}
	if tr.read, err = t.meter.Int64Counter(instStoreRead,
		metric.WithDescription("Bytes read from backup stores, by kind (chunk, metadata).")); err != nil {
		return err
	}
	if tr.rows, err = t.meter.Int64Counter(instRestoreRows,
		metric.WithDescription("Rows restores copied into targets.")); err != nil {
		return err
	}
	if tr.fetch, err = t.meter.Float64Histogram(instStoreFetch, metric.WithUnit("s"),
		metric.WithDescription("Time to fetch one object from a backup store, request to last byte, by kind.")); err != nil {
		return err
	}
	if tr.batch, err = t.meter.Float64Histogram(instApplyBatch, metric.WithUnit("s"),
		metric.WithDescription("How long each broker apply transaction stayed open, begin to commit.")); err != nil {
		return err
	}
	return nil
}

func kindOf(key string) attribute.KeyValue {
	if strings.HasPrefix(key, chain.DataPrefix) {
		return attribute.String("kind", "chunk")
	}
	return attribute.String("kind", "metadata")
}

// Wrote counts an object written to a backup store (blobstore.Meter).
func (t *Telemetry) Wrote(key string, n int64) {
	t.traffic.written.Add(context.Background(), n, metric.WithAttributes(kindOf(key)))
}

// Fetched counts an object read from a backup store and its fetch time
// (blobstore.Meter).
func (t *Telemetry) Fetched(key string, n int64, d time.Duration) {
	kind := metric.WithAttributes(kindOf(key))
	t.traffic.read.Add(context.Background(), n, kind)
	t.traffic.fetch.Record(context.Background(), d.Seconds(), kind)
}

// ApplyBatch records one committed apply transaction of a broker stream.
func (t *Telemetry) ApplyBatch(stream string, open time.Duration) {
	t.traffic.batch.Record(context.Background(), open.Seconds(), metric.WithAttributes(
		attribute.String("role", "broker"), attribute.String("name", stream)))
}

// RowsRestored counts rows a restore copied.
func (t *Telemetry) RowsRestored(n int64) {
	t.traffic.rows.Add(context.Background(), n)
}
