package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// storeFault is one class of store fault: the toxics that make it, on the
// proxy between the worker and the store, and how long it lasts.
type storeFault struct {
	class string
	hold  time.Duration
	// cuts says the fault breaks connections (the client opens new ones).
	cuts bool
	on   func(p *faultProxy)
}

// storeFaults are the classes every store runs through, each while the
// producer writes and the broker reads.
var storeFaults = []storeFault{
	// Every answer late, by 300 ms ± 150 ms, and requests by 100 ms.
	{"latency", 4 * time.Second, false, func(p *faultProxy) {
		p.add("lat-down", "latency", "downstream", 1, `{"latency": 300, "jitter": 150}`)
		p.add("lat-up", "latency", "upstream", 1, `{"latency": 100}`)
	}},
	// Half the connections are cut after 1.5 KB of request: uploads (a
	// chunk, a manifest, a catalog generation) break in the middle.
	{"reset_mid_upload", 4 * time.Second, true, func(p *faultProxy) {
		p.add("cut-up", "limit_data", "upstream", 0.5, `{"bytes": 1500}`)
	}},
	// Half the connections are cut after 1.5 KB of answer: downloads break
	// in the middle.
	{"reset_mid_download", 4 * time.Second, true, func(p *faultProxy) {
		p.add("cut-down", "limit_data", "downstream", 0.5, `{"bytes": 1500}`)
	}},
	// Half the connections are reset (RST) 50 ms into their first request.
	{"reset_peer", 4 * time.Second, true, func(p *faultProxy) {
		p.add("rst", "reset_peer", "upstream", 0.5, `{"timeout": 50}`)
	}},
	// Every connection goes silent and is closed after 2 s: requests time out.
	{"timeout", 5 * time.Second, true, func(p *faultProxy) {
		p.add("silence", "timeout", "upstream", 1, `{"timeout": 2000}`)
	}},
	// 24 KB/s each way: a chunk takes seconds to upload or download.
	{"bandwidth", 5 * time.Second, false, func(p *faultProxy) {
		p.add("slow-up", "bandwidth", "upstream", 1, `{"rate": 24}`)
		p.add("slow-down", "bandwidth", "downstream", 1, `{"rate": 24}`)
	}},
}

// The store's network misbehaves while a producer streams a live
// PostgreSQL workload into the chain and a broker applies it (two lanes)
// to a PostgreSQL target: a toxiproxy proxy between the worker and the
// store emulator adds latency, cuts connections in the middle of uploads
// and downloads, resets them, lets them time out and throttles them, one
// class after another (SLUICE_SOAK_SCALE rounds of every class; at scale 1
// the three stores share the classes out, faultsOf). A reader watching the
// chain directly never sees a listed link it cannot read whole,
// verify-chain --chunks is clean afterwards, the run recovers after each
// fault, and the target equals the source row by row.
//
// sluice:heavy — a live workload under faults; run apart from the other
// heavy tests (deploy/dev/test.sh).
func TestFaultsStoreS3(t *testing.T) {
	endpoint := testenv.S3Endpoint(t)
	chainURL, direct := s3Chain(t)
	storeFaultRun(t, "s3", endpoint, chainURL, direct)
}

// TestFaultsStoreGCS is TestFaultsStoreS3 on fake-gcs-server.
//
// sluice:heavy — a live workload under faults; run apart from the other
// heavy tests (deploy/dev/test.sh).
func TestFaultsStoreGCS(t *testing.T) {
	endpoint := gcsEndpoint(t)
	chainURL, direct := gcsChain(t)
	storeFaultRun(t, "gcs", endpoint, chainURL, direct)
}

// TestFaultsStoreAzure is TestFaultsStoreS3 on Azurite.
//
// sluice:heavy — a live workload under faults; run apart from the other
// heavy tests (deploy/dev/test.sh).
func TestFaultsStoreAzure(t *testing.T) {
	endpoint := azureEndpoint(t)
	chainURL, direct := azureChain(t)
	storeFaultRun(t, "azure", endpoint, chainURL, direct)
}

// hostOf returns the host:port of an http:// URL.
func hostOf(t *testing.T, endpoint string) string {
	t.Helper()
	rest := strings.TrimPrefix(strings.TrimPrefix(endpoint, "http://"), "https://")
	host, _, _ := strings.Cut(rest, "/")
	if host == "" {
		t.Fatalf("endpoint %q names no host", endpoint)
	}
	return host
}

// storeOrder numbers the stores for faultsOf.
var storeOrder = map[string]int{"s3": 0, "gcs": 1, "azure": 2}

// faultsOf returns the store faults a store runs through at the current
// scale: every class at soak scale (SLUICE_SOAK_SCALE above 1), and in CI's
// run (scale 1) a third of them each, so the three stores between them
// meet every class once: s3 latency and reset_peer, gcs reset_mid_upload
// and timeout, azure reset_mid_download and bandwidth.
func faultsOf(store string) []storeFault {
	if soakScale() > 1 {
		return storeFaults
	}
	var out []storeFault
	for i, f := range storeFaults {
		if i%len(storeOrder) == storeOrder[store] {
			out = append(out, f)
		}
	}
	return out
}

// storeFaultRun runs the store faults on a chain at chainURL, whose store
// at endpoint the test reaches with the direct flags and the worker through
// a fault proxy.
func storeFaultRun(t *testing.T, store, endpoint, chainURL string, direct []string) {
	proxy := startFaultProxy(t, "store-"+store, hostOf(t, endpoint))
	via := proxiedFlags(t, direct, endpoint, proxy)
	src := testenv.CreateDB(t, "fsrc"+store)
	testenv.Exec(t, src, workloadSchema)
	dst := testenv.CreateDB(t, "fdst"+store)
	r := newFaultRig(t, "store"+store, faultSource{driver: "postgres", dsn: testenv.DSN(src)}, chainURL, via, direct,
		"postgres", testenv.DSN(dst), 2)
	r.touch = pgTouch(testenv.DSN(src))
	r.start()
	watch := watchChain(r.chain)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rounds := soakScale()
	wl := &workload{db: src, steps: 250 * rounds, bigTx: 20_000, pause: 40 * time.Millisecond}
	done := runLoad(ctx, t, wl, r.touch)
	cutConns := 0
	for round := 0; round < rounds; round++ {
		for _, f := range faultsOf(store) {
			time.Sleep(time.Second) // some writes land between faults
			before := proxy.accepted()
			f.on(proxy)
			time.Sleep(f.hold)
			proxy.clear()
			ended := time.Now()
			opened := proxy.accepted() - before
			if f.cuts {
				cutConns += opened
			}
			took := r.awaitRecovery(ended, 3*time.Minute)
			r.book.injected("store_"+store+"_"+f.class, took)
			t.Logf("%s %s (round %d, workload step %d): %d connections opened through the proxy during the fault; recovered in %s",
				store, f.class, round+1, wl.progress(), opened, took.Round(100*time.Millisecond))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Connections cut by a fault are opened again: none opened while the
	// cutting faults were on means no request met them.
	if cutConns == 0 {
		t.Fatalf("no connection was opened through the proxy while it cut connections: the faults met no store traffic")
	}
	watch.check(t)
	r.finish()
	requireSameRows(t, src, dst)
}
