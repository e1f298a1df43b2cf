# shellcheck shell=bash
# local-kms, an AWS KMS emulator, on port 4599, for the aws-kms data-key
# wrapper's tests (internal/seal/awskms). Sourced by services.sh (which
# calls ensure_local-kms) and by stop-services.sh (which stops the process
# in $SLUICE_STATE/local-kms.pid: its command line names local-kms). Its
# keys live in $SLUICE_STATE/local-kms (a LevelDB), so they survive a
# restart; the tests create the keys they use.
#
# local-kms listens on every interface (it takes a port, not an address);
# the tests reach it on 127.0.0.1.

LOCAL_KMS_MODULE=github.com/nsmithuk/local-kms
LOCAL_KMS_VERSION=v0.0.0-20260228092603-2a5e92d09ab6
LOCAL_KMS_PORT=4599
# stop-services.sh sources this file without services.sh's $HOST.
LOCAL_KMS_HOST=${HOST:-127.0.0.1}
LOCAL_KMS_REGION=us-east-1
LOCAL_KMS_ACCOUNT=111122223333

EXTRA_ENV+="export SLUICE_TEST_KMS_ENDPOINT=http://$LOCAL_KMS_HOST:$LOCAL_KMS_PORT"$'\n'

# The module's main package is its root, so ensure_tool (which builds
# MODULE/cmd/NAME) does not fit; the check is the same.
local_kms_install() {
	local bin=$SLUICE_TOOLS/local-kms
	if [[ -x $bin ]] && go version -m "$bin" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+${LOCAL_KMS_MODULE}[[:space:]]+${LOCAL_KMS_VERSION}([[:space:]]|$)"; then
		return
	fi
	mkdir -p "$SLUICE_TOOLS"
	log "local-kms: building $LOCAL_KMS_MODULE@$LOCAL_KMS_VERSION into $SLUICE_TOOLS (first run only)"
	(cd / && env -u GOFLAGS GOBIN="$SLUICE_TOOLS" go install "$LOCAL_KMS_MODULE@$LOCAL_KMS_VERSION") ||
		die "local-kms: go install $LOCAL_KMS_MODULE@$LOCAL_KMS_VERSION failed"
	log "local-kms: built $bin"
}

# local_kms_answers: a ListKeys call (the KMS JSON protocol; the emulator
# checks no signature) answers 200.
local_kms_answers() {
	local code
	code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' -X POST \
		-H 'Content-Type: application/x-amz-json-1.1' -H 'X-Amz-Target: TrentService.ListKeys' \
		--data '{}' "http://$LOCAL_KMS_HOST:$LOCAL_KMS_PORT/") || true
	[[ $code == 200 ]]
}

ensure_local-kms() {
	local pidfile=$SLUICE_STATE/local-kms.pid logfile=$SLUICE_STATE/logs/local-kms.log data=$SLUICE_STATE/local-kms
	local_kms_install
	if listening "$LOCAL_KMS_HOST" "$LOCAL_KMS_PORT" || pid_alive "$pidfile" local-kms; then
		wait_for "$WAIT_SECONDS" local_kms_answers ||
			die "local-kms: something holds $LOCAL_KMS_HOST:$LOCAL_KMS_PORT but does not answer a KMS ListKeys call"
		log "local-kms: already running on $LOCAL_KMS_HOST:$LOCAL_KMS_PORT"
		return
	fi
	mkdir -p "$data" "$SLUICE_STATE/logs"
	# KMS_SEED_PATH names a file that is not there, so no seed file
	# elsewhere on the machine (the default is /init/seed.yaml) adds keys.
	local envs=(PORT="$LOCAL_KMS_PORT" KMS_REGION="$LOCAL_KMS_REGION" KMS_ACCOUNT_ID="$LOCAL_KMS_ACCOUNT"
		KMS_DATA_PATH="$data/db" KMS_SEED_PATH="$data/no-seed.yaml")
	printf '\n=== %s local-kms %s\n' "$(date -u +%FT%TZ)" "${envs[*]}" >>"$logfile"
	setsid nohup env "${envs[@]}" "$SLUICE_TOOLS/local-kms" </dev/null >>"$logfile" 2>&1 &
	echo $! >"$pidfile"
	if ! wait_for "$WAIT_SECONDS" local_kms_answers; then
		tail -n 30 "$logfile" >&2
		die "local-kms: did not answer on $LOCAL_KMS_HOST:$LOCAL_KMS_PORT within ${WAIT_SECONDS}s (log: $logfile)"
	fi
	log "local-kms: started on http://$LOCAL_KMS_HOST:$LOCAL_KMS_PORT (region $LOCAL_KMS_REGION, account $LOCAL_KMS_ACCOUNT), keys in $data/db (pid $(<"$pidfile"), log $logfile)"
}
