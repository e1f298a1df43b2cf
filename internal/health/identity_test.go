package health

import (
	"reflect"
	"testing"
	"time"
)

func TestReplicaIdentityGapsReportEachTableOncePerRun(t *testing.T) {
	now := time.Now()
	tr := NewTracker(nil, func() time.Time { return now })
	k := Key{Role: "producer", Name: "file:///c"}
	if fresh := tr.ReplicaIdentityGaps(k, []string{"public.a"}); !reflect.DeepEqual(fresh, []string{"public.a"}) {
		t.Fatalf("first check: want public.a fresh, got %v", fresh)
	}
	if fresh := tr.ReplicaIdentityGaps(k, []string{"public.a", "public.b"}); !reflect.DeepEqual(fresh, []string{"public.b"}) {
		t.Fatalf("second check: want only public.b fresh, got %v", fresh)
	}
	if got := tr.Statuses()[0].TablesWithoutReplicaIdentity; !reflect.DeepEqual(got, []string{"public.a", "public.b"}) {
		t.Fatalf("status lists %v", got)
	}
	// Fixed: the status empties, and the table is not reported again in this run.
	if fresh := tr.ReplicaIdentityGaps(k, nil); len(fresh) != 0 || len(tr.Statuses()[0].TablesWithoutReplicaIdentity) != 0 {
		t.Fatalf("after the fix: fresh %v, status %v", fresh, tr.Statuses()[0].TablesWithoutReplicaIdentity)
	}
	if fresh := tr.ReplicaIdentityGaps(k, []string{"public.a"}); len(fresh) != 0 {
		t.Fatalf("public.a reported twice in one run: %v", fresh)
	}
	// A new run reports it again.
	tr.Ended(k)
	if fresh := tr.ReplicaIdentityGaps(k, []string{"public.a"}); !reflect.DeepEqual(fresh, []string{"public.a"}) {
		t.Fatalf("a new run: want public.a fresh, got %v", fresh)
	}
	var none *Tracker
	if fresh := none.ReplicaIdentityGaps(k, []string{"public.a"}); !reflect.DeepEqual(fresh, []string{"public.a"}) {
		t.Fatalf("a nil tracker: want every table, got %v", fresh)
	}
}
