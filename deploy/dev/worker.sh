#!/usr/bin/env bash
# Starts bin/sluice-worker in the background unless one already answers on its
# admin endpoint; `worker.sh stop` stops the one it started.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}
ADMIN=${SLUICE_ADMIN_ADDR:-127.0.0.1:9464}
PIDFILE=$SLUICE_STATE/worker.pid
LOG=$SLUICE_STATE/worker.log
mkdir -p "$SLUICE_STATE"

alive() { [[ -s $PIDFILE ]] && kill -0 "$(<"$PIDFILE")" 2>/dev/null; }

if [[ ${1:-} == stop ]]; then
	if alive; then
		kill "$(<"$PIDFILE")"
		for _ in $(seq 1 50); do alive || break; sleep 0.2; done
		echo "worker: stopped"
	fi
	rm -f "$PIDFILE"
	exit 0
fi

if curl -fsS "http://$ADMIN/livez" >/dev/null 2>&1; then
	if alive; then
		# A worker of an older build keeps running old code: restart it when the binary is newer.
		if [[ bin/sluice-worker -nt $PIDFILE ]]; then
			"$0" stop
		else
			echo "worker: already running (pid $(<"$PIDFILE")), admin http://$ADMIN"
			exit 0
		fi
	else
		echo "worker: something already answers on $ADMIN; using it"
		exit 0
	fi
fi
[[ -x bin/sluice-worker ]] || { echo "worker: bin/sluice-worker is missing; run make build" >&2; exit 1; }
# The worker outlives this script: it must not keep open what the caller
# had open beyond stdio (a `flock` lock a benchmark or test run holds, say),
# or that lock would stay held for as long as the worker runs.
(
	for fd in /proc/self/fd/*; do
		fd=${fd##*/}
		[[ $fd =~ ^[0-9]+$ && $fd -gt 2 ]] && eval "exec $fd>&-" 2>/dev/null
	done
	SLUICE_ADMIN_ADDR=$ADMIN exec setsid nohup bin/sluice-worker >>"$LOG" 2>&1 </dev/null
) &
echo $! >"$PIDFILE"
for _ in $(seq 1 100); do
	if curl -fsS "http://$ADMIN/readyz" >/dev/null 2>&1; then
		echo "worker: started (pid $(<"$PIDFILE")), log $LOG, admin http://$ADMIN"
		exit 0
	fi
	alive || break
	sleep 0.2
done
echo "worker: did not become ready; last log lines:" >&2
tail -n 20 "$LOG" >&2
exit 1
