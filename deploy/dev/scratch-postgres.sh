#!/usr/bin/env bash
# deploy/dev/scratch-postgres.sh: a throwaway PostgreSQL 15 server of its
# own, for tests that restart a server (a target or a source taken down in
# the middle of a run) without touching the shared one on 127.0.0.1:5432
# that other tests use.
#
#   scratch-postgres.sh start DIR PORT [postgres -c setting...]
#   scratch-postgres.sh stop DIR [fast|immediate]
#
# start: the first time, initdb makes a cluster in DIR/data with trust
# authentication for every local and 127.0.0.1 connection (replication
# included) and the superuser postgres; then the server starts on
# 127.0.0.1:PORT with wal_level=logical, its socket in DIR and its log in
# DIR/server.log, and start waits until it accepts connections. A server
# already running from DIR is stopped (fast) first, so start is idempotent
# and a second start restarts it. Settings given as NAME=VALUE are passed
# as -c NAME=VALUE.
# stop: shuts the server down (fast by default; immediate is a crash: the
# next start runs crash recovery). None running is fine.
# initdb and postgres refuse to run as root: as root the cluster belongs to,
# and the server runs as, the postgres user (DIR is handed to it). The
# caller removes DIR when done.
set -euo pipefail

PGBIN=${SLUICE_PG_BIN:-/usr/lib/postgresql/15/bin}

usage() {
	echo "usage: $0 start DIR PORT [NAME=VALUE...] | stop DIR [fast|immediate]" >&2
	exit 2
}

log() { printf 'scratch-postgres: %s\n' "$*" >&2; }

# as_owner CMD...: runs CMD as the cluster's owner (postgres when we are root).
as_owner() {
	if [[ $(id -u) == 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# running DIR: true when the server of DIR runs.
running() {
	[[ -s $1/data/postmaster.pid ]] || return 1
	local pid
	pid=$(head -n 1 "$1/data/postmaster.pid")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

stop() {
	local dir=$1 mode=${2:-fast}
	[[ $mode == fast || $mode == immediate ]] || usage
	running "$dir" || return 0
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m "$mode" -w -t 60 stop >/dev/null
}

start() {
	local dir=$1 port=$2
	shift 2
	[[ $dir == /* ]] || {
		echo "scratch-postgres: DIR must be an absolute path" >&2
		exit 2
	}
	[[ -x $PGBIN/initdb ]] || {
		echo "scratch-postgres: no PostgreSQL binaries in $PGBIN (apt-get install postgresql-15, or set SLUICE_PG_BIN)" >&2
		exit 1
	}
	mkdir -p "$dir"
	if [[ $(id -u) == 0 ]]; then
		chown postgres: "$dir"
		chmod 700 "$dir"
		runuser -u postgres -- test -w "$dir" || {
			echo "scratch-postgres: the postgres user cannot reach $dir (a folder above it is closed to it)" >&2
			exit 1
		}
	fi
	stop "$dir" fast
	if [[ ! -s $dir/data/PG_VERSION ]]; then
		rm -rf "$dir/data"
		as_owner "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || {
			cat "$dir/initdb.log" >&2
			exit 1
		}
	fi
	local opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir"
	opts+=" -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20"
	opts+=" -c fsync=off -c shared_buffers=32MB -c max_connections=100"
	local kv
	for kv in "$@"; do
		[[ $kv == *=* ]] || usage
		opts+=" -c $kv"
	done
	if ! as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "$opts" -w -t 60 start >/dev/null; then
		tail -n 40 "$dir/server.log" >&2
		echo "scratch-postgres: the server of $dir did not start" >&2
		exit 1
	fi
	log "server of $dir answers on 127.0.0.1:$port"
}

case ${1:-} in
start)
	(($# >= 3)) || usage
	shift
	start "$@"
	;;
stop)
	(($# == 2 || $# == 3)) || usage
	shift
	stop "$@"
	;;
*) usage ;;
esac
