#!/usr/bin/env bash
# Brings up everything sluice's demo and tests talk to, on this machine:
#   - PostgreSQL with logical decoding (wal_level=logical) and a password rule
#     for the sluice_pw_user test role,
#   - MariaDB with its binlog on in ROW format,
#   - a Temporal dev server (with its Web UI) on 127.0.0.1:7233 / :8233,
#   - versitygw, an S3-compatible server, on 127.0.0.1:7070,
#   - promtool (Debian's, unpacked), to check the shipped alert rules,
#   - systemd-analyze (Debian's systemd package), to check the shipped unit.
# It is idempotent: what is already right is left alone, nothing is started
# twice, and a database is restarted only when one of its settings changed.
# Temporal and versitygw run detached; deploy/dev/stop-services.sh stops them.
# The exports tests need are written to $SLUICE_STATE/services.env.
set -euo pipefail

SLUICE_TOOLS=${SLUICE_TOOLS:-$HOME/.cache/sluice/bin}
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}

TEMPORAL_MODULE=github.com/temporalio/cli
TEMPORAL_VERSION=v1.5.1
VERSITYGW_MODULE=github.com/versity/versitygw
VERSITYGW_VERSION=v1.8.0

HOST=127.0.0.1
TEMPORAL_PORT=7233
TEMPORAL_UI_PORT=8233
S3_PORT=7070
S3_ACCESS_KEY=sluice
S3_SECRET_KEY=sluice-dev-secret
PG_PORT=5432
PG_HBA_LINE="host all sluice_pw_user 127.0.0.1/32 scram-sha-256"
MARIADB_SNIPPET_DIR=/etc/mysql/mariadb.conf.d
MARIADB_SNIPPET=$MARIADB_SNIPPET_DIR/60-sluice-binlog.cnf
WAIT_SECONDS=${SLUICE_SERVICES_WAIT:-60}

log() { printf '%s\n' "$*"; }
die() {
	printf 'services: error: %s\n' "$*" >&2
	exit 1
}

# listening HOST PORT: true when something accepts TCP connections there.
listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# pid_alive FILE NAME: true when FILE names a running process whose command
# line mentions NAME (so a stale file whose pid was reused does not count).
pid_alive() {
	local pid
	[[ -s $1 ]] || return 1
	pid=$(<"$1")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$2"
}

# wait_for SECONDS COMMAND...: polls COMMAND every half second until it
# succeeds (true) or SECONDS pass (false).
wait_for() {
	local seconds=$1
	shift
	local deadline=$((SECONDS + seconds))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || return 1
		sleep 0.5
	done
}

# ---------------------------------------------------------------- tools

# ensure_tool NAME MODULE VERSION: builds $SLUICE_TOOLS/NAME with go install
# unless a binary of that module version is already there.
ensure_tool() {
	local name=$1 module=$2 version=$3 bin=$SLUICE_TOOLS/$1
	if [[ -x $bin ]] && go version -m "$bin" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+${module}[[:space:]]+${version}([[:space:]]|$)"; then
		return
	fi
	mkdir -p "$SLUICE_TOOLS"
	log "$name: building $module@$version into $SLUICE_TOOLS (first run only; this can take ten minutes)"
	(cd / && env -u GOFLAGS GOBIN="$SLUICE_TOOLS" go install "$module/cmd/$name@$version") ||
		die "$name: go install $module/cmd/$name@$version failed"
	log "$name: built $bin"
}

# ensure_promtool puts Debian's promtool (from the prometheus package, taken
# apart rather than installed, so no Prometheus server is set up or started)
# into $SLUICE_TOOLS: the tests check the shipped alert rules with it.
ensure_promtool() {
	local bin=$SLUICE_TOOLS/promtool tmp
	if [[ -x $bin ]] && "$bin" --version >/dev/null 2>&1; then
		return
	fi
	mkdir -p "$SLUICE_TOOLS"
	log "promtool: unpacking it from Debian's prometheus package"
	tmp=$(mktemp -d)
	(cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null 2>&1; }; }) ||
		{ rm -rf "$tmp"; die "promtool: apt-get download prometheus failed"; }
	dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x" || { rm -rf "$tmp"; die "promtool: cannot unpack the package"; }
	install -m 0755 "$tmp/x/usr/bin/promtool" "$bin"
	rm -rf "$tmp"
	log "promtool: $("$bin" --version 2>&1 | head -n 1)"
}

