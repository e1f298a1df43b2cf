// Package activities holds sluice's Temporal activities: thin adapters that
// resolve secrets, open the store and databases, heartbeat progress, and call
// the domain packages under internal/. Everything an activity needs to resume
// lives in durable state, never in workflow memory.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sluicehq/sluice/internal/blobstore"
	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/errcode"
	"github.com/sluicehq/sluice/internal/health"
	"github.com/sluicehq/sluice/internal/keyref"
	"github.com/sluicehq/sluice/internal/producer"
)

// StoreRef names a backup store and how to reach it: its URL and the
// store's options (blobstore.Options), and where the keys of its chain are
// (Trust). It holds no secret (credentials come from each store's own
// configuration chain in the worker; keys are references the worker
// resolves).
type StoreRef struct {
	URL     string            `json:"url"`
	Options blobstore.Options `json:"options,omitempty"`
	// Trust references the keys the chain is sealed, opened, signed and
	// verified with; the zero Ref reads and writes plaintext, unsigned.
	Trust keyref.Ref `json:"trust,omitzero"`
}

// UnmarshalJSON reads a store reference, including one recorded before
// store options existed, whose S3 settings were fields of their own.
func (r *StoreRef) UnmarshalJSON(b []byte) error {
	var in struct {
		URL       string            `json:"url"`
		Options   blobstore.Options `json:"options"`
		Trust     keyref.Ref        `json:"trust"`
		Endpoint  string            `json:"endpoint"`
		Region    string            `json:"region"`
		PathStyle bool              `json:"path_style"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	r.URL, r.Options, r.Trust = in.URL, in.Options, in.Trust
	legacy := map[string]string{blobstore.OptEndpoint: in.Endpoint, blobstore.OptRegion: in.Region}
	if in.PathStyle {
		legacy[blobstore.OptPathStyle] = "true"
	}
	for k, v := range legacy {
		if v == "" {
			continue
		}
		if r.Options == nil {
			r.Options = blobstore.Options{}
		}
		if _, set := r.Options[k]; !set {
			r.Options[k] = v
		}
	}
	return nil
}

// Activities carries the dependencies every activity shares. Register a
// pointer to it with the worker.
type Activities struct {
	// OpenStore opens a backup store; blobstore.Open when nil.
	OpenStore func(ctx context.Context, ref StoreRef) (blobstore.Store, error)
	// Health receives the runs' polls, deliveries and failures; nil ignores them.
	Health *health.Tracker
	// Observe receives store traffic, apply transactions and restored rows
	// for the worker's metrics; nil ignores them.
	Observe Observer
	// HeartbeatInterval is how often long activities heartbeat (default 1s).
	HeartbeatInterval time.Duration

	// manifests and layouts are keyed by the keyring of the handle that
	// read them and their ID: IDs are content-derived, so the caches never
	// go stale, and a manifest read without a key (or with another) never
	// serves a handle that would have refused it or holds another key.
	manifests sync.Map // cacheKey -> *chain.Manifest
	layouts   sync.Map // cacheKey -> *chain.Layout
	// keyrings resolves store references' keys once per process and chain
	// (keyref.Keyrings).
	keyrings keyref.Keyrings
	// catalogs keeps each chain's latest catalog, so polls and windows
	// read only the commits made since (chain.Chain.Refresh).
	catalogs chain.CatalogCache
	// sessions keeps a stream's capture session open between its windows
	// on this worker (producer.Sessions).
	sessions producer.Sessions

	severOnce sync.Once
	sever     *chain.SeverCache
}

// Observer receives the figures behind the worker's traffic metrics. Its
// methods must be safe for concurrent use.
type Observer interface {
	blobstore.Meter
	// ApplyBatch records one committed apply transaction of a broker stream.
	ApplyBatch(stream string, open time.Duration)
	// RowsRestored counts rows a restore copied into a target.
	RowsRestored(n int64)
}

// severCache is the process's cache of incrementals' boundary facts.
func (a *Activities) severCache() *chain.SeverCache {
	a.severOnce.Do(func() { a.sever = chain.NewSeverCache() })
	return a.sever
}

func (a *Activities) openChain(ctx context.Context, ref StoreRef) (*chain.Chain, error) {
	open := a.OpenStore
	if open == nil {
		open = func(ctx context.Context, ref StoreRef) (blobstore.Store, error) {
			return blobstore.Open(ctx, ref.URL, ref.Options)
		}
	}
	s, err := open(ctx, ref)
	if err != nil {
		if _, ok := errcode.As(err); ok {
			return nil, err
		}
		return nil, errcode.Wrap(errcode.ConfigInvalid, err, "open backup store %s", ref.URL)
	}
	if a.Observe != nil {
		s = blobstore.Metered(s, a.Observe)
	}
	ch := chain.Open(s)
	if ref.Trust.IsZero() {
		return ch, nil
	}
	return a.keyrings.Open(ctx, ch, ref.URL, ref.Trust)
}

// cacheKey names a manifest or layout read through a handle with keyring
// kr (nil: none).
type cacheKey struct {
	kr *chain.Keyring
	id string
}

func (a *Activities) manifest(ctx context.Context, ch *chain.Chain, id string) (*chain.Manifest, error) {
	key := cacheKey{ch.Keyring(), id}
	if m, ok := a.manifests.Load(key); ok {
		return m.(*chain.Manifest), nil
	}
	m, err := ch.GetManifest(ctx, id)
	if err != nil {
		return nil, err
	}
	a.manifests.Store(key, m)
	return m, nil
}

// pulse is an activity's heartbeat. Activities start it first thing, so a
// worker that dies while one is still connecting is noticed as soon as one
// that dies later; it records no details until report names the progress.
type pulse struct {
	mu      sync.Mutex
	details func() any
	done    chan struct{}
	exited  chan struct{}
	once    sync.Once
}

// heartbeat records details() (nothing, while details is nil) every
// interval until stop is called, so an activity busy inside one long
// statement still heartbeats and still learns of a cancellation. Every
// activity heartbeats: the workflows give each a heartbeat timeout of
// seconds, which is what lets Temporal retry soon after a worker dies.
func (a *Activities) heartbeat(ctx context.Context, details func() any) *pulse {
	every := a.HeartbeatInterval
	if every <= 0 {
		every = time.Second
	}
	p := &pulse{details: details, done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				select {
				case <-p.done:
					return // the activity is returning: no heartbeat after it
				default:
				}
				p.mu.Lock()
				details := p.details
				p.mu.Unlock()
				if details == nil {
					activity.RecordHeartbeat(ctx)
				} else {
					activity.RecordHeartbeat(ctx, details())
				}
			}
		}
	}()
	return p
}

// report makes every later heartbeat record details().
func (p *pulse) report(details func() any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.details = details
}

// stop returns once no heartbeat can follow: one recorded after the
// activity returned meets a cancelled context and the SDK logs a WARN for
// it, which an idle broker would do on every wait.
func (p *pulse) stop() {
	p.once.Do(func() { close(p.done) })
	<-p.exited
}

// temporalError turns a domain error into what Temporal should see: a coded
// refusal or usage error becomes a non-retryable application error whose type
// is the code; a coded runtime error stays retryable (the retry policy bounds
// it) but keeps its code as the type; a cancellation passes through.
func (a *Activities) temporalError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	e, ok := errcode.As(err)
	if !ok {
		return err
	}
	spec, _ := errcode.Lookup(e.Code)
	if spec.Exit == errcode.ExitUsage || spec.Exit == errcode.ExitRefused {
		a.Health.Refused(string(e.Code))
	}
	opts := temporal.ApplicationErrorOptions{
		NonRetryable: spec.Exit == errcode.ExitUsage || spec.Exit == errcode.ExitRefused,
		Details:      []any{e.HintText()},
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), string(e.Code), opts)
}

// failed tells the health tracker why a run's attempt failed; the cause
// comes from the error's code, whether err is a domain error or already the
// application error an activity returns.
func (a *Activities) failed(k health.Key, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	code := ""
	var app *temporal.ApplicationError
	if e, ok := errcode.As(err); ok {
		code = string(e.Code)
	} else if errors.As(err, &app) {
		code = app.Type()
	}
	a.Health.Failed(k, health.CauseOf(code), err.Error())
}

// runDetails adds a run's health facts and thresholds to an activity's
// heartbeat details, so `status` judges the run as this worker does.
func (a *Activities) runDetails(k health.Key, th health.Thresholds, details map[string]any) map[string]any {
	details["health"] = a.Health.Facts(k)
	details["thresholds"] = th.WithDefaults()
	return details
}

func producerKey(store StoreRef) health.Key { return health.Key{Role: "producer", Name: store.URL} }

func brokerKey(stream string) health.Key { return health.Key{Role: "broker", Name: stream} }

// incrementalAt returns incremental id's manifest and the schema in force
// before it (recorded by its parent or an earlier link of its segment).
func (a *Activities) incrementalAt(ctx context.Context, ch *chain.Chain, id string) (*chain.Manifest, *chain.Schema, error) {
	cat, err := ch.LoadCatalog(ctx)
	if err != nil {
		return nil, nil, err
	}
	m, err := a.manifest(ctx, ch, id)
	if err != nil {
		return nil, nil, err
	}
	if m, err = a.withLayout(ctx, ch, cat, m); err != nil {
		return nil, nil, err
	}
	schema, err := ch.SchemaAt(ctx, cat, m.Parent)
	if err != nil {
		return nil, nil, err
	}
	return m, schema, nil
}

// withLayout applies the layout of m's segment, when the catalog names one
// (a compacted segment): the manifest's chunk references become spans of
// the layout's merged chunks.
func (a *Activities) withLayout(ctx context.Context, ch *chain.Chain, cat *chain.Catalog, m *chain.Manifest) (*chain.Manifest, error) {
	_, si, ok := cat.Find(m.ID)
	if !ok || m.Kind != chain.KindIncremental || cat.Segments[si].Layout == "" {
		return m, nil
	}
	id := cat.Segments[si].Layout
	key := cacheKey{ch.Keyring(), id}
	if l, ok := a.layouts.Load(key); ok {
		return l.(*chain.Layout).Apply(m), nil
	}
	l, err := ch.GetLayout(ctx, id)
	if err != nil {
		return nil, err
	}
	a.layouts.Store(key, l)
	return l.Apply(m), nil
}
