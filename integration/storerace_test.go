package integration

import (
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/chain"
	"github.com/sluicehq/sluice/internal/testenv"
)

// raceFirstFulls starts two first fulls at once on one new chain of a
// remote store (url, its store flags). The second URL doubles the slash
// before the prefix: it names the same objects but starts a workflow of its
// own (two runs of one URL would be refused by Temporal's workflow ID), so
// only the store's create-only catalog write keeps them apart. Exactly one
// must commit, the other be refused with SLUICE-E-CHAIN-EXISTS (exit 3), and
// the catalog list the winner's one full. It returns the two URLs.
func raceFirstFulls(t *testing.T, url string, flags []string) []string {
	t.Helper()
	scheme, rest, _ := strings.Cut(url, "://")
	root, prefix, _ := strings.Cut(rest, "/")
	urls := []string{url, scheme + "://" + root + "//" + prefix}

	src := testenv.CreateDB(t, "src")
	testenv.Exec(t, src, `CREATE TABLE a (id int PRIMARY KEY, v text);
		INSERT INTO a SELECT i, repeat('v', 100) FROM generate_series(1, 20000) i;`)
	results := make([]result, len(urls))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = sluice(t, append([]string{"backup", "full", "--source", testenv.DSN(src), "--target", u}, flags...)...)
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, r := range results {
		switch {
		case r.exit == 0:
			if winner >= 0 {
				t.Fatalf("both fulls committed:\n%s\n%s", results[0], results[1])
			}
			winner = i
		case r.exit == 3 && strings.Contains(r.stderr, "SLUICE-E-CHAIN-EXISTS"):
			if strings.Contains(r.stderr, "committed to") {
				t.Logf("%s lost the catalog write itself", urls[i])
			} else {
				t.Logf("%s found the chain already committed", urls[i])
			}
		default:
			t.Fatalf("full on %s: want success or SLUICE-E-CHAIN-EXISTS exit 3, got %s", urls[i], r)
		}
	}
	if winner < 0 {
		t.Fatalf("neither full committed:\n%s\n%s", results[0], results[1])
	}
	_, cat := openChainAt(t, url, flags...)
	if n := len(cat.Segments); n != 1 {
		t.Fatalf("catalog lists %d segments, want the winner's one full", n)
	}
	if links := cat.Links(); len(links) != 1 || links[0].Kind != chain.KindFull {
		t.Fatalf("catalog links = %+v, want one full", links)
	}
	return urls
}
