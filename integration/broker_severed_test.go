package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// A finding on a link the broker has not applied refuses the tick before
// anything of it is applied; a finding on a link it already applied is
// logged once per run and the broker goes on.
func TestBrokerSeveredTransactions(t *testing.T) {
	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT i, 'v' || i FROM generate_series(1, 10) i;`)
	base := filepath.Join(t.TempDir(), "base")
	mustSluice(t, "backup", "full", "--source", testenv.DSN(src), "--target", "file://"+base, "--chain-slot")
	fork := func(name string) *sevChain {
		dir := filepath.Join(t.TempDir(), name)
		copyTree(t, base, dir)
		return openSevChain(t, "file://"+dir)
	}
	run := func(s *sevChain, dst, stream string, flags ...string) result {
		return sluice(t, append([]string{"sync", "from-backup", "run", "--backup-target", s.url, "--target", testenv.DSN(dst),
			"--stream-id", stream, "--poll-interval", "300ms"}, flags...)...)
	}

	t.Run("unapplied link refuses", func(t *testing.T) {
		s := fork("unapplied")
		full := s.catalog().Tip().ID
		at := s.tipLSN()
		i1 := s.add(at+0x130, sevTxn(2001, at+0x100, 2001))
		dst := testenv.CreateDB(t, "dst")
		mustSluice(t, "restore", "--backup-target", s.url, "--target", testenv.DSN(dst), "--through", full)
		stream := fmt.Sprintf("sev-a-%d", time.Now().UnixNano()%1e6)
		if r := run(s, dst, stream, "--at-chain-id", full, "--detach"); r.exit != 0 {
			t.Fatal(r)
		}
		waitBrokerAt(t, stream, i1, time.Minute)
		stopBroker(t, s.url, stream)
		// The next incremental delivers the same transaction again (shape B)
		// and adds one more.
		i2 := s.add(at+0x230, sevJoin(sevTxn(2001, at+0x100, 2001), sevTxn(2002, at+0x200, 2002)))
		before := describeRows(t, dst, "public.a")
		r := run(s, dst, stream)
		requireRefusal(t, r, "SLUICE-E-BACKUP-CHAIN-SEVERED-TRANSACTION", i2, "shape B")
		if r.exit != 3 {
			t.Fatalf("want exit 3, got %s", r)
		}
		if after := describeRows(t, dst, "public.a"); after != before {
			t.Fatalf("the refused tick applied something: %s -> %s", before, after)
		}
	})

	t.Run("applied link warns once and goes on", func(t *testing.T) {
		s := fork("applied")
		full := s.catalog().Tip().ID
		at := s.tipLSN()
		// An incremental whose end lies past its last commit (shape C), which
		// an operator asserts the target already holds.
		i1 := s.add(at+0x180, sevTxn(3001, at+0x100, 3001))
		dst := testenv.CreateDB(t, "dst")
		mustSluice(t, "restore", "--backup-target", s.url, "--target", testenv.DSN(dst), "--through", full)
		testenv.Exec(t, dst, `INSERT INTO public.a VALUES (3001, 'inc')`)
		stream := fmt.Sprintf("sev-c-%d", time.Now().UnixNano()%1e6)
		if r := run(s, dst, stream, "--at-chain-id", i1, "--detach"); r.exit != 0 {
			t.Fatal(r)
		}
		i2 := s.add(at+0x230, sevTxn(3002, at+0x200, 3002))
		waitBrokerAt(t, stream, i2, time.Minute)
		i3 := s.add(at+0x330, sevTxn(3003, at+0x300, 3003))
		waitBrokerAt(t, stream, i3, time.Minute)
		stopBroker(t, s.url, stream)
		var n int
		if err := queryInt(t, dst, `SELECT count(*) FROM public.a WHERE id IN (3002, 3003)`, &n); err != nil || n != 2 {
			t.Fatalf("the broker did not go on applying (%d rows, %v)", n, err)
		}
		warns := 0
		for _, l := range strings.Split(h.workerLog.String(), "\n") {
			if strings.Contains(l, "CHAIN-APPLIED-SEVERED-TRANSACTION") && strings.Contains(l, stream) {
				warns++
				if !strings.Contains(l, i1) || !strings.Contains(l, "level=WARN") {
					t.Errorf("the warning should be a WARN naming %s: %s", i1, l)
				}
			}
		}
		if warns != 1 {
			t.Fatalf("want one CHAIN-APPLIED-SEVERED-TRANSACTION warning in the run, got %d", warns)
		}
	})
}
