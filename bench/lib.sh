# bench/lib.sh: helpers the benchmark scripts share. Source it after setting
# BENCH_NAME (the prefix of log lines) and PG (a postgres:// URL without a
# database); the pg_ticks helper also needs PGDATA_DIR, the MariaDB helpers
# MY (a mysql://user@host[:port] URL without a database or password) and a
# call of my_parse first.

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

# --- MariaDB (the MySQL-family target) ---------------------------------------

# my_parse: checks MY and sets MY_OPTS, the connection options of the mariadb
# and mariadb-dump clients (TCP, no password).
my_parse() {
	[[ ${MY:-} =~ ^mysql://([^@/:]+)@([^:/]+)(:([0-9]+))?/?$ ]] ||
		die "the MariaDB server must be a mysql://user@host[:port] URL without a database, not '${MY:-}'"
	MY=mysql://${BASH_REMATCH[1]}@${BASH_REMATCH[2]}:${BASH_REMATCH[4]:-3306}
	MY_OPTS=("--user=${BASH_REMATCH[1]}" "--host=${BASH_REMATCH[2]}" "--port=${BASH_REMATCH[4]:-3306}" --protocol=TCP)
}

# my_dsn DB: the sluice target URL of database DB on the MariaDB server.
my_dsn() { printf '%s/%s' "$MY" "$1"; }

# my DB [mariadb args...]: the mariadb client on DB ('' for none), batch mode
# without column names; it stops at the first error.
my() {
	local db=$1
	shift
	mariadb "${MY_OPTS[@]}" --batch --skip-column-names ${db:+"--database=$db"} "$@"
}

# my_drop_like PREFIX: drops every database whose name starts with PREFIX
# (none is fine: idempotent).
my_drop_like() {
	local d
	for d in $(my '' -e "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE '${1//_/\\_}%'"); do
		my '' -e "DROP DATABASE IF EXISTS \`$d\`" && log "dropped MariaDB database $d"
	done
}

# mariadb_pid: the local MariaDB server's pid (empty when none runs here).
mariadb_pid() { pgrep -o -x mariadbd || pgrep -o -x mysqld || true; }
