#!/usr/bin/env bash
# Runs every test: formatting and vet, unit tests, workflow tests, and the
# integration tests against the real services that deploy/dev/services.sh
# started. Services are required here: a missing one fails the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}
# shellcheck disable=SC1091
source "$SLUICE_STATE/services.env"
export SLUICE_REQUIRE_SERVICES=1

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
# Packages run one at a time: some integration tests change server-wide
# settings (max_slot_wal_keep_size) that must not meet another package's slots.
go test -p 1 -count=1 -timeout 25m "$@" ./...
