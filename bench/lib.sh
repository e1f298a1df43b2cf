# bench/lib.sh: helpers the benchmark scripts share. Source it after setting
# BENCH_NAME (the prefix of log lines) and PG (a postgres:// URL without a
# database); the pg_ticks helper also needs PGDATA_DIR.

# log MSG...: a timestamped progress line on stderr.
log() { printf '[%s %s] %s\n' "$BENCH_NAME" "$(date +%T)" "$*" >&2; }

# die MSG...: the benchmark failed.
die() {
	printf '\n%s: FAILED: %s\n\n' "$BENCH_NAME" "$*" >&2
	exit 1
}

# dsn DB: the URL of database DB on the benchmark's server.
dsn() { printf '%s/%s?sslmode=disable' "$PG" "$1"; }

# sql DB [psql args...]: run psql quietly, unaligned, stopping at the first error.
sql() {
	local db=$1
	shift
	PGOPTIONS='-c client_min_messages=warning' psql "$(dsn "$db")" -X -q -At -v ON_ERROR_STOP=1 "$@"
}

now() { date +%s.%N; }

# secs A B: B - A in seconds, three decimals.
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

db_exists() { [[ $(sql postgres -c "SELECT count(*) FROM pg_database WHERE datname = '$1'") == 1 ]]; }

# ticks PID: user + system CPU ticks of a process (0 when gone).
ticks() {
	[[ -n ${1:-} && -r /proc/$1/stat ]] || {
		echo 0
		return
	}
	# Fields after the command name (which may hold spaces): utime is 14, stime 15.
	{ sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null || true; } | awk '{ t = $12 + $13 } END { print t + 0 }'
}

# pg_ticks: CPU ticks of the whole PostgreSQL server: live processes plus the
# children the postmaster reaped (its cutime + cstime).
pg_ticks() {
	local pm total p
	pm=$(head -n 1 "$PGDATA_DIR/postmaster.pid" 2>/dev/null || true)
	[[ -n $pm && -r /proc/$pm/stat ]] || {
		echo 0
		return
	}
	total=$(sed 's/^.*) //' "/proc/$pm/stat" | awk '{ print $12 + $13 + $14 + $15 }')
	for p in $(pgrep -P "$pm"); do
		total=$((total + $(ticks "$p")))
	done
	echo "$total"
}
