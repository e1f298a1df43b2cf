package integration

import (
	"crypto/rand"
	"encoding/base64"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// With --payload-key-env on starter and worker, workflow inputs and results
// are stored encrypted: the history does not hold the source DSN in clear,
// and the run still succeeds end to end.
func TestEncryptedPayloads(t *testing.T) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	env := []string{"SLUICE_IT_PAYLOAD_KEY=" + base64.StdEncoding.EncodeToString(key), "SLUICE_PAYLOAD_KEY_ENV=SLUICE_IT_PAYLOAD_KEY"}
	w := ownWorker(t, "codec", env...)
	queue, log := w.queue, w.log

	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE secretive (id int PRIMARY KEY, v text); INSERT INTO secretive VALUES (1, 'x');`)
	chainURL := fileChain(t)
	cmd := exec.Command(filepath.Join(h.bin, "sluice"), "--task-queue", queue, "backup", "full", "--source", testenv.DSN(src), "--target", chainURL)
	cmd.Env = append(h.env(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("encrypted backup failed: %v\n%s\nworker:\n%s", err, out, log.String())
	}
	if !strings.Contains(string(out), "committed") {
		t.Fatalf("the starter could not read the encrypted result:\n%s", out)
	}

	cl := temporalClient(t)
	defer cl.Close()
	raw, _ := rawHistory(t, cl, "backup-full/"+chainURL)
	// The workflow ID and search attributes name the store by design; the
	// payloads (the source DSN among them) must not be readable.
	for _, clear := range []string{src, "127.0.0.1:5432"} {
		if strings.Contains(raw, clear) {
			t.Errorf("%q appears in clear in the history", clear)
		}
	}
	if !strings.Contains(raw, "binary/sluice-aes256gcm") {
		t.Error("the history's payloads are not marked as encrypted")
	}
}
