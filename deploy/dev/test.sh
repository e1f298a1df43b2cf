#!/usr/bin/env bash
# Runs every test: formatting and vet, unit tests, workflow tests, and the
# integration tests against the real services that deploy/dev/services.sh
# started. Services are required here: a missing one fails the run.
#
# The integration tests run in SLUICE_TEST_SHARDS (default 5) processes of
# the integration test binary at once, each with its own worker and task
# queue; inside one process tests still run one after another. Shards are
# balanced by each test's duration in integration/testdata/durations.txt (a
# test missing there counts as 10 s). The test binary and the sluice and
# sluice-worker commands it drives are built once for every shard
# (SLUICE_IT_BIN). A test whose doc comment carries the line
# `sluice:exclusive` changes server-wide state and runs alone, after all the
# others. A test whose doc comment carries `sluice:heavy` loads the machine
# (a fault test's live workload, proxies and retries): such tests run one
# after another in a lane of their own beside the shards, so no two of them
# load the machine at once. With arguments (say -run X), the integration
# package runs as one process with those arguments.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}
# shellcheck disable=SC1091
source "$SLUICE_STATE/services.env"
export SLUICE_REQUIRE_SERVICES=1
# The tests' workflows go to a namespace of their own (services.sh creates
# it), so the demo's default namespace stays clean.
export TEMPORAL_NAMESPACE=${SLUICE_TEST_NAMESPACE:-sluice-test}
SHARDS=${SLUICE_TEST_SHARDS:-5}
DURATIONS=integration/testdata/durations.txt

# failures LOG prints, for each test that failed in a verbose go test log,
# its own log lines (each t.Log/t.Fatal's first line, cut to 600 bytes) and
# any panic, so the cause shows even when the log's tail is all worker noise.
failures() {
	awk '
		/^=== RUN   Test/ { split($3, p, "/"); if (p[1] != cur) { cur = p[1]; n = 0 } }
		/^[ \t]+[A-Za-z0-9_]+\.go:[0-9]+: / { if (n < 60) buf[cur, n++] = substr($0, 1, 600) }
		/^panic: / { print }
		/^--- FAIL: Test/ {
			print $0
			for (i = 0; i < n; i++) print buf[$3, i]
			n = 0
		}
	' "$1"
}
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT

phase_start=$SECONDS
phase() { printf '== %s: %ds\n' "$1" $((SECONDS - phase_start)); phase_start=$SECONDS; }

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
phase "gofmt and vet"

# Every package but the integration tests; two at a time (none of them
# changes server-wide settings).
go test -p 2 -count=1 -timeout 15m "$@" $(go list ./... | grep -v '/integration$')
phase "unit and package tests"

if (($# > 0)); then
	go test -count=1 -timeout 40m "$@" ./integration/
	phase "integration tests"
	exit 0
fi

# The integration tests, by name: the exclusive ones apart.
all=$(grep -h '^func Test[A-Za-z0-9_]*(t \*testing.T)' integration/*_test.go | sed -E 's/^func (Test[A-Za-z0-9_]*)\(.*/\1/' | sort)
# marked WORD lists the tests whose doc comment has a line "// sluice:WORD".
marked() {
	awk -v want="// sluice:$1" 'index($0, want) == 1 {x = 1; next} /^\/\// {next} {if (x && $1 == "func") {sub(/\(.*/, "", $2); print $2}; x = 0}' integration/*_test.go | sort
}
exclusive=$(marked exclusive)
heavy=$(marked heavy)
shared=$(comm -23 <(echo "$all") <(sort <(echo "$exclusive") <(echo "$heavy") | grep -v '^$'))

# Longest first, each to the shard with the least work so far.
declare -a load names
for ((k = 0; k < SHARDS; k++)); do load[k]=0 names[k]=""; done
while read -r secs name; do
	best=0
	for ((k = 1; k < SHARDS; k++)); do ((load[k] < load[best])) && best=$k; done
	load[best]=$((load[best] + secs))
	names[best]+="${names[best]:+|}$name"
done < <(for n in $shared; do
	d=$(awk -v n="$n" '$2 == n {printf "%d", $1 + 0.5}' "$DURATIONS" 2>/dev/null)
	echo "${d:-10} $n"
done | sort -rn)

# Build the test binary and the two commands it drives once, rather than
# once per shard (each link of these is seconds of CPU on two cores).
bin=$(mktemp -d)
logs=$(mktemp -d)
trap 'rm -f "$summary"; rm -rf "$bin" "$logs"' EXIT
go build -o "$bin/sluice" ./starter
go build -o "$bin/sluice-worker" ./worker
go test -c -o "$bin/integration.test" ./integration/
export SLUICE_IT_BIN=$bin
# integration_tests ARGS... runs the integration test binary in its package
# directory, as go test would.
integration_tests() { (cd integration && "$bin/integration.test" -test.count=1 "$@"); }
pids=()
for ((k = 0; k < SHARDS; k++)); do
	[[ -n ${names[k]} ]] || continue
	integration_tests -test.timeout 40m -test.v -test.run "^(${names[k]})\$" >"$logs/shard$k.log" 2>&1 &
	pids[k]=$!
done
if [[ -n $heavy ]]; then
	integration_tests -test.timeout 40m -test.v -test.run "^($(echo $heavy | tr ' ' '|'))\$" >"$logs/shard$SHARDS.log" 2>&1 &
	pids[SHARDS]=$!
fi
failed=0
for k in "${!pids[@]}"; do
	if wait "${pids[k]}"; then
		grep -E '^(--- (PASS|SKIP)|ok |PASS$)' "$logs/shard$k.log" || true
	else
		failed=1
		echo "---- integration shard $k failed; its failing tests:"
		failures "$logs/shard$k.log" | tee -a "$summary"
		echo "---- integration shard $k: its log (last 400 lines):"
		tail -n 400 "$logs/shard$k.log"
	fi
done
# What each test took here, for rebalancing integration/testdata/durations.txt.
mkdir -p "$SLUICE_STATE"
cat "$logs"/shard*.log | sed -nE 's/^--- (PASS|FAIL|SKIP): (Test[A-Za-z0-9_]*) \(([0-9.]+)s\)$/\3 \2/p' | sort -rn >"$SLUICE_STATE/integration-durations.txt"
phase "integration tests, $SHARDS shards"
if ((failed != 0)); then
	echo "==== the integration tests that failed, and what they said:"
	cat "$summary"
	exit 1
fi

if [[ -n $exclusive ]]; then
	log=$(mktemp)
	if integration_tests -test.timeout 20m -test.v -test.run "^($(echo $exclusive | tr ' ' '|'))\$" >"$log" 2>&1; then
		grep -E '^(--- (PASS|SKIP)|ok |PASS$)' "$log" || true
		rm -f "$log"
	else
		echo "---- the exclusive integration tests failed; their log (last 400 lines):"
		tail -n 400 "$log"
		echo "==== the exclusive integration tests that failed, and what they said:"
		failures "$log"
		rm -f "$log"
		exit 1
	fi
	phase "exclusive integration tests"
fi
