#!/usr/bin/env bash
# Stops the Temporal dev server and versitygw that deploy/dev/services.sh
# started, found through their pid files. PostgreSQL and MariaDB are left
# running. Stopping what is not running is not an error.
set -euo pipefail

SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}

# stop NAME: TERM the process in $SLUICE_STATE/NAME.pid, then KILL it if it
# is still there after 20 seconds.
stop() {
	local name=$1 pidfile=$SLUICE_STATE/$1.pid pid
	if [[ ! -s $pidfile ]]; then
		printf '%s: not started by services.sh (no %s)\n' "$name" "$pidfile"
		return
	fi
	pid=$(<"$pidfile")
	# Only signal the process if it still is the one we started (pids get
	# reused): its command line must name the tool.
	if ! [[ $pid =~ ^[0-9]+$ ]] || ! kill -0 "$pid" 2>/dev/null ||
		! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$name"; then
		printf '%s: not running\n' "$name"
		rm -f "$pidfile"
		return
	fi
	kill -TERM "$pid"
	local deadline=$((SECONDS + 20))
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			kill -KILL "$pid" 2>/dev/null || true
			printf '%s: killed pid %s (did not stop within 20s)\n' "$name" "$pid"
			break
		fi
		sleep 0.2
	done
	rm -f "$pidfile"
	printf '%s: stopped (pid %s)\n' "$name" "$pid"
}

stop temporal
stop versitygw
# The servers of deploy/dev/services.d: each file may define stop_<name>;
# otherwise its pid file is $SLUICE_STATE/<name>.pid and its command line
# names <name>.
for plugin in "$(dirname "${BASH_SOURCE[0]}")"/services.d/*.sh; do
	[[ -e $plugin ]] || continue
	name=$(basename "$plugin" .sh)
	# shellcheck disable=SC1090
	source "$plugin"
	if declare -F "stop_$name" >/dev/null; then "stop_$name"; else stop "$name"; fi
done
