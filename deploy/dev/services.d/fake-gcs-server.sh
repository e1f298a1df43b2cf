# shellcheck shell=bash
# fake-gcs-server: a Google Cloud Storage emulator (JSON API, in memory) on
# 127.0.0.1:4443, for the gs:// store's tests. Sourced by services.sh and
# stop-services.sh (see README.md in this folder).

FAKE_GCS_MODULE=github.com/fsouza/fake-gcs-server
FAKE_GCS_VERSION=v1.56.0
FAKE_GCS_PORT=4443
# stop-services.sh sources this file without services.sh's $HOST.
FAKE_GCS_HOST=${HOST:-127.0.0.1}

EXTRA_ENV+="export SLUICE_TEST_GCS_ENDPOINT=http://$FAKE_GCS_HOST:$FAKE_GCS_PORT"$'\n'
EXTRA_ENV+="export STORAGE_EMULATOR_HOST=$FAKE_GCS_HOST:$FAKE_GCS_PORT"$'\n'

# The module's main package is its root, so ensure_tool (which builds
# MODULE/cmd/NAME) does not fit; the check is the same.
fake_gcs_install() {
	local bin=$SLUICE_TOOLS/fake-gcs-server
	if [[ -x $bin ]] && go version -m "$bin" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+${FAKE_GCS_MODULE}[[:space:]]+${FAKE_GCS_VERSION}([[:space:]]|$)"; then
		return
	fi
	mkdir -p "$SLUICE_TOOLS"
	log "fake-gcs-server: building $FAKE_GCS_MODULE@$FAKE_GCS_VERSION into $SLUICE_TOOLS (first run only)"
	(cd / && env -u GOFLAGS GOBIN="$SLUICE_TOOLS" go install "$FAKE_GCS_MODULE@$FAKE_GCS_VERSION") ||
		die "fake-gcs-server: go install $FAKE_GCS_MODULE@$FAKE_GCS_VERSION failed"
	log "fake-gcs-server: built $bin"
}

fake_gcs_answers() {
	local code
	code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://$FAKE_GCS_HOST:$FAKE_GCS_PORT/storage/v1/b") || true
	[[ $code == 200 ]]
}

ensure_fake-gcs-server() {
	local pidfile=$SLUICE_STATE/fake-gcs-server.pid logfile=$SLUICE_STATE/logs/fake-gcs-server.log
	fake_gcs_install
	if listening "$FAKE_GCS_HOST" "$FAKE_GCS_PORT" || pid_alive "$pidfile" fake-gcs-server; then
		wait_for "$WAIT_SECONDS" fake_gcs_answers ||
			die "fake-gcs-server: something holds $FAKE_GCS_HOST:$FAKE_GCS_PORT but does not answer GET /storage/v1/b"
		log "fake-gcs-server: already running on $FAKE_GCS_HOST:$FAKE_GCS_PORT"
		return
	fi
	local args=(-scheme http -backend memory -host "$FAKE_GCS_HOST" -port "$FAKE_GCS_PORT"
		-public-host "$FAKE_GCS_HOST:$FAKE_GCS_PORT" -external-url "http://$FAKE_GCS_HOST:$FAKE_GCS_PORT" -log-level warn)
	printf '\n=== %s fake-gcs-server %s\n' "$(date -u +%FT%TZ)" "${args[*]}" >>"$logfile"
	setsid nohup "$SLUICE_TOOLS/fake-gcs-server" "${args[@]}" </dev/null >>"$logfile" 2>&1 &
	echo $! >"$pidfile"
	if ! wait_for "$WAIT_SECONDS" fake_gcs_answers; then
		tail -n 30 "$logfile" >&2
		die "fake-gcs-server: did not answer on $FAKE_GCS_HOST:$FAKE_GCS_PORT within ${WAIT_SECONDS}s (log: $logfile)"
	fi
	log "fake-gcs-server: started on http://$FAKE_GCS_HOST:$FAKE_GCS_PORT, data in memory (pid $(<"$pidfile"), log $logfile)"
}
