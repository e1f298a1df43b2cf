package integration

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// noTLSServer accepts connections, answers 'N' to PostgreSQL's TLS request
// (as a server with ssl = off does) and counts the bytes a client sends
// after that: a client that downgrades would now send its startup message
// in clear.
type noTLSServer struct {
	ln        net.Listener
	asked     atomic.Int32
	plaintext atomic.Int64
}

func startNoTLSServer(t *testing.T) *noTLSServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &noTLSServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				var req [8]byte
				if _, err := io.ReadFull(c, req[:]); err != nil {
					return
				}
				if binary.BigEndian.Uint32(req[4:]) == 80877103 {
					s.asked.Add(1)
					if _, err := c.Write([]byte{'N'}); err != nil {
						return
					}
				}
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, _ := io.Copy(io.Discard, c)
				s.plaintext.Add(n)
			}(c)
		}
	}()
	return s
}

// A DSN that asks for TLS is never served in clear: a server that refuses
// TLS, and one whose certificate does not verify, are refused with
// SLUICE-E-DB-TLS-REFUSED (exit 3), and no startup message crosses the wire;
// the same server with sslmode=require serves the backup over TLS.
func TestTLSNeverDowngraded(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)`)

	fake := startNoTLSServer(t)
	dsn := "postgres://postgres@" + fake.ln.Addr().String() + "/" + src + "?sslmode=require"
	r := sluice(t, "backup", "full", "--source", dsn, "--target", fileChain(t))
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-DB-TLS-REFUSED") || !strings.Contains(r.stderr, "hint:") {
		t.Fatalf("want SLUICE-E-DB-TLS-REFUSED, exit 3, with a hint; got %s", r)
	}
	t.Logf("refused TLS: %s", r.stderr)
	if fake.asked.Load() == 0 {
		t.Fatal("the client never asked the server for TLS")
	}
	if n := fake.plaintext.Load(); n != 0 {
		t.Fatalf("after the server refused TLS the client sent %d bytes in clear", n)
	}

	// The real server offers TLS with a certificate no CA of ours signed.
	caFile, _, _ := testenv.SelfSignedCert(t, t.TempDir())
	verify := testenv.DSN(src) + "&sslmode=verify-ca&sslrootcert=" + caFile
	if !strings.Contains(testenv.DSN(src), "?") {
		t.Fatalf("test DSN without a query: %s", testenv.DSN(src))
	}
	verify = strings.Replace(verify, "sslmode=disable&", "", 1)
	r = sluice(t, "backup", "full", "--source", verify, "--target", fileChain(t))
	if r.exit != 3 || !strings.Contains(r.stderr, "SLUICE-E-DB-TLS-REFUSED") || !strings.Contains(r.stderr, "did not verify") {
		t.Fatalf("want SLUICE-E-DB-TLS-REFUSED for an unverified certificate, got %s", r)
	}
	t.Logf("unverified certificate: %s", r.stderr)

	require := strings.Replace(testenv.DSN(src), "sslmode=disable", "sslmode=require", 1)
	if !strings.Contains(require, "sslmode=require") {
		t.Fatalf("cannot make a sslmode=require DSN from %s", testenv.DSN(src))
	}
	mustSluice(t, "backup", "full", "--source", require, "--target", fileChain(t))
}
