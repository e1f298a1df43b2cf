#!/usr/bin/env bash
# bench/apply.sh (make bench-apply): how fast the broker (`sluice sync
# from-backup run`) replays one incremental of BENCH_CHANGES changes into a
# target, with 1 and with 4 apply lanes, beside PostgreSQL's own logical
# replication applying the same changes into another database on this
# machine; the same broker runs on an encrypted and signed chain of the same
# changes, beside the plain ones (issue 27: sealing must not cost more than
# 10 %); and how the worker's peak memory grows (or not) with the size of
# the incremental it applies.
#
# It needs what `make worker` starts: PostgreSQL (wal_level logical) on
# 127.0.0.1:5432, the Temporal dev server, and bin/sluice + bin/sluice-worker
# built. The script restarts the default worker (deploy/dev/worker.sh) before
# every measured broker run, so that its peak RSS (VmHWM) covers that run only.
#
# Steps
#   1. Source database $SRC (a keyed 9-column table of mixed types and a
#      narrow keyed table, seeded), a full backup with --chain-slot, then
#      PostgreSQL's anchor: a slot made here and a disabled subscription on a
#      subscriber database seeded identically; then BENCH_CHANGES inserts,
#      updates and deletes in transactions of 1 to 1000 changes
#      (log-uniform sizes, fixed seed), committed as one incremental.
#      Beside it a second chain of the same source, $DIR/chain-enc-sig:
#      its own full with --chain-slot (its own slot) taken right after the
#      first, and its own incremental of the same changes, both written with
#      --encrypt --key-passphrase-env SLUICE_BENCH_PASSPHRASE --sign-key-file
#      $DIR/keys/sign (AES-256-GCM under a data key the passphrase wraps; every
#      catalog generation signed with an Ed25519 pair `sluice backup keygen`
#      makes each run).
#   2. For concurrency 1 and 4: a fresh target, restored through the full;
#      worker restarted; timed: `sync from-backup run --detach --at-chain-id
#      <full>` until the position in the target names the incremental as
#      last applied (read every 200 ms with psql, as step 3 reads its slot;
#      `status --json` every 5 s); worker VmHWM; target == source; broker
#      stopped. Beside each, the same on the encrypted chain (c1 enc+sig
#      after c1, c4 enc+sig before c4, so neither variant always runs
#      second): a fresh target restored through its full
#      with the key, worker restarted, the broker run with
#      --key-passphrase-env SLUICE_BENCH_PASSPHRASE --verify-key-file
#      $DIR/keys/sign.pub --require-signature, timed and checked the same way;
#      the report gives its time over the plain run's (> 1: what sealing and
#      signing cost).
#   2b. The same into an SQLite file (one lane), restored through the full
#      with --target-driver sqlite; file == source by row counts and sums of
#      integer columns (sqlite3).
#   2c. The same into MariaDB at concurrency 1 and 4: a fresh database per
#      concurrency, named uniquely per run (sluice_bench_apply_my_<run>_c<lanes>),
#      restored through the full with --target-driver mysql, then the broker
#      with --target-driver mysql --at-chain-id <full>; database == source by
#      row counts and sums of integer columns (read with the mariadb client).
#   3. Timed: ALTER SUBSCRIPTION ... ENABLE until the slot's
#      confirmed_flush_lsn reaches the WAL position after the generation;
#      subscriber == source.
#   4. (BENCH_RSS=1) a second chain of wide rows (1 KiB text): one incremental
#      of about BENCH_RSS_SMALL_MB and one of about BENCH_RSS_LARGE_MB of raw
#      change data, each applied by a broker on a freshly started worker,
#      whose VmHWM is recorded.
#
# Environment
#   BENCH_CHANGES=1000000      row changes to generate.
#   BENCH_DIR=/tmp/sluice-bench  this benchmark works in $BENCH_DIR/apply and
#                              leaves there apply.json, logs and top samples.
#   BENCH_RSS=1                0: skip step 4 (it is slow: ~1 GB of changes).
#   BENCH_RSS_SMALL_MB=100 BENCH_RSS_LARGE_MB=1000   raw sizes (10^6 bytes).
#   BENCH_RSS_CONCURRENCY=4    lanes of the step-4 broker.
#   BENCH_TOP=1                `top -b -n 1 -H` every BENCH_TOP_EVERY=2 s
#                              during each timed step into <step>.top (0: off).
#   BENCH_QUIET_WAIT=300       before each timed step, wait up to this many
#                              seconds for the machine to be at most
#                              BENCH_QUIET_PCT=15 % busy (0: do not wait).
#   BENCH_PG=postgres://postgres@127.0.0.1:5432   server (no password).
#   BENCH_MARIADB=mysql://root@127.0.0.1:3306     MariaDB server for the
#                              MariaDB rows (no password; make services starts
#                              one).
#   SLUICE_BENCH_PASSPHRASE=<a fixed bench value>  the encrypted chain's
#                              passphrase. The worker reads it from its own
#                              environment: the script exports it, and every
#                              worker it (re)starts through deploy/dev/worker.sh
#                              inherits it.
#
# Method and caveats
#   - Wall clock around each timed step. The sluice figure includes starting
#     the workflow, the first catalog poll and the 200 ms position polling, as a
#     user sees it; apply.json also gives the ApplyBrokerIncremental activity
#     alone (scheduled -> completed, from the workflow history). The
#     PostgreSQL figure includes starting the apply worker and the delay of
#     its flush feedback to the slot. A CHECKPOINT runs (untimed) before each.
#   - Both consumers read the same changes, but not from the same place:
#     sluice reads compressed chunks from a folder; PostgreSQL decodes its WAL
#     (walsender) and applies it (apply worker), two processes.
#   - CPU seconds per step from /proc: the worker, every PostgreSQL process
#     (live children plus the postmaster's reaped ones: other sessions'
#     backends count too), the target's client backends (the lanes; max ticks
#     seen per pid, sampled every second), the subscription's apply worker
#     and walsender, the Temporal server, the whole machine (/proc/stat) and
#     "other" = machine - those (the position polling, the sampler, top, and
#     anything else running: a busy shared machine shows here). Target
#     commits: xact_commit of the target database over the step. The MariaDB
#     rows give the MariaDB server's CPU (mariadbd, all its threads) instead
#     of the lanes' backends, and as target commits the server-wide
#     Com_commit over the step; "other" leaves out the MariaDB server too.
#   - MariaDB runs with this machine's settings (make services: binlog on in
#     ROW format; the buffer pool and durability settings as installed), which
#     apply.json records; PostgreSQL with its own.
#   - Peak RSS is the worker's VmHWM, the worker restarted just before.
#   - The encrypted broker runs on a fresh worker too, so each run pays once
#     the stretching of the passphrase (Argon2id: 3 passes over 64 MiB) that
#     opens the chain's data keys, as any broker start does: it shows in the
#     CheckChainForBroker activity (about 0.3 s here, against 0.1 s plain),
#     in the worker's CPU and in its peak RSS (the 64 MiB), not in the apply
#     activity, whose time apply.json gives apart.
#   - Everything it creates (databases, slots, subscription, brokers, chains,
#     and every MariaDB database named sluice_bench_apply_my_*) is removed at
#     the start, at the end and on failure; only the results in $DIR stay.
#     Other workers, databases and slots are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CHANGES=${BENCH_CHANGES:-1000000}
DIR=${BENCH_DIR:-/tmp/sluice-bench}/apply
RSS=${BENCH_RSS:-1}
RSS_SMALL_MB=${BENCH_RSS_SMALL_MB:-100}
RSS_LARGE_MB=${BENCH_RSS_LARGE_MB:-1000}
RSS_LANES=${BENCH_RSS_CONCURRENCY:-4}
TOP=${BENCH_TOP:-1}
QUIET_WAIT=${BENCH_QUIET_WAIT:-300}
QUIET_PCT=${BENCH_QUIET_PCT:-15}
TOP_EVERY=${BENCH_TOP_EVERY:-2}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
MY=${BENCH_MARIADB:-mysql://root@127.0.0.1:3306}
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}
export PATH="$PATH:${SLUICE_TOOLS:-$HOME/.cache/sluice/bin}"
SLUICE=$ROOT/bin/sluice
PIDFILE=$SLUICE_STATE/worker.pid
HZ=$(getconf CLK_TCK)

