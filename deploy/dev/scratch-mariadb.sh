#!/usr/bin/env bash
# deploy/dev/scratch-mariadb.sh: a throwaway MariaDB server of its own, for
# tests that must change GLOBAL settings (binlog_format, log_bin, …) without
# touching the shared server on 127.0.0.1:3306 that other tests use.
#
#   scratch-mariadb.sh start DIR PORT [mariadbd option...]
#   scratch-mariadb.sh stop DIR
#
# start: creates a data directory under DIR with mariadb-install-db the first
# time (root@localhost and root@127.0.0.1 without a password), then starts
# mariadbd on 127.0.0.1:PORT with its socket, pid file and error log in DIR,
# utf8mb4 by default and the binlog on (ROW, FULL image, FULL metadata,
# server_id 1) unless an option given here overrides it (--skip-log-bin
# turns it off), and waits until it answers. A server already running from DIR is stopped first, so
# start is idempotent and a second start with other options restarts it.
# stop: shuts the server down (none running is fine) and waits for it.
# The caller removes DIR when done.
set -euo pipefail

usage() {
	echo "usage: $0 start DIR PORT [mariadbd option...] | stop DIR" >&2
	exit 2
}

log() { printf 'scratch-mariadb: %s\n' "$*" >&2; }

# running DIR: the pid of the server started from DIR, if it still runs.
running() {
	local pid
	[[ -s $1/mariadbd.pid ]] || return 1
	pid=$(<"$1/mariadbd.pid")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--datadir=$1/data" &&
		echo "$pid"
}

stop() {
	local dir=$1 pid
	pid=$(running "$dir") || return 0
	mariadb-admin --no-defaults --socket="$dir/mariadbd.sock" --user=root shutdown 2>/dev/null || kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 120); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.25
	done
	log "server $pid of $dir did not stop within 30 s; killing it"
	kill -9 "$pid" 2>/dev/null || true
}

start() {
	local dir=$1 port=$2
	shift 2
	[[ $dir == /* ]] || {
		echo "scratch-mariadb: DIR must be an absolute path" >&2
		exit 2
	}
	mkdir -p "$dir"
	stop "$dir"
	local user=()
	[[ $(id -u) == 0 ]] && user=(--user=root)
	if [[ ! -d $dir/data/mysql ]]; then
		rm -rf "$dir/data"
		mariadb-install-db --no-defaults "${user[@]}" --datadir="$dir/data" \
			--auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 || {
			cat "$dir/install.log" >&2
			exit 1
		}
	fi
	: >"$dir/error.log"
	mariadbd --no-defaults "${user[@]}" --datadir="$dir/data" --port="$port" --bind-address=127.0.0.1 \
		--socket="$dir/mariadbd.sock" --pid-file="$dir/mariadbd.pid" --log-error="$dir/error.log" \
		--character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci --innodb-buffer-pool-size=64M --innodb-log-file-size=16M \
		--log-bin="$dir/data/scratch-bin" --server-id=1 --binlog-format=ROW --binlog-row-image=FULL \
		--binlog-row-metadata=FULL "$@" >/dev/null 2>&1 &
	local pid=$!
	for _ in $(seq 1 240); do
		if mariadb-admin --no-defaults --socket="$dir/mariadbd.sock" --user=root ping >/dev/null 2>&1; then
			log "server $pid of $dir answers on 127.0.0.1:$port"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.25
	done
	cat "$dir/error.log" >&2
	echo "scratch-mariadb: the server of $dir did not start" >&2
	exit 1
}

case ${1:-} in
start)
	(($# >= 3)) || usage
	shift
	start "$@"
	;;
stop)
	(($# == 2)) || usage
	stop "$2"
	;;
*) usage ;;
esac
