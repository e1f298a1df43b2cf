#!/usr/bin/env bash
# The fault matrix at scale (make soak): every integration test that
# SIGKILLs workers, every fault test (store, target, source, Temporal;
# TestFaults*) and the MariaDB failover test (one failover per scale step,
# back and forth between two servers), with
# SLUICE_SOAK_SCALE (default 10) times CI's workload and faults, one test
# after another. It prints each test's result as it ends and, at the end, a
# table of every fault class: faults injected, rows compared, rows lost,
# duplicated and wrong (all must be 0), and the longest recovery.
#
# The fault tests log a line per class after comparing the target with the
# source row by row:
#   FAULTS class=C injected=N rows=N lost=N duplicated=N wrong=N longest_recovery=Ds
# The kill tests log "kill N at workload step …" (or "kill N: worker killed
# at workload step …") per SIGKILL and compare
# the target with the source at the end (requireSameRows: any difference
# fails the test), so their rows show as "equal" and their lost, duplicated
# and wrong as 0 when the test passed.
#
# SLUICE_SOAK_RUN replaces the test selection (a go test -run pattern); the
# whole log is kept in $SLUICE_STATE/soak.log (SLUICE_SOAK_LOG).
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}
# shellcheck disable=SC1091
source "$SLUICE_STATE/services.env"
export SLUICE_REQUIRE_SERVICES=1
export SLUICE_SOAK_SCALE=${SLUICE_SOAK_SCALE:-10}
export TEMPORAL_NAMESPACE=${SLUICE_TEST_NAMESPACE:-sluice-test}
log=${SLUICE_SOAK_LOG:-$SLUICE_STATE/soak.log}
run=${SLUICE_SOAK_RUN:-SurvivesWorkerKills|^TestFaults|^TestMariaDBFollowsAFailoverByGTID\$}

status=0
go test -count=1 -timeout 300m -v -run "$run" ./integration/ >"$log" 2>&1 || status=$?
grep -E '^--- (PASS|FAIL|SKIP): Test' "$log" || true

soak_table() {
	awk '
	/^=== RUN   Test/ { split($3, p, "/"); test = p[1] }
	/ kill [0-9]+(: worker killed)? at workload step / { kills[test]++ }
	/ FAULTS class=/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		c = f["class"]
		if (!(c in inj)) order[++n] = c
		inj[c] += f["injected"]; rows[c] += f["rows"]; lost[c] += f["lost"]
		dup[c] += f["duplicated"]; wrong[c] += f["wrong"]
		r = f["longest_recovery"]; sub(/s$/, "", r)
		if (r + 0 > rec[c] + 0) rec[c] = r
	}
	/^--- (PASS|FAIL): Test/ { res[$3] = ($2 == "PASS:") }
	END {
		printf "| fault class | injected | rows compared | lost | duplicated | wrong | longest recovery |\n"
		printf "|---|---|---|---|---|---|---|\n"
		for (i = 1; i <= n; i++) {
			c = order[i]
			printf "| %s | %d | %d | %d | %d | %d | %.1f s |\n", c, inj[c], rows[c], lost[c], dup[c], wrong[c], rec[c]
		}
		total = 0
		for (t in kills) {
			ok = res[t]
			printf "| worker SIGKILL (%s) | %d | %s | %s | %s | %s | - |\n", t, kills[t], ok ? "equal" : "FAILED", ok ? 0 : "?", ok ? 0 : "?", ok ? 0 : "?"
			total += kills[t]
		}
		printf "\nworker SIGKILLs in all: %d\n", total
	}' "$1"
}
echo
echo "fault matrix at SLUICE_SOAK_SCALE=$SLUICE_SOAK_SCALE (log: $log):"
soak_table "$log"
exit "$status"
