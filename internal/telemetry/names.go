package telemetry

// Names of the series sluice exposes on /metrics, as Prometheus sees them.
// Every label takes its values from a fixed, small set: no label ever carries
// a table name, a key, a DSN or a credential. The one operator-chosen label
// is a run's name (its store URL or stream ID).
// docs/operations.md lists them; keep the two in step.
const (
	// MetricWorkerInfo is a gauge fixed at 1 whose labels describe the
	// running worker: version (the build's version) and go_version.
	MetricWorkerInfo = "sluice_worker_info"

	// MetricAdminRequests counts admin endpoint requests by path (one of
	// /livez, /readyz, /metrics, or "other" for any unknown path) and code
	// (the HTTP status answered, e.g. "200", "401", "429").
	MetricAdminRequests = "sluice_admin_requests_total"

	// MetricAdminRateLimitClients is a gauge of the client addresses the admin
	// endpoint's rate limiter tracks right now. A value near its bound means
	// many distinct addresses are calling: the signature of a flood from
	// rotating addresses.
	MetricAdminRateLimitClients = "sluice_admin_ratelimit_clients"
)

// TemporalPrefix starts the name of every series the Temporal SDK reports
// through the worker's client (temporal_request_total,
// temporal_request_latency_seconds, temporal_worker_task_slots_available, …).
const TemporalPrefix = "temporal_"

// instrument names as handed to OpenTelemetry; the Prometheus exporter adds
// the _total suffix to counters.
const (
	instWorkerInfo        = "sluice_worker_info"
	instAdminRequests     = "sluice_admin_requests"
	instAdminRateLimitCli = "sluice_admin_ratelimit_clients"
)