SQLITE_FILE=$DIR/sqlite-target.db
SRC=sluice_bench_apply_src
SUB=sluice_bench_apply_sub
DST_PREFIX=sluice_bench_apply_c   # + concurrency
RSS_SRC=sluice_bench_apply_rss_src
RSS_DST=sluice_bench_apply_rss_dst
ENC_SUFFIX=_enc_sig # the encrypted chain's targets: DST_PREFIX + concurrency + this
DBS=("$SUB" "${DST_PREFIX}1" "${DST_PREFIX}4" "${DST_PREFIX}1$ENC_SUFFIX" "${DST_PREFIX}4$ENC_SUFFIX" "$RSS_DST" "$SRC" "$RSS_SRC")
# MariaDB targets: MY_PREFIX + this run's ID + _c<lanes>, unique per run;
# every database of the prefix is dropped at the start and at the end.
MY_PREFIX=sluice_bench_apply_my_
MY_RUN=$(date -u +%Y%m%d%H%M%S)_$$
SUBNAME=bench_apply_sub
PUB=sluice_all_tables
CHAIN=$DIR/chain
RSS_CHAIN=$DIR/rss-chain
# The encrypted + signed chain, its signing pair (made each run) and the
# variable holding its passphrase in the worker's environment: a bench
# value, not a secret (the chain is a local folder removed at the end).
ENC_CHAIN=$DIR/chain-enc-sig
KEY_DIR=$DIR/keys
KEY_ENV=SLUICE_BENCH_PASSPHRASE
export SLUICE_BENCH_PASSPHRASE=${SLUICE_BENCH_PASSPHRASE:-sluice-bench-passphrase}
ENC_WRITE=(--encrypt --key-passphrase-env "$KEY_ENV" --sign-key-file "$KEY_DIR/sign")
ENC_READ=(--key-passphrase-env "$KEY_ENV" --verify-key-file "$KEY_DIR/sign.pub" --require-signature)
STREAMS=(bench-c1 bench-c4 bench-c1-enc-sig bench-c4-enc-sig bench-sqlite bench-mariadb-c1 bench-mariadb-c4 bench-rss)
TABLES=(bench_item bench_pair)
SEED_ITEM=100000
SEED_PAIR=100000
SEED_BLOB=1000

BENCH_NAME=apply
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }'; }
wf_status() { # wf_status WORKFLOW_ID: RUNNING, COMPLETED, ... or NONE
	temporal workflow describe -w "$1" -o json 2>/dev/null |
		jq -r '.workflowExecutionInfo.status // "NONE" | sub("WORKFLOW_EXECUTION_STATUS_"; "")' 2>/dev/null || echo NONE
}

# --- clean up: at the start, at the end and on failure ----------------------