# ensure_systemd_analyze installs Debian's systemd package when systemd-analyze
# is missing: the tests verify deploy/systemd's unit with it. In a container
# it only adds files; nothing is started or switched to systemd.
ensure_systemd_analyze() {
	command -v systemd-analyze >/dev/null && return
	log "systemd-analyze: installing Debian's systemd package"
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null; } ||
		die "systemd-analyze: apt-get install systemd failed"
}

# ---------------------------------------------------------------- PostgreSQL

pg_version() {
	local v
	v=$(find /etc/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort -V | tail -n 1)
	[[ -n $v ]] || die "postgres: no cluster under /etc/postgresql"
	printf '%s' "$v"
}

psql_() { psql -h "$HOST" -p "$PG_PORT" -U postgres -d postgres -XAtq -v ON_ERROR_STOP=1 "$@"; }

pg_ready() { pg_isready -h "$HOST" -p "$PG_PORT" -q; }

wait_pg() {
	wait_for "$WAIT_SECONDS" pg_ready || die "postgres: not accepting connections on $HOST:$PG_PORT after ${WAIT_SECONDS}s"
	# pg_isready can answer while the cluster still refuses logins.
	wait_for "$WAIT_SECONDS" psql_ -c 'SELECT 1' || die "postgres: refuses connections as postgres on $HOST:$PG_PORT"
}

# pg_setting_ok NAME WANT: the running value is WANT (for wal_level) or at
# least WANT (for the numeric settings).
pg_setting_ok() {
	local cur
	cur=$(psql_ -c "SELECT setting FROM pg_settings WHERE name = '$1'")
	if [[ $2 =~ ^[0-9]+$ ]]; then
		[[ $cur =~ ^[0-9]+$ ]] && ((cur >= $2))
	else
		[[ $cur == "$2" ]]
	fi
}

