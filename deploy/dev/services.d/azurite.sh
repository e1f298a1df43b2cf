# shellcheck shell=bash
# Azurite, Microsoft's Azure Storage emulator (its blob service only), on
# 127.0.0.1:10000, for the azblob:// store's tests. Sourced by services.sh
# (which calls ensure_azurite) and by stop-services.sh (which stops the
# process in $SLUICE_STATE/azurite.pid: its command line names azurite).

AZURITE_VERSION=3.35.0
AZURITE_PORT=10000
# Azurite's single built-in account and its well-known development key, as
# Microsoft documents them for the emulator: not a secret.
AZURITE_ACCOUNT=devstoreaccount1
AZURITE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

EXTRA_ENV+="export SLUICE_TEST_AZURE_ENDPOINT=http://127.0.0.1:$AZURITE_PORT/$AZURITE_ACCOUNT"$'\n'
EXTRA_ENV+="export SLUICE_TEST_AZURE_ACCOUNT=$AZURITE_ACCOUNT"$'\n'
EXTRA_ENV+="export AZURITE_ACCOUNT_KEY='$AZURITE_KEY'"$'\n'

# azurite_answers: the blob service answers HTTP (any status) on its port.
azurite_answers() {
	local code
	code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://$HOST:$AZURITE_PORT/$AZURITE_ACCOUNT?comp=list") || true
	[[ $code =~ ^[1-5][0-9][0-9]$ ]]
}

# ensure_azurite_installed puts azurite@$AZURITE_VERSION under
# $SLUICE_TOOLS/azurite with npm, once.
ensure_azurite_installed() {
	local prefix=$SLUICE_TOOLS/azurite have
	have=$(node -p "require('$prefix/node_modules/azurite/package.json').version" 2>/dev/null) || true
	if [[ $have == "$AZURITE_VERSION" && -x $prefix/node_modules/.bin/azurite-blob ]]; then
		return
	fi
	command -v npm >/dev/null || die "azurite: npm is not installed (Azurite is a Node.js program)"
	mkdir -p "$prefix"
	log "azurite: installing azurite@$AZURITE_VERSION into $prefix with npm (first run only)"
	npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" >/dev/null ||
		die "azurite: npm install azurite@$AZURITE_VERSION failed"
}

ensure_azurite() {
	local pidfile=$SLUICE_STATE/azurite.pid logfile=$SLUICE_STATE/logs/azurite.log data=$SLUICE_STATE/azurite
	if listening "$HOST" "$AZURITE_PORT" || pid_alive "$pidfile" azurite; then
		wait_for "$WAIT_SECONDS" azurite_answers ||
			die "azurite: something holds $HOST:$AZURITE_PORT but does not answer HTTP"
		log "azurite: already running on $HOST:$AZURITE_PORT"
		return
	fi
	ensure_azurite_installed
	mkdir -p "$data" "$SLUICE_STATE/logs"
	# --skipApiVersionCheck: the Go SDK may speak a newer API version than
	# this Azurite knows; --disableTelemetry: no calls to the internet.
	local args=(--blobHost "$HOST" --blobPort "$AZURITE_PORT" --skipApiVersionCheck --disableTelemetry
		--location "$data" --silent)
	printf '\n=== %s azurite-blob %s\n' "$(date -u +%FT%TZ)" "${args[*]}" >>"$logfile"
	setsid nohup "$SLUICE_TOOLS/azurite/node_modules/.bin/azurite-blob" "${args[@]}" </dev/null >>"$logfile" 2>&1 &
	echo $! >"$pidfile"
	if ! wait_for "$WAIT_SECONDS" azurite_answers; then
		tail -n 30 "$logfile" >&2
		die "azurite: did not answer on $HOST:$AZURITE_PORT within ${WAIT_SECONDS}s (log: $logfile)"
	fi
	log "azurite: started on http://$HOST:$AZURITE_PORT/$AZURITE_ACCOUNT, data in $data (pid $(<"$pidfile"), log $logfile)"
}