SAMPLER_PID=
cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [[ -n $SAMPLER_PID ]]; then
		kill "$SAMPLER_PID" 2>/dev/null
		wait "$SAMPLER_PID" 2>/dev/null
		SAMPLER_PID=
	fi
	# Brokers of this benchmark still running (a failed or interrupted run).
	local s st
	for s in "${STREAMS[@]}"; do
		st=$(wf_status "broker/$s")
		if [[ $st == RUNNING ]]; then
			temporal workflow terminate -w "broker/$s" --reason "bench/apply.sh cleanup" >/dev/null 2>&1 && log "terminated broker/$s"
		fi
	done
	# The subscription names a slot and holds its database: disable it,
	# detach it from the slot, then drop it.
	if db_exists "$SUB" && [[ $(sql "$SUB" -c "SELECT count(*) FROM pg_subscription WHERE subname = '$SUBNAME'") == 1 ]]; then
		sql "$SUB" -c "ALTER SUBSCRIPTION $SUBNAME DISABLE"
		sql "$SUB" -c "ALTER SUBSCRIPTION $SUBNAME SET (slot_name = NONE)"
		sql "$SUB" -c "DROP SUBSCRIPTION $SUBNAME"
	fi
	# Slots: the subscription's, and every slot of our two source databases
	# (the chain slots made by --chain-slot).
	local slot
	while read -r slot; do
		[[ -n $slot ]] || continue
		sql postgres -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$slot' AND active_pid IS NOT NULL" >/dev/null
		for _ in $(seq 1 50); do
			[[ $(sql postgres -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot' AND active") == 0 ]] && break
			sleep 0.1
		done
		sql postgres -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null && log "dropped slot $slot"
	done < <(sql postgres -c "SELECT slot_name FROM pg_replication_slots WHERE slot_name = '$SUBNAME' OR database IN ('$SRC', '$RSS_SRC')")
	local db
	for db in "${DBS[@]}"; do
		sql postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
	done
	[[ -z ${MY_OPTS+x} ]] || my_drop_like "$MY_PREFIX"
	# The chains and the generated SQL (gigabytes); results and logs stay.
	rm -rf "$CHAIN" "$ENC_CHAIN" "$KEY_DIR" "$RSS_CHAIN" "$DIR"/*.sql "$SQLITE_FILE" "$SQLITE_FILE"-wal "$SQLITE_FILE"-shm
	return "$rc"
}

# --- checks ------------------------------------------------------------------

preflight() {
	[[ $CHANGES =~ ^[1-9][0-9]*$ ]] || die "BENCH_CHANGES must be a positive integer, not '$CHANGES'"
	[[ $RSS_SMALL_MB =~ ^[1-9][0-9]*$ && $RSS_LARGE_MB =~ ^[1-9][0-9]*$ ]] || die "BENCH_RSS_SMALL_MB and BENCH_RSS_LARGE_MB must be positive integers"
	local t
	for t in jq psql curl temporal top sqlite3 mariadb; do
		command -v "$t" >/dev/null || die "$t is needed (temporal: make services builds it into ~/.cache/sluice/bin)"
	done
	[[ -x $SLUICE && -x $ROOT/bin/sluice-worker ]] || die "bin/sluice or bin/sluice-worker is missing; run make build"
	sql postgres -c 'SELECT 1' >/dev/null || die "no PostgreSQL at $PG; run make services"
	[[ $(sql postgres -c 'SHOW wal_level') == logical ]] || die "wal_level is not logical; run make services"
	temporal operator namespace list >/dev/null 2>&1 || die "the Temporal server does not answer; run make services"
	PGVER=$(sql postgres -c 'SHOW server_version')
	PGDATA_DIR=$(sql postgres -c 'SHOW data_directory')
	(($(sql postgres -c 'SHOW server_version_num') >= 150000)) || die "PostgreSQL 15 or later is needed (found $PGVER)"
	my_parse
	MYVER=$(my '' -e 'SELECT VERSION()') || die "no MariaDB answers at $MY; run make services"
	MYSET=$(my '' -e "SELECT JSON_OBJECT('version', VERSION(), 'innodb_buffer_pool_size', @@innodb_buffer_pool_size,
		'innodb_flush_log_at_trx_commit', @@innodb_flush_log_at_trx_commit, 'sync_binlog', @@sync_binlog, 'log_bin', @@log_bin + 0,
		'binlog_format', @@binlog_format)")
	jq -e . >/dev/null <<<"$MYSET" || die "MariaDB's settings are not valid JSON: $MYSET"
}

# restart_worker: a fresh default worker (its VmHWM starts from zero); sets WPID.
restart_worker() {
	bash deploy/dev/worker.sh stop >/dev/null
	bash deploy/dev/worker.sh >"$DIR/worker-start.log" 2>&1 || die "the worker did not start: $(tail -n 5 "$DIR/worker-start.log")"
	[[ -s $PIDFILE ]] || die "no $PIDFILE after starting the worker (another process answers on its admin address?)"
	WPID=$(<"$PIDFILE")
	kill -0 "$WPID" 2>/dev/null || die "worker pid $WPID is not alive"
}
hwm_mib() { awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

temporal_pid() { pgrep -o -f 'temporal server start-dev' || true; }
# machine_ticks: "busy total" ticks of all CPUs (/proc/stat; idle and iowait are not busy).
machine_ticks() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat; }
# commits DB: transactions committed in DB so far (pg_stat_database).
commits() { sql postgres -c "SELECT xact_commit FROM pg_stat_database WHERE datname = '$1'"; }
cpu_s() { awk -v a="$1" -v b="$2" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz }'; }

# --- sampling during a timed step --------------------------------------------

# sampler STEP DB: every second, the CPU ticks of DB's client backends and of
# the apply worker / walsender of the subscription (pid ticks lines), and
# with BENCH_TOP=1 a `top -H` snapshot every TOP_EVERY s.
sampler() {
	local step=$1 db=$2 last=0 t
	while :; do
		sql postgres -F ' ' -c "SELECT pid, CASE WHEN backend_type = 'client backend' THEN 'backend' ELSE replace(backend_type, ' ', '_') END FROM pg_stat_activity
			WHERE (datname = '$db' AND backend_type IN ('client backend', 'logical replication worker')) OR (backend_type = 'walsender' AND application_name = '$SUBNAME')" 2>/dev/null |
			while read -r pid kind; do printf '%s %s %s\n' "$kind" "$pid" "$(ticks "$pid")"; done >>"$DIR/$step.samples"
		t=$(date +%s)
		if [[ $TOP == 1 ]] && ((t - last >= TOP_EVERY)); then
			{
				echo "=== $(date +%T)"
				top -b -n 1 -H -w 200 | head -n 30
			} >>"$DIR/$step.top" 2>/dev/null
			last=$t
		fi
		sleep 1
	done
}
# quiet: wait up to QUIET_WAIT s for a second in which the machine is at most
# QUIET_PCT % busy (other work on a shared machine skews every figure).
quiet() {
	local m0 a0 m1 a1 pct waited=0
	((QUIET_WAIT > 0)) || return 0
	while :; do
		read -r m0 a0 < <(machine_ticks)
		sleep 1
		read -r m1 a1 < <(machine_ticks)
		pct=$(((m1 - m0) * 100 / (a1 - a0 > 0 ? a1 - a0 : 1)))
		((pct <= QUIET_PCT)) && break
		((waited == 0)) && log "waiting for a quiet machine ($pct % busy; up to ${QUIET_WAIT}s)"
		waited=$((waited + 1))
		if ((waited >= QUIET_WAIT)); then
			log "warning: the machine is still $pct % busy; timing anyway"
			break
		fi
	done
}
start_step() { # start_step STEP DB
	: >"$DIR/$1.samples"
	: >"$DIR/$1.top"
	sql postgres -c CHECKPOINT
	quiet
	sampler "$1" "$2" &
	SAMPLER_PID=$!
	read -r C_M0 C_A0 < <(machine_ticks)
	C_X0=$(commits "$2")
	C_W0=$(ticks "${WPID:-}") C_P0=$(pg_ticks) C_T0=$(ticks "$(temporal_pid)") C_Y0=$(ticks "$(mariadb_pid)") C_YX0=$(my_commits)
}
# my_commits: COMMIT statements the MariaDB server ran so far (server-wide).
my_commits() { my '' -e "SHOW GLOBAL STATUS LIKE 'Com_commit'" | awk '{ print $2 + 0 }'; }
# end_step STEP DB: sets CPU_WORKER CPU_PG CPU_TEMPORAL CPU_MARIADB (the
# MariaDB server) CPU_BUSY (whole machine) CPU_OTHER (busy minus those four:
# the sampler, the position polling and whatever else runs on the machine)
# BUSY_PCT, COMMITS (transactions committed in DB), MY_COMMITS (COMMITs of the
# MariaDB server) and, from the samples, CPU_backend (DB's client backends),
# CPU_logical_replication_worker, CPU_walsender.
end_step() {
	local m1 a1
	read -r m1 a1 < <(machine_ticks)
	COMMITS=$(($(commits "$2") - C_X0))
	MY_COMMITS=$(($(my_commits) - C_YX0))
	kill "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" 2>/dev/null || true
	SAMPLER_PID=
	CPU_WORKER=$(cpu_s "$C_W0" "$(ticks "${WPID:-}")")
	CPU_PG=$(cpu_s "$C_P0" "$(pg_ticks)")
	CPU_TEMPORAL=$(cpu_s "$C_T0" "$(ticks "$(temporal_pid)")")
	CPU_MARIADB=$(cpu_s "$C_Y0" "$(ticks "$(mariadb_pid)")")
	CPU_BUSY=$(cpu_s "$C_M0" "$m1")
	BUSY_PCT=$(awk -v b="$((m1 - C_M0))" -v t="$((a1 - C_A0))" 'BEGIN { printf "%.0f", (t > 0 ? 100 * b / t : 0) }')
	CPU_OTHER=$(awk -v b="$CPU_BUSY" -v w="$CPU_WORKER" -v p="$CPU_PG" -v t="$CPU_TEMPORAL" -v y="$CPU_MARIADB" 'BEGIN { o = b - w - p - t - y; printf "%.2f", (o < 0 ? 0 : o) }')
	local k
	for k in backend logical_replication_worker walsender; do
		printf -v "CPU_$k" '%s' "$(awk -v k="$k" -v hz="$HZ" '$1 == k && $3 + 0 > m[$2] { m[$2] = $3 + 0 } END { for (p in m) s += m[p]; printf "%.2f", s / hz }' "$DIR/$1.samples")"
	done
}

# --- schema, seed and changes ------------------------------------------------

SCHEMA_SQL="
CREATE TABLE bench_item (
	id      bigint PRIMARY KEY,
	qty     integer NOT NULL,
	price   numeric(12,2),
	label   text,
	created timestamptz NOT NULL,
	active  boolean,
	attrs   jsonb,
	ref     uuid,
	score   double precision
);
CREATE TABLE bench_pair (
	id bigint PRIMARY KEY,
	v  integer NOT NULL
);"

# Row expressions of key g, shared by the seed and the generator so every
# database starts equal.
ITEM_ROW="g, g % 1000, (g % 100000) / 100.0, 'row-' || md5(g::text), timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', CASE WHEN g % 7 = 0 THEN NULL ELSE g % 3 = 0 END, jsonb_build_object('g', g, 'k', 't' || g % 13), md5(g::text)::uuid, g * 0.5"
PAIR_ROW="g, (g * 7) % 100000"

seed_db() {
	sql postgres -c "CREATE DATABASE $1"
	{
		echo "$SCHEMA_SQL"
		echo "INSERT INTO bench_item SELECT $ITEM_ROW FROM generate_series(1, $SEED_ITEM) g;"
		echo "INSERT INTO bench_pair SELECT $PAIR_ROW FROM generate_series(1, $SEED_PAIR) g;"
		echo "VACUUM ANALYZE;"
	} | sql "$1"
}

# gen_changes: CHANGES row changes as SQL, one BEGIN/COMMIT per transaction.
# Sizes are log-uniform in 1..1000; a transaction is a random sequence of
# statements of 1..200 rows, each an insert, update or delete of either table
# (weights below). Keys stay one contiguous range per table (inserts above
# it, deletes from its bottom, updates of a random sub-range), so every
# statement changes exactly the rows it counts. Last line: "-- stats tx ins
# upd del".
gen_changes() {
	awk -v total="$CHANGES" -v si="$SEED_ITEM" -v sp="$SEED_PAIR" -v item_row="$ITEM_ROW" -v pair_row="$PAIR_ROW" '
	BEGIN {
		srand(7331)
		tname[1] = "bench_item"; tname[2] = "bench_pair"
		lo[1] = 1; hi[1] = si; lo[2] = 1; hi[2] = sp
		# kind = (table, op) with op 1 insert, 2 update, 3 delete; weights in %.
		nk = split("1 1 1 2 2 2", kt, " "); split("1 2 3 1 2 3", ko, " "); split("28 27 10 15 12 8", kw, " ")
		done = 0; tx = 0
		while (done < total) {
			size = int(exp(rand() * log(1001))); if (size < 1) size = 1; if (size > 1000) size = 1000
			if (size > total - done) size = total - done
			print "BEGIN;"
			rem = size
			while (rem > 0) {
				n = 1 + int(rand() * (rem < 200 ? rem : 200))
				r = rand() * 100; k = nk
				for (i = 1; i <= nk; i++) { r -= kw[i]; if (r < 0) { k = i; break } }
				t = kt[k]; op = ko[k]; live = hi[t] - lo[t] + 1
				# Keep at least 1000 rows in each table.
				if (op != 1 && live - n < 1000) op = 1
				if (op == 1) {
					a = hi[t] + 1; b = hi[t] + n; hi[t] = b
					printf "INSERT INTO %s SELECT %s FROM generate_series(%d, %d) g;\n", tname[t], (t == 1 ? item_row : pair_row), a, b
				} else if (op == 2) {
					a = lo[t] + int(rand() * (live - n + 1)); b = a + n - 1
					if (t == 1) printf "UPDATE bench_item SET qty = qty + 1, price = price + 0.01, label = \x27upd-\x27 || md5((id + qty)::text), active = NOT active, attrs = attrs || jsonb_build_object(\x27u\x27, qty), score = score + 0.25 WHERE id BETWEEN %d AND %d;\n", a, b
					else printf "UPDATE bench_pair SET v = v + 1 WHERE id BETWEEN %d AND %d;\n", a, b
				} else {
					a = lo[t]; b = lo[t] + n - 1; lo[t] = b + 1
					printf "DELETE FROM %s WHERE id BETWEEN %d AND %d;\n", tname[t], a, b
				}
				cnt[op] += n; rem -= n
			}
			print "COMMIT;"
			done += size; tx++
		}
		printf "-- stats %d %d %d %d\n", tx, cnt[1], cnt[2], cnt[3]
	}'
}

# gen_blobs ROWS FIRST: ~ROWS changes of 1 KiB rows on bench_blob in
# transactions of 1000: 80 % inserts of keys FIRST.., 20 % updates of rows
# inserted before. Last line: "-- stats tx next_key".
gen_blobs() {
	awk -v total="$1" -v first="$2" '
	BEGIN {
		srand(4242); next_key = first; done = 0; tx = 0
		while (done < total) {
			size = total - done < 1000 ? total - done : 1000
			ins = int(size * 0.8); upd = size - ins
			if (next_key - 1 < upd) { ins = size; upd = 0 }
			print "BEGIN;"
			printf "INSERT INTO bench_blob SELECT g, 0, repeat(md5(g::text), 32) FROM generate_series(%d, %d) g;\n", next_key, next_key + ins - 1
			if (upd > 0) {
				a = 1 + int(rand() * (next_key - upd))
				printf "UPDATE bench_blob SET rev = rev + 1, body = repeat(md5(id::text || \x27/\x27 || (rev + 1)), 32) WHERE id BETWEEN %d AND %d;\n", a, a + upd - 1
			}
			print "COMMIT;"
			next_key += ins; done += size; tx++
		}
		printf "-- stats %d %d\n", tx, next_key
	}'
}

# fingerprint DB TABLE...: "table rows md5" per table; the md5 is over the
# md5s of the rows' text in key order.
fingerprint() {
	local db=$1 t
	shift
	for t in "$@"; do
		sql "$db" -c "SELECT '$t ' || count(*) || ' ' || coalesce(md5(string_agg(md5(x::text), '' ORDER BY x.id)), '-') FROM $t x"
	done
}

# sums_pg DB / sums_sqlite FILE / sums_mariadb DB: per table, rows and sums
# of integer columns — the same figures from each engine, where text
# renderings differ. MariaDB spells || as CONCAT.
SUMS_ITEM="SELECT 'bench_item ' || count(*) || ' ' || sum(id) || ' ' || sum(qty) FROM bench_item"
SUMS_PAIR="SELECT 'bench_pair ' || count(*) || ' ' || sum(id) || ' ' || sum(v) FROM bench_pair"
MY_SUMS_ITEM="SELECT CONCAT('bench_item ', count(*), ' ', sum(id), ' ', sum(qty)) FROM bench_item"
MY_SUMS_PAIR="SELECT CONCAT('bench_pair ', count(*), ' ', sum(id), ' ', sum(v)) FROM bench_pair"
sums_pg() { sql "$1" -c "$SUMS_ITEM" -c "$SUMS_PAIR"; }
sums_sqlite() { sqlite3 "$1" "$SUMS_ITEM; $SUMS_PAIR"; }
sums_mariadb() { my "$1" -e "$MY_SUMS_ITEM; $MY_SUMS_PAIR"; }

# --- chain helpers ------------------------------------------------------------

# committed_id full|incremental LOG: the ID of the link a `sluice backup
# full` or `backup incremental` logged in LOG as committed ("full <ID>
# committed: ..."); empty when none. From the CLI rather than the catalog's
# files, whose layout depends on the catalog format (docs/chain-format.md)
# and which a sealed chain keeps partly unreadable without the key.
committed_id() { sed -n "s/^$1 \([0-9a-f]\{1,\}\) committed: .*/\1/p" "$2" | tail -n 1; }
manifest_of() { echo "$1/manifests/$2.json"; }
raw_bytes() { jq -r '[.chunks[]?.raw_size] | add // 0' "$1"; }

backup_full() { # backup_full DB CHAIN LOG [FLAG...]
	"$SLUICE" backup full --source "$(dsn "$1")" --target "file://$2" --chain-slot "${@:4}" >"$3" 2>&1 ||
		die "sluice backup full of $1 failed: $(tail -n 5 "$3")"
}
backup_incremental() { # backup_incremental DB CHAIN LOG [FLAG...]: prints the new incremental's ID
	"$SLUICE" backup incremental --source "$(dsn "$1")" --target "file://$2" "${@:4}" >"$3" 2>&1 ||
		die "sluice backup incremental of $1 failed: $(tail -n 5 "$3")"
	committed_id incremental "$3"
}
restore_full() { # restore_full CHAIN FULL_ID DB LOG [FLAG...]
	sql postgres -c "CREATE DATABASE $3"
	"$SLUICE" restore --backup-target "file://$1" --target "$(dsn "$3")" --through "$2" "${@:5}" >"$4" 2>&1 ||
		die "sluice restore into $3 failed: $(tail -n 5 "$4")"
}

# position_of WHERE STREAM: the link the broker's position in the target
# names as last applied (empty while there is none). WHERE is a database of
# this server, sqlite:FILE or mariadb:DB; each is read with the engine's own
# client, as the PostgreSQL step reads its slot.
position_of() {
	local q="FROM sluice_cdc_state WHERE stream_id = '$2'"
	case $1 in
	sqlite:*) sqlite3 -readonly "${1#sqlite:}" "SELECT json_extract(token, '\$.last_applied') $q" 2>/dev/null ;;
	mariadb:*) my "${1#mariadb:}" -e "SELECT JSON_VALUE(token, '\$.last_applied') $q" 2>/dev/null ;;
	*) sql "$1" -c "SELECT token::json->>'last_applied' $q" 2>/dev/null ;;
	esac
}

