package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/sluicehq/sluice/internal/seal/awskms/kmstest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// ownKMS is a local-kms emulator of one test, on a port of its own, so the
// test can stop it without disturbing others.
type ownKMS struct {
	t        *testing.T
	bin      string
	addr     string
	data     string
	cmd      *exec.Cmd
	endpoint string
}

func startOwnKMS(t *testing.T) *ownKMS {
	t.Helper()
	bin, err := exec.LookPath("local-kms")
	if err != nil {
		bin = filepath.Join(os.Getenv("HOME"), ".cache", "sluice", "bin", "local-kms")
	}
	if _, err := os.Stat(bin); err != nil {
		testenv.Missing(t, "local-kms at %s (make services builds it)", bin)
	}
	k := &ownKMS{t: t, bin: bin, addr: freePort(), data: t.TempDir()}
	k.endpoint = "http://" + k.addr
	k.start()
	t.Cleanup(k.stop)
	return k
}

func (k *ownKMS) start() {
	k.t.Helper()
	_, port, _ := net.SplitHostPort(k.addr)
	cmd := exec.Command(k.bin)
	cmd.Env = append(os.Environ(), "PORT="+port, "KMS_REGION=us-east-1", "KMS_ACCOUNT_ID=111122223333",
		"KMS_DATA_PATH="+filepath.Join(k.data, "db"), "KMS_SEED_PATH="+filepath.Join(k.data, "no-seed.yaml"))
	log, _ := os.Create(filepath.Join(k.data, "log"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	k.cmd = cmd
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := kmstest.Client(k.endpoint).ListKeys(context.Background(), &kms.ListKeysInput{}); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	k.t.Fatalf("local-kms on %s did not answer", k.addr)
}

func (k *ownKMS) stop() {
	if k.cmd != nil && k.cmd.Process != nil {
		_ = k.cmd.Process.Kill()
		_ = k.cmd.Wait()
		k.cmd = nil
	}
}

// kmsEnv is what a worker needs to call the emulator: any credentials.
var kmsEnv = []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1"}

// A chain whose data keys a KMS wraps: while the KMS is down, a broker that
// must unwrap a key retries, and its verdict is stalled with the cause
// key_service_unreachable (not a crash, not a refusal); once the KMS
// answers again it applies the link and catches up.
func TestKMSStoppedStallsTheBroker(t *testing.T) {
	k := startOwnKMS(t)
	key := kmstest.CreateKey(t, k.endpoint)
	src := testenv.CreateDB(t, "kmssrc")
	dst := testenv.CreateDB(t, "kmsdst")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT i, 'k' || i FROM generate_series(1, 100) i`)
	url := fileChain(t)
	worker := ownWorker(t, fmt.Sprintf("kms-%d", time.Now().UnixNano()%1e6), kmsEnv...)
	q := worker.args
	kf := []string{"--kms-key", key, "--kms-endpoint", k.endpoint}
	stream := fmt.Sprintf("kms-%d", time.Now().UnixNano()%1e6)
	mustSluice(t, q(append([]string{"backup", "full", "--source", testenv.DSN(src), "--target", url, "--chain-slot", "--encrypt"}, kf...)...)...)
	broker := func(flags ...string) {
		mustSluice(t, q(append(append([]string{"sync", "from-backup", "run", "--backup-target", url, "--target", testenv.DSN(dst),
			"--stream-id", stream, "--detach"}, brokerHealthFlags...), append(kf, flags...)...)...)...)
	}
	broker("--reset-target-data", "--yes")
	waitBrokerAt(t, stream, lastIncremental(t, url, nil), 2*time.Minute)
	stopBroker(t, url, stream)

	testenv.Exec(t, src, `INSERT INTO t SELECT i, 'while-down' FROM generate_series(101, 200) i`)
	mustSluice(t, q(append([]string{"backup", "incremental", "--source", testenv.DSN(src), "--target", url, "--encrypt"}, kf...)...)...)
	inc := lastIncremental(t, url, nil)

	// The KMS goes away; the worker starts again, holding no data key.
	k.stop()
	worker.kill()
	worker.restart()
	broker()
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for {
		r := sluice(t, q("sync", "from-backup", "status", "--stream-id", stream, "--json")...)
		var v struct {
			Verdict string `json:"verdict"`
			Cause   string `json:"cause"`
		}
		_ = json.Unmarshal([]byte(r.stdout), &v)
		if v.Verdict == "stalled" && v.Cause == "key_service_unreachable" {
			t.Logf("with the KMS down: %s", r.stdout)
			break
		}
		last = r.String()
		if time.Now().After(deadline) {
			t.Fatalf("the broker did not stall with key_service_unreachable; last status: %s", last)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Still running, nothing of the link applied.
	var n int
	if err := queryInt(t, dst, `SELECT count(*) FROM t`, &n); err != nil || n != 100 {
		t.Fatalf("the target holds %d rows (%v) while the KMS is down", n, err)
	}
	k.start()
	waitBrokerAt(t, stream, inc, 3*time.Minute)
	requireSameRows(t, src, dst)
	stopBroker(t, url, stream)
}