ensure_postgres() {
	local ver restart=0 name want hba
	ver=$(pg_version)
	if ! pg_ready; then
		log "postgres: starting cluster $ver/main"
		pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
	fi
	wait_pg

	for setting in wal_level=logical max_replication_slots=20 max_wal_senders=20; do
		name=${setting%%=*}
		want=${setting#*=}
		if pg_setting_ok "$name" "$want"; then
			log "postgres: $name already $(psql_ -c "SHOW $name")"
		else
			psql_ -c "ALTER SYSTEM SET $name = '$want'"
			log "postgres: $name set to $want (was $(psql_ -c "SHOW $name"))"
			restart=1
		fi
	done

	# An interrupted slot-invalidation test can leave a tiny WAL allowance
	# for slots behind (ALTER SYSTEM survives restarts); it would invalidate
	# every later chain slot. Slots keep all the WAL they need here.
	if [[ $(psql_ -c 'SHOW max_slot_wal_keep_size') != -1 ]]; then
		psql_ -c 'ALTER SYSTEM RESET max_slot_wal_keep_size'
		psql_ -c 'SELECT pg_reload_conf()' >/dev/null
		log "postgres: max_slot_wal_keep_size reset to its default (unlimited)"
	fi

	# A development server keeps no data worth an fsync: its commits still
	# reach the kernel before they return, so a crashed or killed server
	# (the fault tests' restarts) recovers everything, and only a lost
	# machine would lose them. Without the fsyncs and the full-page images
	# after each checkpoint, the tests' bulk loads write less WAL, which
	# every streaming slot of the cluster decodes.
	local tuned=0
	for setting in fsync=off full_page_writes=off max_wal_size=4GB; do
		name=${setting%%=*}
		want=${setting#*=}
		if [[ $(psql_ -c "SHOW $name") == "$want" ]]; then
			continue
		fi
		psql_ -c "ALTER SYSTEM SET $name = '$want'"
		tuned=1
	done
	if ((tuned)); then
		psql_ -c 'SELECT pg_reload_conf()' >/dev/null
		log "postgres: fsync off, full_page_writes off, max_wal_size 4GB (a development server)"
	else
		log "postgres: fsync, full_page_writes and max_wal_size already tuned for development"
	fi

	# TLS on loopback, so the tests can show a DSN asking for TLS gets it
	# (and is refused, never downgraded, where it cannot). ssl reloads.
	if [[ $(psql_ -c 'SHOW ssl') == on ]]; then
		log "postgres: ssl already on"
	else
		local cert=/etc/ssl/certs/ssl-cert-snakeoil.pem key=/etc/ssl/private/ssl-cert-snakeoil.key
		if [[ ! -f $cert || ! -f $key ]]; then
			command -v make-ssl-cert >/dev/null || { apt-get update -qq && apt-get install -y -qq ssl-cert >/dev/null; } ||
				die "postgres: cannot install ssl-cert to make a server certificate"
			make-ssl-cert generate-default-snakeoil
		fi
		psql_ -c "ALTER SYSTEM SET ssl_cert_file = '$cert'"
		psql_ -c "ALTER SYSTEM SET ssl_key_file = '$key'"
		psql_ -c "ALTER SYSTEM SET ssl = 'on'"
		psql_ -c 'SELECT pg_reload_conf()' >/dev/null
		sleep 1
		[[ $(psql_ -c 'SHOW ssl') == on ]] || die "postgres: ssl is still off after a reload (is $key readable by postgres?)"
		log "postgres: ssl turned on with the snakeoil certificate"
	fi

	hba=$(psql_ -c 'SHOW hba_file')
	[[ -f $hba ]] || die "postgres: hba file $hba not found"
	if grep -qxF "$PG_HBA_LINE" "$hba"; then
		log "postgres: pg_hba rule for sluice_pw_user already present"
	else
		# Prepend (rules match top down) and keep the file's owner and mode.
		local tmp
		tmp=$(mktemp)
		{ printf '%s\n' "$PG_HBA_LINE"; cat "$hba"; } >"$tmp"
		cat "$tmp" >"$hba"
		rm -f "$tmp"
		psql_ -c 'SELECT pg_reload_conf()' >/dev/null
		log "postgres: added '$PG_HBA_LINE' to $hba and reloaded"
	fi

	if ((restart)); then
		log "postgres: restarting cluster $ver/main to apply settings"
		pg_ctlcluster --skip-systemctl-redirect "$ver" main restart
		wait_pg
		for setting in wal_level=logical max_replication_slots=20 max_wal_senders=20; do
			pg_setting_ok "${setting%%=*}" "${setting#*=}" ||
				die "postgres: ${setting%%=*} is still $(psql_ -c "SHOW ${setting%%=*}") after restart"
		done
		log "postgres: restarted with wal_level=logical"
	fi
}

# ---------------------------------------------------------------- MariaDB

mariadb_() { mariadb -uroot -N -B "$@"; }

mariadb_up() { mariadb_ -e 'SELECT 1'; }

start_mariadb() {
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
	wait_for "$WAIT_SECONDS" mariadb_up ||
		die "mariadb: not answering after ${WAIT_SECONDS}s (see /var/log/mysql/error.log)"
}

# The binlog settings sluice's MySQL-family source needs; the snippet below
# sets exactly these.
mariadb_binlog_state() {
	mariadb_ -e 'SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@server_id > 0'
}
MARIADB_WANT=$'1\tROW\tFULL\tFULL\t1'

ensure_mariadb() {
	local snippet state
	snippet='# Written by sluice deploy/dev/services.sh: binlog for change data capture.
[mariadbd]
log_bin = mariadb-bin
binlog_format = ROW
binlog_row_image = FULL
binlog_row_metadata = FULL
server_id = 1
# A development server: the redo log reaches the kernel at each commit and
# the disk once a second, so a killed server keeps every commit.
innodb_flush_log_at_trx_commit = 2
'
	mkdir -p "$MARIADB_SNIPPET_DIR"
	if [[ ! -f $MARIADB_SNIPPET || "$(<"$MARIADB_SNIPPET")"$'\n' != "$snippet" ]]; then
		printf '%s' "$snippet" >"$MARIADB_SNIPPET"
		log "mariadb: wrote $MARIADB_SNIPPET"
	fi
	# Debian's stock my.cnf includes the directory; a trimmed one may not.
	if ! grep -qE "^[[:space:]]*!includedir[[:space:]]+$MARIADB_SNIPPET_DIR/?[[:space:]]*$" /etc/mysql/my.cnf; then
		printf '\n!includedir %s/\n' "$MARIADB_SNIPPET_DIR" >>/etc/mysql/my.cnf
		log "mariadb: added !includedir $MARIADB_SNIPPET_DIR/ to /etc/mysql/my.cnf"
	fi

	if ! mariadb_up >/dev/null 2>&1; then
		log "mariadb: starting"
		start_mariadb
	fi
	# Dynamic: a server started before the snippet said so takes it now.
	mariadb_ -e 'SET GLOBAL innodb_flush_log_at_trx_commit = 2'
	state=$(mariadb_binlog_state)
	if [[ $state == "$MARIADB_WANT" ]]; then
		log "mariadb: binlog already on in ROW format"
		return
	fi
	log "mariadb: restarting to turn the binlog on in ROW format (was: ${state//$'\t'/ })"
	mariadb-admin -uroot shutdown
	wait_for "$WAIT_SECONDS" bash -c '! pidof mariadbd' ||
		die "mariadb: still running ${WAIT_SECONDS}s after shutdown"
	start_mariadb
	state=$(mariadb_binlog_state)
	[[ $state == "$MARIADB_WANT" ]] || die "mariadb: binlog settings are '${state//$'\t'/ }' after restart (want '${MARIADB_WANT//$'\t'/ }')"
	log "mariadb: restarted with the binlog on in ROW format"
}

# ---------------------------------------------------------------- Temporal

temporal_() { "$SLUICE_TOOLS/temporal" "$@"; }

temporal_healthy() {
	temporal_ operator cluster health --address "$HOST:$TEMPORAL_PORT" --command-timeout 3s 2>/dev/null | grep -q SERVING
}

SEARCH_ATTRIBUTES=(SluiceStream SluiceChain SluiceRole)
# default is the demo's; make test runs in sluice-test, so the demo's
# namespace does not gather test workflows; the two-site test runs a source
# site and a target site in namespaces of their own.
NAMESPACES=(default sluice-test sluice-site-source sluice-site-target)

# ensure_namespaces creates the namespaces a running server lacks (one
# started before this list grew) and waits until each answers.
ensure_namespaces() {
	local ns created=()
	for ns in "${NAMESPACES[@]}"; do
		temporal_ operator namespace describe --address "$HOST:$TEMPORAL_PORT" --namespace "$ns" --command-timeout 5s >/dev/null 2>&1 && continue
		local out
		if ! out=$(temporal_ operator namespace create --address "$HOST:$TEMPORAL_PORT" --namespace "$ns" --retention 24h --command-timeout 10s 2>&1) &&
			! grep -qi 'already' <<<"$out"; then
			die "temporal: creating namespace $ns: $out"
		fi
		created+=("$ns")
	done
	for ns in "${created[@]}"; do
		wait_for "$WAIT_SECONDS" temporal_ operator search-attribute list --address "$HOST:$TEMPORAL_PORT" --namespace "$ns" --command-timeout 3s ||
			die "temporal: namespace $ns was created but does not answer"
	done
	((${#created[@]} == 0)) || log "temporal: created namespaces ${created[*]}"
}

ensure_search_attributes() {
	local ns have name missing
	for ns in "${NAMESPACES[@]}"; do
		missing=()
		have=$(temporal_ operator search-attribute list --address "$HOST:$TEMPORAL_PORT" --namespace "$ns" --command-timeout 10s) ||
			die "temporal: cannot list the search attributes of namespace $ns"
		for name in "${SEARCH_ATTRIBUTES[@]}"; do
			grep -qw "$name" <<<"$have" || missing+=("$name")
		done
		for name in "${missing[@]}"; do
			local out
			if ! out=$(temporal_ operator search-attribute create --address "$HOST:$TEMPORAL_PORT" --namespace "$ns" \
				--name "$name" --type Keyword --command-timeout 10s 2>&1) && ! grep -qi 'already exist' <<<"$out"; then
				die "temporal: creating search attribute $name in namespace $ns: $out"
			fi
		done
		((${#missing[@]} == 0)) || log "temporal: created search attributes ${missing[*]} in namespace $ns"
	done
	log "temporal: namespaces ${NAMESPACES[*]}, each with search attributes ${SEARCH_ATTRIBUTES[*]}"
}

ensure_temporal() {
	local pidfile=$SLUICE_STATE/temporal.pid logfile=$SLUICE_STATE/logs/temporal.log
	if listening "$HOST" "$TEMPORAL_PORT" || pid_alive "$pidfile" temporal; then
		wait_for "$WAIT_SECONDS" temporal_healthy ||
			die "temporal: something holds $HOST:$TEMPORAL_PORT but does not answer as a Temporal server"
		log "temporal: already running on $HOST:$TEMPORAL_PORT"
		ensure_namespaces
		ensure_search_attributes
		return
	fi
	local args=(server start-dev --ip "$HOST" --port "$TEMPORAL_PORT" --ui-port "$TEMPORAL_UI_PORT"
		--db-filename "$SLUICE_STATE/temporal.db" --log-level warn
		# Write-ahead logging, no fsync: every workflow task, heartbeat and
		# timer is a SQLite commit, and a flush each one made every test
		# wait on the disk. A killed server loses nothing (its writes are
		# in the kernel's cache); a lost machine loses the dev history.
		--sqlite-pragma journal_mode=wal --sqlite-pragma synchronous=off)
	local name
	for name in "${NAMESPACES[@]}"; do
		args+=(--namespace "$name")
	done
	for name in "${SEARCH_ATTRIBUTES[@]}"; do
		args+=(--search-attribute "$name=Keyword")
	done
	printf '\n=== %s temporal %s\n' "$(date -u +%FT%TZ)" "${args[*]}" >>"$logfile"
	# setsid: own session, so the server outlives this shell and its terminal.
	setsid nohup "$SLUICE_TOOLS/temporal" "${args[@]}" </dev/null >>"$logfile" 2>&1 &
	echo $! >"$pidfile"
	if ! wait_for "$WAIT_SECONDS" temporal_healthy; then
		tail -n 30 "$logfile" >&2
		die "temporal: did not become healthy within ${WAIT_SECONDS}s (log: $logfile)"
	fi
	ensure_namespaces
	ensure_search_attributes
	log "temporal: started on $HOST:$TEMPORAL_PORT, UI http://$HOST:$TEMPORAL_UI_PORT (pid $(<"$pidfile"), log $logfile)"
}

# ---------------------------------------------------------------- versitygw

s3_answers() {
	local code
	code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://$HOST:$S3_PORT/") || true
	[[ $code =~ ^[1-5][0-9][0-9]$ ]]
}

ensure_versitygw() {
	local pidfile=$SLUICE_STATE/versitygw.pid logfile=$SLUICE_STATE/logs/versitygw.log data=$SLUICE_STATE/s3
	if listening "$HOST" "$S3_PORT" || pid_alive "$pidfile" versitygw; then
		wait_for "$WAIT_SECONDS" s3_answers ||
			die "versitygw: something holds $HOST:$S3_PORT but does not answer HTTP"
		log "versitygw: already running on $HOST:$S3_PORT"
		return
	fi
	mkdir -p "$data"
	local args=(--access "$S3_ACCESS_KEY" --secret "$S3_SECRET_KEY" --port "$HOST:$S3_PORT" --quiet posix "$data")
	printf '\n=== %s versitygw --port %s posix %s\n' "$(date -u +%FT%TZ)" "$HOST:$S3_PORT" "$data" >>"$logfile"
	setsid nohup "$SLUICE_TOOLS/versitygw" "${args[@]}" </dev/null >>"$logfile" 2>&1 &
	echo $! >"$pidfile"
	if ! wait_for "$WAIT_SECONDS" s3_answers; then
		tail -n 30 "$logfile" >&2
		die "versitygw: did not answer on $HOST:$S3_PORT within ${WAIT_SECONDS}s (log: $logfile)"
	fi
	log "versitygw: started on http://$HOST:$S3_PORT, data in $data (pid $(<"$pidfile"), log $logfile)"
}

# ---------------------------------------------------------------- more servers

# Each file of deploy/dev/services.d defines ensure_<name> for one more
# server (a store emulator, say) and may add "export NAME=value" lines to
# EXTRA_ENV for services.env; SERVICE_PLUGINS lists the names in file order.
SERVICE_PLUGINS=()
EXTRA_ENV=""
for plugin in "$(dirname "${BASH_SOURCE[0]}")"/services.d/*.sh; do
	[[ -e $plugin ]] || continue
	# shellcheck disable=SC1090
	source "$plugin"
	SERVICE_PLUGINS+=("$(basename "$plugin" .sh)")
done

# ---------------------------------------------------------------- env file

write_env() {
	local envfile=$SLUICE_STATE/services.env content
	content="# Written by deploy/dev/services.sh; source it before running sluice's tests.
export TEMPORAL_ADDRESS=$HOST:$TEMPORAL_PORT
export SLUICE_TEST_S3_ENDPOINT=http://$HOST:$S3_PORT
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
export AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
export SLUICE_TEST_PG='postgres://postgres@$HOST:$PG_PORT/postgres?sslmode=disable'
export PATH=\"$SLUICE_TOOLS:\$PATH\"
$EXTRA_ENV"
	if [[ ! -f $envfile || "$(<"$envfile")"$'\n' != "$content" ]]; then
		printf '%s' "$content" >"$envfile"
	fi
	log "env: $envfile"
	printf '%s' "$content" | grep '^export'
}

main() {
	command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
	command -v go >/dev/null || die "go not found (needed to build the Temporal CLI and versitygw)"
	mkdir -p "$SLUICE_STATE/logs"

	ensure_tool temporal "$TEMPORAL_MODULE" "$TEMPORAL_VERSION"
	ensure_tool versitygw "$VERSITYGW_MODULE" "$VERSITYGW_VERSION"
	ensure_promtool
	ensure_systemd_analyze
	ensure_postgres
	ensure_mariadb
	ensure_temporal
	ensure_versitygw
	local p
	for p in "${SERVICE_PLUGINS[@]}"; do
		"ensure_$p"
	done
	write_env
}

# One run at a time (two concurrent runs would both see a free port): rerun
# this script under flock. -o keeps the lock's descriptor out of the script's
# children, so servers started here don't hold the lock after it exits.
if [[ -z ${SLUICE_SERVICES_LOCKED:-} ]]; then
	mkdir -p "$SLUICE_STATE"
	SLUICE_SERVICES_LOCKED=1 exec flock -o -w 900 "$SLUICE_STATE/services.lock" bash "${BASH_SOURCE[0]}" "$@"
fi
main "$@"