# broker_until CHAIN STREAM AT LANES INC LOG WHERE [TARGET FLAG...]: starts a
# broker on target database WHERE of this server (or, when given, on the
# target the flags name; WHERE then says how to read its position, see
# position_of) and returns once the position in the target names INC as
# last applied. The position is read every 200 ms with the target's own
# client; every 5 s `sluice sync from-backup status --json` checks that the
# broker has not refused or failed (the CLI costs about twice the CPU of a
# psql poll, which at 200 ms would tax the broker's two cores unlike the
# PostgreSQL step's).
broker_until() {
	local chain=$1 stream=$2 at=$3 lanes=$4 inc=$5 out=$6 where=$7 st la phase i
	shift 7
	local -a target=(--target "$(dsn "$where")")
	(($# == 0)) || target=("$@")
	"$SLUICE" sync from-backup run --backup-target "file://$chain" "${target[@]}" --stream-id "$stream" \
		--at-chain-id "$at" --apply-concurrency "$lanes" --poll-interval 200ms --detach >"$out" 2>&1 ||
		die "sluice sync from-backup run ($stream) failed: $(tail -n 5 "$out")"
	for ((i = 0; ; i++)); do
		[[ $(position_of "$where" "$stream") == "$inc" ]] && return 0
		if ((i % 25 == 24)); then
			if st=$("$SLUICE" sync from-backup status --stream-id "$stream" --json 2>>"$out"); then
				read -r la phase < <(jq -r '[(.last_applied // "-"), (.phase // "-")] | @tsv' <<<"$st")
				[[ $la == "$inc" ]] && return 0
				case $phase in refused | failed) die "broker $stream: $phase: $(jq -r '.last_error // ""' <<<"$st")" ;; esac
			elif [[ $(wf_status "broker/$stream") != RUNNING ]]; then
				die "broker $stream is not running ($(wf_status "broker/$stream")); see $out and $SLUICE_STATE/worker.log"
			fi
		fi
		((i < 18000 * 5)) || die "broker $stream did not apply $inc within 5 hours"
		sleep 0.2
	done
}
broker_stop() { # broker_stop CHAIN STREAM
	local st
	"$SLUICE" sync from-backup stop --backup-target "file://$1" --stream-id "$2" --reason "bench/apply.sh" >>"$DIR/$2.stop.log" 2>&1 ||
		die "sluice sync from-backup stop $2 failed: $(tail -n 5 "$DIR/$2.stop.log")"
	for _ in $(seq 1 600); do
		st=$(wf_status "broker/$2")
		[[ $st == COMPLETED ]] && return 0
		[[ $st == RUNNING ]] || die "broker/$2 ended $st, not COMPLETED"
		sleep 0.2
	done
	die "broker/$2 did not complete within 2 minutes of its stop"
}
# apply_activity_secs STREAM: scheduled -> completed of the last
# ApplyBrokerIncremental of broker/STREAM (null if unknown).
apply_activity_secs() {
	temporal workflow show -w "broker/$1" -o json 2>/dev/null | jq '
		def t: capture("^(?<s>[^.]+)(\\.(?<f>[0-9]+))?Z$") | (.s + "Z" | fromdateiso8601) + ("0." + (.f // "0") | tonumber);
		[.events[]] as $e
		| [$e[] | select(.activityTaskScheduledEventAttributes.activityType.name? == "ApplyBrokerIncremental") | .eventId] as $ids
		| [$e[] | select(.eventType == "EVENT_TYPE_ACTIVITY_TASK_COMPLETED" and (.activityTaskCompletedEventAttributes.scheduledEventId | IN($ids[])))] as $done
		| if ($done | length) == 0 then null else
			($done[-1].activityTaskCompletedEventAttributes.scheduledEventId) as $sid
			| (($done[-1].eventTime | t) - ($e[] | select(.eventId == $sid) | .eventTime | t)) * 1000 | round / 1000
		  end' 2>/dev/null || echo null
}

# --- main --------------------------------------------------------------------

main() {
	preflight
	mkdir -p "$DIR"
	log "cleaning up any previous run"
	(cleanup)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	rm -rf "${DIR:?}"/*
	mkdir -p "$KEY_DIR"
	"$SLUICE" backup keygen --out "$KEY_DIR/sign" >"$DIR/keygen.log" 2>&1 || die "sluice backup keygen failed: $(tail -n 5 "$DIR/keygen.log")"
	# A worker of the current build for the untimed steps, restarted so that
	# its environment holds $KEY_ENV (a running one may lack it).
	restart_worker

	# --- 1. the chain ----------------------------------------------------
	log "creating $SRC and $SUB (schema + seed rows)"
	seed_db "$SRC"
	seed_db "$SUB"
	log "sluice backup full --chain-slot of $SRC"
	backup_full "$SRC" "$CHAIN" "$DIR/backup-full.log"
	local full
	full=$(committed_id full "$DIR/backup-full.log")
	[[ -n $full ]] || die "no full committed: $(tail -n 5 "$DIR/backup-full.log")"
	[[ $(sql "$SRC" -c "SELECT count(*) FROM pg_publication WHERE pubname = '$PUB'") == 1 ]] || die "publication $PUB missing after the full"
	log "sluice backup full --chain-slot of $SRC, encrypted and signed, into $ENC_CHAIN"
	backup_full "$SRC" "$ENC_CHAIN" "$DIR/backup-full-enc-sig.log" "${ENC_WRITE[@]}"
	local full_es
	full_es=$(committed_id full "$DIR/backup-full-enc-sig.log")
	[[ -n $full_es ]] || die "no full committed in $ENC_CHAIN: $(tail -n 5 "$DIR/backup-full-enc-sig.log")"

	log "PostgreSQL anchor: slot $SUBNAME and a disabled subscription in $SUB"
	sql "$SRC" -c "SELECT pg_create_logical_replication_slot('$SUBNAME', 'pgoutput')" >/dev/null
	sql "$SUB" -c "CREATE SUBSCRIPTION $SUBNAME CONNECTION 'host=127.0.0.1 port=5432 dbname=$SRC user=postgres' PUBLICATION $PUB
		WITH (create_slot = false, slot_name = '$SUBNAME', copy_data = false, enabled = false)"

	log "generating $CHANGES changes on $SRC"
	gen_changes >"$DIR/changes.sql"
	local tx n_ins n_upd n_del
	read -r _ _ tx n_ins n_upd n_del < <(tail -n 1 "$DIR/changes.sql")
	local st_q="SELECT sum(n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables"
	local st0 st1 lsn0 lsn1 g0 g1 gen_s
	st0=$(sql "$SRC" -c "$st_q")
	lsn0=$(sql "$SRC" -c 'SELECT pg_current_wal_lsn()')
	g0=$(now)
	sql "$SRC" -f "$DIR/changes.sql"
	g1=$(now)
	lsn1=$(sql "$SRC" -c 'SELECT pg_current_wal_lsn()')
	gen_s=$(secs "$g0" "$g1")
	sleep 1 # statistics reach pg_stat_user_tables within a second
	st1=$(sql "$SRC" -c "$st_q")
	((st1 - st0 == CHANGES)) || die "the source counted $((st1 - st0)) row changes, expected $CHANGES"
	local wal_bytes
	wal_bytes=$(sql "$SRC" -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')::bigint")
	log "generated $n_ins inserts, $n_upd updates, $n_del deletes in $tx transactions in ${gen_s}s (WAL $lsn0 -> $lsn1)"

	log "sluice backup incremental"
	local b0 inc inc_s manifest m_changes m_tx m_raw m_stored m_chunks
	b0=$(now)
	inc=$(backup_incremental "$SRC" "$CHAIN" "$DIR/backup-incremental.log")
	inc_s=$(secs "$b0" "$(now)")
	[[ -n $inc ]] || die "no incremental committed: $(tail -n 5 "$DIR/backup-incremental.log")"
	manifest=$(manifest_of "$CHAIN" "$inc")
	m_changes=$(jq -r '.changes' "$manifest")
	m_tx=$(jq -r '.transactions' "$manifest")
	m_raw=$(raw_bytes "$manifest")
	m_stored=$(jq -r '[.chunks[]?.size] | add // 0' "$manifest")
	m_chunks=$(jq -r '.chunks | length' "$manifest")
	((m_changes == CHANGES)) || die "incremental $inc holds $m_changes changes, expected $CHANGES"
	((m_tx == tx)) || log "warning: incremental $inc holds $m_tx transactions, the generator ran $tx"
	log "chain: full $full, incremental $inc ($m_changes changes, $m_chunks chunks, $m_raw raw bytes) in ${inc_s}s"
	log "sluice backup incremental, encrypted and signed"
	local inc_es inc_es_s es_changes es_stored es_chunks
	b0=$(now)
	inc_es=$(backup_incremental "$SRC" "$ENC_CHAIN" "$DIR/backup-incremental-enc-sig.log" "${ENC_WRITE[@]}" --verify-key-file "$KEY_DIR/sign.pub" --require-signature)
	inc_es_s=$(secs "$b0" "$(now)")
	[[ -n $inc_es ]] || die "no incremental committed in $ENC_CHAIN: $(tail -n 5 "$DIR/backup-incremental-enc-sig.log")"
	# A sealed manifest shows only its chunks' keys and sizes; the change
	# count comes from the CLI's line ("... committed: T transactions, C changes, ...").
	es_changes=$(sed -n "s/^incremental $inc_es committed: [0-9]* transactions, \([0-9]*\) changes,.*/\1/p" "$DIR/backup-incremental-enc-sig.log")
	((${es_changes:-0} == CHANGES)) || die "encrypted incremental $inc_es holds ${es_changes:-?} changes, expected $CHANGES"
	manifest=$(manifest_of "$ENC_CHAIN" "$inc_es")
	jq -e '.format_version == 3 and (.sealed | length > 0)' "$manifest" >/dev/null || die "the manifest of $inc_es is not sealed ($manifest)"
	local -a commits=("$ENC_CHAIN"/catalog/commit-*.json)
	jq -e '.signature.sig | length > 0' "${commits[-1]}" >/dev/null || die "the newest catalog commit of $ENC_CHAIN (${commits[-1]}) carries no signature"
	es_stored=$(jq -r '[.chunks[]?.size] | add // 0' "$manifest")
	es_chunks=$(jq -r '.chunks | length' "$manifest")
	log "encrypted chain: full $full_es, incremental $inc_es ($es_changes changes, $es_chunks chunks, $es_stored bytes stored, sealed and signed) in ${inc_es_s}s"
	local src_fp
	src_fp=$(fingerprint "$SRC" "${TABLES[@]}")
	printf '%s\n' "$src_fp" >"$DIR/source.fingerprint"

	# --- 2. the broker, 1 and 4 lanes, on the plain chain then the encrypted one
	# S_* are keyed by lanes (plain) and lanes + "es" (encrypted + signed).
	local -A S_SECS S_ACT S_RSS S_CPU
	local n db t0 t1 v k ch stream at tip tag
	local -a rflags tflags
	local -a order
	for n in 1 4; do
		# Which variant goes first alternates with the lane count, so an
		# advantage of running second does not always favour the same one.
		order=(plain enc_sig)
		[[ $n == 4 ]] && order=(enc_sig plain)
		for v in "${order[@]}"; do
			if [[ $v == plain ]]; then
				k=$n ch=$CHAIN stream=bench-c$n at=$full tip=$inc tag=c$n db=$DST_PREFIX$n
				rflags=() tflags=()
			else
				k=${n}es ch=$ENC_CHAIN stream=bench-c$n-enc-sig at=$full_es tip=$inc_es tag=c$n-enc-sig db=$DST_PREFIX$n$ENC_SUFFIX
				rflags=("${ENC_READ[@]}") tflags=(--target "$(dsn "$db")" "${ENC_READ[@]}")
			fi
			log "$tag: restoring the full into $db"
			restore_full "$ch" "$at" "$db" "$DIR/restore-$tag.log" "${rflags[@]}"
			restart_worker
			log "$tag: timing the broker (worker pid $WPID, $n lanes)"
			start_step "sluice-$tag" "$db"
			t0=$(now)
			broker_until "$ch" "$stream" "$at" "$n" "$tip" "$DIR/broker-$tag.log" "$db" "${tflags[@]}"
			t1=$(now)
			S_RSS[$k]=$(hwm_mib "$WPID")
			end_step "sluice-$tag" "$db"
			S_SECS[$k]=$(secs "$t0" "$t1")
			S_CPU[$k]=$(jq -nc --argjson w "$CPU_WORKER" --argjson p "$CPU_PG" --argjson b "$CPU_backend" --argjson t "$CPU_TEMPORAL" \
				--argjson m "$CPU_BUSY" --argjson o "$CPU_OTHER" --argjson pct "$BUSY_PCT" --argjson x "$COMMITS" \
				'{worker: $w, postgres_total: $p, target_backends: $b, temporal_server: $t, other: $o, machine_busy: $m, machine_busy_pct: $pct, target_commits: $x}')
			[[ $(fingerprint "$db" "${TABLES[@]}") == "$src_fp" ]] || die "$tag: $db differs from the source (see $DIR/source.fingerprint)"
			broker_stop "$ch" "$stream"
			S_ACT[$k]=$(apply_activity_secs "$stream")
			log "$tag: ${S_SECS[$k]}s (apply activity ${S_ACT[$k]}s), peak RSS ${S_RSS[$k]} MiB, CPU ${S_CPU[$k]}; target equals source"
			sql postgres -c "DROP DATABASE $db WITH (FORCE)"
		done
	done

	# --- 2b. the broker into SQLite (one writer) --------------------------
	local sq_secs sq_act sq_rss sq_cpu sq_rate sq_ratio
	log "sqlite: restoring the full into $SQLITE_FILE"
	rm -f "$SQLITE_FILE" "$SQLITE_FILE"-wal "$SQLITE_FILE"-shm
	"$SLUICE" restore --backup-target "file://$CHAIN" --target-driver sqlite --target "$SQLITE_FILE" --through "$full" >"$DIR/restore-sqlite.log" 2>&1 ||
		die "sluice restore into $SQLITE_FILE failed: $(tail -n 5 "$DIR/restore-sqlite.log")"
	restart_worker
	log "sqlite: timing the broker (worker pid $WPID, 1 lane)"
	start_step sluice-sqlite "$SRC"
	t0=$(now)
	broker_until "$CHAIN" bench-sqlite "$full" 1 "$inc" "$DIR/broker-sqlite.log" "sqlite:$SQLITE_FILE" --target-driver sqlite --target "$SQLITE_FILE"
	t1=$(now)
	sq_rss=$(hwm_mib "$WPID")
	end_step sluice-sqlite "$SRC"
	sq_secs=$(secs "$t0" "$t1")
	sq_cpu=$(jq -nc --argjson w "$CPU_WORKER" --argjson t "$CPU_TEMPORAL" --argjson m "$CPU_BUSY" --argjson o "$CPU_OTHER" --argjson pct "$BUSY_PCT" \
		'{worker: $w, temporal_server: $t, other: $o, machine_busy: $m, machine_busy_pct: $pct}')
	[[ $(sums_sqlite "$SQLITE_FILE") == "$(sums_pg "$SRC")" ]] || die "sqlite: $SQLITE_FILE differs from the source: $(sums_sqlite "$SQLITE_FILE") against $(sums_pg "$SRC")"
	broker_stop "$CHAIN" bench-sqlite
	sq_act=$(apply_activity_secs bench-sqlite)
	log "sqlite: ${sq_secs}s (apply activity ${sq_act}s), peak RSS $sq_rss MiB, CPU $sq_cpu; rows and sums equal the source"

	# --- 2c. the broker into MariaDB, 1 and 4 lanes -----------------------
	local -A M_SECS M_ACT M_RSS M_CPU
	local src_sums my_sums
	src_sums=$(sums_pg "$SRC")
	for n in 1 4; do
		db=$MY_PREFIX${MY_RUN}_c$n
		log "mariadb c$n: restoring the full into MariaDB database $db"
		my '' -e "CREATE DATABASE \`$db\`"
		"$SLUICE" restore --backup-target "file://$CHAIN" --target-driver mysql --target "$(my_dsn "$db")" --through "$full" >"$DIR/restore-mariadb-c$n.log" 2>&1 ||
			die "sluice restore into MariaDB database $db failed: $(tail -n 5 "$DIR/restore-mariadb-c$n.log")"
		restart_worker
		log "mariadb c$n: timing the broker (worker pid $WPID, $n lanes)"
		start_step "sluice-mariadb-c$n" "$SRC"
		t0=$(now)
		broker_until "$CHAIN" "bench-mariadb-c$n" "$full" "$n" "$inc" "$DIR/broker-mariadb-c$n.log" "mariadb:$db" --target-driver mysql --target "$(my_dsn "$db")"
		t1=$(now)
		M_RSS[$n]=$(hwm_mib "$WPID")
		end_step "sluice-mariadb-c$n" "$SRC"
		M_SECS[$n]=$(secs "$t0" "$t1")
		M_CPU[$n]=$(jq -nc --argjson w "$CPU_WORKER" --argjson y "$CPU_MARIADB" --argjson t "$CPU_TEMPORAL" \
			--argjson m "$CPU_BUSY" --argjson o "$CPU_OTHER" --argjson pct "$BUSY_PCT" --argjson x "$MY_COMMITS" \
			'{worker: $w, mariadb_server: $y, temporal_server: $t, other: $o, machine_busy: $m, machine_busy_pct: $pct, target_commits: $x}')
		my_sums=$(sums_mariadb "$db")
		[[ $my_sums == "$src_sums" ]] || die "mariadb c$n: MariaDB database $db differs from the source: $my_sums against $src_sums (logs: $DIR/broker-mariadb-c$n.log, $SLUICE_STATE/worker.log)"
		broker_stop "$CHAIN" "bench-mariadb-c$n"
		M_ACT[$n]=$(apply_activity_secs "bench-mariadb-c$n")
		log "mariadb c$n: ${M_SECS[$n]}s (apply activity ${M_ACT[$n]}s), peak RSS ${M_RSS[$n]} MiB, CPU ${M_CPU[$n]}; rows and sums equal the source"
		my '' -e "DROP DATABASE \`$db\`"
	done

	# --- 3. PostgreSQL ---------------------------------------------------
	log "timing PostgreSQL: ENABLE $SUBNAME until confirmed_flush_lsn >= $lsn1"
	local p0 p1 pg_s caught=0 i errs
	WPID=
	start_step pg "$SUB"
	p0=$(now)
	sql "$SUB" -c "ALTER SUBSCRIPTION $SUBNAME ENABLE"
	for ((i = 1; i <= 5 * 3600 * 5; i++)); do
		if [[ $(sql postgres -c "SELECT coalesce(confirmed_flush_lsn >= '$lsn1', false) FROM pg_replication_slots WHERE slot_name = '$SUBNAME'") == t ]]; then
			caught=1
			break
		fi
		if ((i % 25 == 0)); then
			errs=$(sql "$SUB" -c "SELECT apply_error_count FROM pg_stat_subscription_stats WHERE subname = '$SUBNAME'")
			((${errs:-0} == 0)) || die "the subscription reports $errs apply errors (PostgreSQL log)"
		fi
		sleep 0.2
	done
	p1=$(now)
	end_step pg "$SUB"
	((caught)) || die "the subscription did not confirm $lsn1 within 5 hours"
	pg_s=$(secs "$p0" "$p1")
	local pg_cpu
	pg_cpu=$(jq -nc --argjson p "$CPU_PG" --argjson a "$CPU_logical_replication_worker" --argjson w "$CPU_walsender" \
		--argjson t "$CPU_TEMPORAL" --argjson m "$CPU_BUSY" --argjson o "$CPU_OTHER" --argjson pct "$BUSY_PCT" --argjson x "$COMMITS" \
		'{postgres_total: $p, apply_worker: $a, walsender: $w, temporal_server: $t, other: $o, machine_busy: $m, machine_busy_pct: $pct, subscriber_commits: $x}')
	sql "$SUB" -c "ALTER SUBSCRIPTION $SUBNAME DISABLE"
	[[ $(fingerprint "$SUB" "${TABLES[@]}") == "$src_fp" ]] || die "the subscriber $SUB differs from the source"
	log "PostgreSQL: ${pg_s}s, CPU $pg_cpu; subscriber equals source"

	# --- 4. memory flatness ------------------------------------------------
	local rss_json=null
	if [[ $RSS == 1 ]]; then
		log "memory: source $RSS_SRC, chain $RSS_CHAIN"
		sql postgres -c "CREATE DATABASE $RSS_SRC"
		sql "$RSS_SRC" -c "CREATE TABLE bench_blob (id bigint PRIMARY KEY, rev integer NOT NULL, body text NOT NULL);
			INSERT INTO bench_blob SELECT g, 0, repeat(md5(g::text), 32) FROM generate_series(1, $SEED_BLOB) g;" -c 'VACUUM ANALYZE bench_blob'
		backup_full "$RSS_SRC" "$RSS_CHAIN" "$DIR/rss-backup-full.log"
		local rfull at next=$((SEED_BLOB + 1)) label mb rows rinc rman rraw rchg r0 r1 rsecs rhwm ract
		rfull=$(committed_id full "$DIR/rss-backup-full.log")
		[[ -n $rfull ]] || die "no full committed: $(tail -n 5 "$DIR/rss-backup-full.log")"
		restore_full "$RSS_CHAIN" "$rfull" "$RSS_DST" "$DIR/rss-restore.log"
		at=$rfull
		rss_json='[]'
		for label in small large; do
			[[ $label == small ]] && mb=$RSS_SMALL_MB || mb=$RSS_LARGE_MB
			# ~1090 raw bytes per change (1 KiB text plus key, columns, identity).
			rows=$((mb * 1000000 / 1090))
			log "memory/$label: ~$mb MB raw: $rows changes of 1 KiB rows"
			gen_blobs "$rows" "$next" >"$DIR/rss-$label.sql"
			read -r _ _ _ next < <(tail -n 1 "$DIR/rss-$label.sql")
			sql "$RSS_SRC" -f "$DIR/rss-$label.sql"
			rm -f "$DIR/rss-$label.sql"
			rinc=$(backup_incremental "$RSS_SRC" "$RSS_CHAIN" "$DIR/rss-backup-$label.log")
			rman=$(manifest_of "$RSS_CHAIN" "$rinc")
			rraw=$(raw_bytes "$rman")
			rchg=$(jq -r .changes "$rman")
			restart_worker
			log "memory/$label: broker over $rinc ($rchg changes, $rraw raw bytes), worker pid $WPID"
			r0=$(now)
			broker_until "$RSS_CHAIN" bench-rss "$at" "$RSS_LANES" "$rinc" "$DIR/broker-rss-$label.log" "$RSS_DST"
			r1=$(now)
			rhwm=$(hwm_mib "$WPID")
			rsecs=$(secs "$r0" "$r1")
			[[ $(fingerprint "$RSS_DST" bench_blob) == "$(fingerprint "$RSS_SRC" bench_blob)" ]] || die "memory/$label: $RSS_DST differs from $RSS_SRC"
			broker_stop "$RSS_CHAIN" bench-rss
			ract=$(apply_activity_secs bench-rss)
			log "memory/$label: $(awk -v b="$rraw" 'BEGIN { printf "%.1f", b / 1e6 }') MB raw applied in ${rsecs}s, peak RSS $rhwm MiB"
			rss_json=$(jq -c --arg l "$label" --arg id "$rinc" --argjson raw "$rraw" --argjson ch "$rchg" --argjson s "$rsecs" \
				--argjson a "$ract" --argjson h "$rhwm" --argjson lanes "$RSS_LANES" \
				'. + [{label: $l, incremental: $id, raw_bytes: $raw, raw_mb: ($raw / 1e6 * 10 | round / 10), changes: $ch,
					lanes: $lanes, seconds: $s, apply_activity_seconds: $a, peak_rss_mib: $h}]' <<<"$rss_json")
			at=$rinc
		done
	fi

	# --- 5. report -----------------------------------------------------------
	local r1s r4s rpg ratio1 ratio4 mem_kb cpu_model
	r1s=$(rate "$CHANGES" "${S_SECS[1]}")
	r4s=$(rate "$CHANGES" "${S_SECS[4]}")
	rpg=$(rate "$CHANGES" "$pg_s")
	ratio1=$(awk -v a="$r1s" -v b="$rpg" 'BEGIN { printf "%.3f", a / b }')
	ratio4=$(awk -v a="$r4s" -v b="$rpg" 'BEGIN { printf "%.3f", a / b }')
	sq_rate=$(rate "$CHANGES" "$sq_secs")
	sq_ratio=$(awk -v a="$sq_rate" -v b="$rpg" 'BEGIN { printf "%.3f", a / b }')
	local r1es r4es ratio1es ratio4es es1 es4
	r1es=$(rate "$CHANGES" "${S_SECS[1es]}")
	r4es=$(rate "$CHANGES" "${S_SECS[4es]}")
	ratio1es=$(awk -v a="$r1es" -v b="$rpg" 'BEGIN { printf "%.3f", a / b }')
	ratio4es=$(awk -v a="$r4es" -v b="$rpg" 'BEGIN { printf "%.3f", a / b }')
	# Encrypted + signed over plain, wall seconds (> 1: what sealing and signing cost).
	es1=$(awk -v a="${S_SECS[1es]}" -v b="${S_SECS[1]}" 'BEGIN { printf "%.3f", a / b }')
	es4=$(awk -v a="${S_SECS[4es]}" -v b="${S_SECS[4]}" 'BEGIN { printf "%.3f", a / b }')
	local m1s m4s mratio1 mratio4
	m1s=$(rate "$CHANGES" "${M_SECS[1]}")
	m4s=$(rate "$CHANGES" "${M_SECS[4]}")
	mratio1=$(awk -v a="$m1s" -v b="$rpg" 'BEGIN { printf "%.3f", a / b }')
	mratio4=$(awk -v a="$m4s" -v b="$rpg" 'BEGIN { printf "%.3f", a / b }')
	mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
	cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)

	jq -n --arg pg "$PGVER" --arg cpu "$cpu_model" --argjson nproc "$(nproc)" --argjson mem_kb "$mem_kb" --arg kernel "$(uname -r)" \
		--argjson changes "$CHANGES" --argjson tx "$tx" --argjson ins "$n_ins" --argjson upd "$n_upd" --argjson del "$n_del" \
		--argjson wal "$wal_bytes" --argjson gen_s "$gen_s" \
		--arg full "$full" --arg inc "$inc" --argjson raw "$m_raw" --argjson stored "$m_stored" --argjson chunks "$m_chunks" --argjson inc_s "$inc_s" \
		--argjson s1 "${S_SECS[1]}" --argjson s4 "${S_SECS[4]}" --argjson a1 "${S_ACT[1]}" --argjson a4 "${S_ACT[4]}" \
		--argjson r1 "$r1s" --argjson r4 "$r4s" --argjson h1 "${S_RSS[1]}" --argjson h4 "${S_RSS[4]}" \
		--argjson c1 "${S_CPU[1]}" --argjson c4 "${S_CPU[4]}" \
		--argjson ps "$pg_s" --argjson pr "$rpg" --argjson pc "$pg_cpu" \
		--argjson q1 "$ratio1" --argjson q4 "$ratio4" --argjson rss "$rss_json" \
		--argjson qs "$sq_secs" --argjson qa "$sq_act" --argjson qr "$sq_rate" --argjson qh "$sq_rss" --argjson qc "$sq_cpu" --argjson qq "$sq_ratio" \
		--argjson ms1 "${M_SECS[1]}" --argjson ms4 "${M_SECS[4]}" --argjson ma1 "${M_ACT[1]}" --argjson ma4 "${M_ACT[4]}" \
		--argjson mr1 "$m1s" --argjson mr4 "$m4s" --argjson mh1 "${M_RSS[1]}" --argjson mh4 "${M_RSS[4]}" \
		--argjson mc1 "${M_CPU[1]}" --argjson mc4 "${M_CPU[4]}" --argjson mq1 "$mratio1" --argjson mq4 "$mratio4" --argjson myset "$MYSET" \
		--arg efull "$full_es" --arg einc "$inc_es" --argjson estored "$es_stored" --argjson echunks "$es_chunks" --argjson einc_s "$inc_es_s" \
		--argjson es1 "${S_SECS[1es]}" --argjson es4 "${S_SECS[4es]}" --argjson ea1 "${S_ACT[1es]}" --argjson ea4 "${S_ACT[4es]}" \
		--argjson er1 "$r1es" --argjson er4 "$r4es" --argjson eh1 "${S_RSS[1es]}" --argjson eh4 "${S_RSS[4es]}" \
		--argjson ec1 "${S_CPU[1es]}" --argjson ec4 "${S_CPU[4es]}" --argjson eq1 "$ratio1es" --argjson eq4 "$ratio4es" \
		--argjson eo1 "$es1" --argjson eo4 "$es4" --arg ewrite "${ENC_WRITE[*]}" --arg eread "${ENC_READ[*]}" \
		'{
			machine: {nproc: $nproc, cpu_model: $cpu, mem_kb: $mem_kb, kernel: $kernel, postgres: $pg, mariadb: $myset},
			workload: {changes: $changes, transactions: $tx, inserts: $ins, updates: $upd, deletes: $del, wal_bytes: $wal, generate_seconds: $gen_s},
			chain: {full: $full, incremental: $inc, raw_bytes: $raw, stored_bytes: $stored, chunks: $chunks, backup_incremental_seconds: $inc_s},
			chain_enc_sig: {full: $efull, incremental: $einc, stored_bytes: $estored, chunks: $echunks, backup_incremental_seconds: $einc_s,
				write_flags: $ewrite, read_flags: $eread},
			sluice: {
				c1: {seconds: $s1, apply_activity_seconds: $a1, changes_per_second: $r1, peak_rss_mib: $h1, cpu_seconds: $c1},
				c4: {seconds: $s4, apply_activity_seconds: $a4, changes_per_second: $r4, peak_rss_mib: $h4, cpu_seconds: $c4},
				c1_enc_sig: {seconds: $es1, apply_activity_seconds: $ea1, changes_per_second: $er1, peak_rss_mib: $eh1, cpu_seconds: $ec1},
				c4_enc_sig: {seconds: $es4, apply_activity_seconds: $ea4, changes_per_second: $er4, peak_rss_mib: $eh4, cpu_seconds: $ec4},
				sqlite: {seconds: $qs, apply_activity_seconds: $qa, changes_per_second: $qr, peak_rss_mib: $qh, cpu_seconds: $qc},
				mariadb_c1: {seconds: $ms1, apply_activity_seconds: $ma1, changes_per_second: $mr1, peak_rss_mib: $mh1, cpu_seconds: $mc1},
				mariadb_c4: {seconds: $ms4, apply_activity_seconds: $ma4, changes_per_second: $mr4, peak_rss_mib: $mh4, cpu_seconds: $mc4}},
			postgres: {seconds: $ps, changes_per_second: $pr, cpu_seconds: $pc},
			ratio_changes_per_second: {c1_to_postgres: $q1, c4_to_postgres: $q4, sqlite_to_postgres: $qq,
				mariadb_c1_to_postgres: $mq1, mariadb_c4_to_postgres: $mq4, c1_enc_sig_to_postgres: $eq1, c4_enc_sig_to_postgres: $eq4},
			ratio_seconds_enc_sig_over_plain: {c1: $eo1, c4: $eo4},
			memory: $rss
		}' >"$DIR/apply.json"

	cat <<EOF

sluice apply benchmark — $(date -u +%FT%TZ)
machine    $(nproc) CPUs ($cpu_model), $((mem_kb / 1024)) MiB RAM, kernel $(uname -r), PostgreSQL $PGVER, MariaDB $MYVER
workload   $CHANGES changes ($n_ins ins, $n_upd upd, $n_del del) in $tx transactions of 1-1000
chain      incremental $inc: $m_chunks chunks, $(awk -v b="$m_raw" 'BEGIN { printf "%.1f", b / 1e6 }') MB raw, $(awk -v b="$m_stored" 'BEGIN { printf "%.1f", b / 1e6 }') MB stored
enc+sig    incremental $inc_es of the encrypted + signed chain (${ENC_WRITE[*]}; brokers read with ${ENC_READ[*]}): $es_chunks chunks, $(awk -v b="$es_stored" 'BEGIN { printf "%.1f", b / 1e6 }') MB stored

                    seconds   changes/s   vs PG   peak RSS MiB   CPU s; machine busy
sluice c1        $(printf '%9s %11s %7s %14s' "${S_SECS[1]}" "$r1s" "$ratio1" "${S_RSS[1]}")   $(jq -r '"worker \(.worker), postgres \(.postgres_total) (lanes \(.target_backends)), other \(.other); \(.machine_busy_pct) %"' <<<"${S_CPU[1]}")
sluice c1 enc+sig$(printf '%9s %11s %7s %14s' "${S_SECS[1es]}" "$r1es" "$ratio1es" "${S_RSS[1es]}")   $(jq -r '"worker \(.worker), postgres \(.postgres_total) (lanes \(.target_backends)), other \(.other); \(.machine_busy_pct) %"' <<<"${S_CPU[1es]}")
sluice c4        $(printf '%9s %11s %7s %14s' "${S_SECS[4]}" "$r4s" "$ratio4" "${S_RSS[4]}")   $(jq -r '"worker \(.worker), postgres \(.postgres_total) (lanes \(.target_backends)), other \(.other); \(.machine_busy_pct) %"' <<<"${S_CPU[4]}")
sluice c4 enc+sig$(printf '%9s %11s %7s %14s' "${S_SECS[4es]}" "$r4es" "$ratio4es" "${S_RSS[4es]}")   $(jq -r '"worker \(.worker), postgres \(.postgres_total) (lanes \(.target_backends)), other \(.other); \(.machine_busy_pct) %"' <<<"${S_CPU[4es]}")
sluice SQLite    $(printf '%9s %11s %7s %14s' "$sq_secs" "$sq_rate" "$sq_ratio" "$sq_rss")   $(jq -r '"worker \(.worker), other \(.other); \(.machine_busy_pct) %"' <<<"$sq_cpu")
sluice MariaDB c1$(printf '%9s %11s %7s %14s' "${M_SECS[1]}" "$m1s" "$mratio1" "${M_RSS[1]}")   $(jq -r '"worker \(.worker), mariadb \(.mariadb_server), other \(.other); \(.machine_busy_pct) %"' <<<"${M_CPU[1]}")
sluice MariaDB c4$(printf '%9s %11s %7s %14s' "${M_SECS[4]}" "$m4s" "$mratio4" "${M_RSS[4]}")   $(jq -r '"worker \(.worker), mariadb \(.mariadb_server), other \(.other); \(.machine_busy_pct) %"' <<<"${M_CPU[4]}")
PostgreSQL       $(printf '%9s %11s %7s %14s' "$pg_s" "$rpg" "1.000" "-")   $(jq -r '"postgres \(.postgres_total) (apply \(.apply_worker), walsender \(.walsender)), other \(.other); \(.machine_busy_pct) %"' <<<"$pg_cpu")
encrypted+signed / plain (seconds; > 1: what sealing and signing cost): c1 ${es1}x, c4 ${es4}x; worker CPU s c1 $(jq -r .worker <<<"${S_CPU[1es]}") / $(jq -r .worker <<<"${S_CPU[1]}"), c4 $(jq -r .worker <<<"${S_CPU[4es]}") / $(jq -r .worker <<<"${S_CPU[4]}"); apply activity c1 ${S_ACT[1es]} / ${S_ACT[1]} s, c4 ${S_ACT[4es]} / ${S_ACT[4]} s
target commits: c1 $(jq -r .target_commits <<<"${S_CPU[1]}"), c4 $(jq -r .target_commits <<<"${S_CPU[4]}"); MariaDB COMMITs (server-wide) c1 $(jq -r .target_commits <<<"${M_CPU[1]}"), c4 $(jq -r .target_commits <<<"${M_CPU[4]}"); subscriber commits $(jq -r .subscriber_commits <<<"$pg_cpu")

backend CPU per change: sluice lanes c1 $(jq -r --argjson n "$CHANGES" '.target_backends * 1e6 / $n | . * 10 | round / 10' <<<"${S_CPU[1]}") µs, c4 $(jq -r --argjson n "$CHANGES" '.target_backends * 1e6 / $n | . * 10 | round / 10' <<<"${S_CPU[4]}") µs; PostgreSQL's apply worker $(jq -r --argjson n "$CHANGES" '.apply_worker * 1e6 / $n | . * 10 | round / 10' <<<"$pg_cpu") µs (walsender $(jq -r --argjson n "$CHANGES" '.walsender * 1e6 / $n | . * 10 | round / 10' <<<"$pg_cpu") µs)
apply activity alone: c1 ${S_ACT[1]}s, c4 ${S_ACT[4]}s, SQLite ${sq_act}s, MariaDB c1 ${M_ACT[1]}s, c4 ${M_ACT[4]}s (the rest: workflow start, catalog poll, position polling)
(SQLite: one writer, into a file on this machine's disk; MariaDB: $MYVER on this machine, binlog $(jq -r 'if .log_bin == 1 then "on (\(.binlog_format))" else "off" end' <<<"$MYSET"), buffer pool $(jq -r '.innodb_buffer_pool_size / 1048576 | floor' <<<"$MYSET") MiB; PostgreSQL's figure is its own subscriber into PostgreSQL)
EOF
	if [[ $RSS == 1 ]]; then
		echo "memory ($RSS_LANES lanes):"
		jq -r '.[] | "  \(.label): \(.raw_mb) MB raw, \(.changes) changes, \(.seconds) s, peak RSS \(.peak_rss_mib) MiB"' <<<"$rss_json"
	else
		echo "memory: skipped (BENCH_RSS=0)"
	fi
	echo "results: $DIR/apply.json$([[ $TOP == 1 ]] && echo "; top -H samples: $DIR/*.top")"
}

main "$@"
