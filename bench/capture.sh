#!/usr/bin/env bash
# bench/capture.sh: how fast sluice captures source changes into a chain
# (`sluice backup incremental`, pgoutput from the chain slot into chunks),
# beside how fast PostgreSQL's own logical replication decodes and applies the
# same changes into a second database on this machine, in the same run.
#
# It needs what `make worker` started: PostgreSQL on 127.0.0.1:5432 with
# wal_level logical, the Temporal dev server and a running sluice-worker.
#
# Steps: fresh source and subscriber databases with the same schema and seed
# rows; both consumers anchored before any change (sluice: a full backup with
# --chain-slot; PostgreSQL: a disabled subscription on a slot made here);
# BENCH_CHANGES changes in transactions of 1 to 1000 changes; then, timed one
# after the other, one sluice incremental up to now, and the subscription
# enabled until its slot has confirmed the position after the changes.
#
# Environment:
#   BENCH_CHANGES=1000000   row changes to generate (inserts, updates, deletes).
#   BENCH_DIR=/tmp/sluice-bench   work dir; this benchmark uses $BENCH_DIR/capture
#                           (chain, logs, top samples, capture.json).
#   BENCH_TOP=1             sample `top -b -n 1 -H` every BENCH_TOP_EVERY=1 s
#                           during each timed step into <step>.top (0: off).
#   BENCH_KEEP=0            1: keep the databases, slots and subscription.
#   BENCH_PG=postgres://postgres@127.0.0.1:5432   server (no password).
#
# Method and caveats:
#   - Wall clock around each step. The sluice step includes starting the
#     workflow through Temporal and following it, as a user sees it; the
#     PostgreSQL step includes starting the apply worker. A CHECKPOINT runs
#     (untimed) before each step. Both read WAL the generation just wrote, so
#     it is in the page cache for both.
#   - The two steps do not do the same work: sluice decodes (walsender) and
#     stores compressed chunks in a folder; PostgreSQL decodes (walsender) and
#     applies the changes to tables with their indexes. PostgreSQL 15 applies
#     updates and deletes of the keyless REPLICA IDENTITY FULL table with a
#     sequential scan of that table per row, so it is kept small (~2000 rows).
#   - WAL bytes is pg_wal_lsn_diff of pg_current_wal_lsn() after and before the
#     generation: the whole cluster's WAL for that span (generation is the only
#     writer this script runs).
#   - The sluice step is split, from the workflow history (when the temporal
#     CLI is at hand), into the capture activity and the rest (starting and
#     following the workflow).
#   - CPU seconds per step, from /proc: the sluice-worker process, the step's
#     walsender (the active pid of its slot), the subscription's apply worker,
#     and all PostgreSQL server processes (live ones plus the postmaster's
#     reaped children).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CHANGES=${BENCH_CHANGES:-1000000}
DIR=${BENCH_DIR:-/tmp/sluice-bench}/capture
TOP=${BENCH_TOP:-1}
TOP_EVERY=${BENCH_TOP_EVERY:-1}
KEEP=${BENCH_KEEP:-0}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}
ADMIN=${SLUICE_ADMIN_ADDR:-127.0.0.1:9464}
SLUICE=$ROOT/bin/sluice
TEMPORAL_CLI=$(command -v temporal || echo "${SLUICE_TOOLS:-$HOME/.cache/sluice/bin}/temporal")

SRC=sluice_bench_cap_src
SUB=sluice_bench_cap_sub
SUBNAME=bench_sub
PUB=sluice_all_tables
CHAIN=$DIR/chain
TABLES=(bench_wide bench_narrow bench_log)
# Seed rows: the keyless table stays near its seed size (inserts = deletes).
SEED_WIDE=100000
SEED_NARROW=100000
SEED_LOG=2000
HZ=$(getconf CLK_TCK)

BENCH_NAME=capture
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# --- clean up (idempotent: at start, at the end, and on failure) -----------

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
	if [[ $KEEP == 1 && ${1:-} != start ]]; then
		log "BENCH_KEEP=1: keeping $SRC, $SUB, their slots and the subscription"
		return "$rc"
	fi
	# The subscription first: it names a slot and holds its database.
	if db_exists "$SUB" && [[ $(sql "$SUB" -c "SELECT count(*) FROM pg_subscription WHERE subname = '$SUBNAME'") == 1 ]]; then
		sql "$SUB" -c "ALTER SUBSCRIPTION $SUBNAME DISABLE"
		sql "$SUB" -c "ALTER SUBSCRIPTION $SUBNAME SET (slot_name = NONE)"
		sql "$SUB" -c "DROP SUBSCRIPTION $SUBNAME"
	fi
	# The slots: the subscription's, the chain slot named by the manifests,
	# and any other slot of the source database (a run that failed before a
	# manifest existed). Only slots of databases this script owns.
	local slots=("$SUBNAME") m s
	if [[ -d $CHAIN/manifests ]]; then
		for m in "$CHAIN"/manifests/*.json; do
			[[ -f $m ]] && slots+=("$(jq -r '.source.slot // empty' "$m")")
		done
	fi
	if db_exists "$SRC"; then
		while read -r s; do slots+=("$s"); done < <(sql postgres -c "SELECT slot_name FROM pg_replication_slots WHERE database = '$SRC'")
	fi
	for s in $(printf '%s\n' "${slots[@]}" | sort -u); do
		[[ -n $s ]] || continue
		# Only a slot of our source database (or our subscription's name).
		[[ $(sql postgres -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$s' AND (database = '$SRC' OR slot_name = '$SUBNAME')") == 1 ]] || continue
		sql postgres -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$s' AND active_pid IS NOT NULL" >/dev/null
		for _ in $(seq 1 50); do
			[[ $(sql postgres -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$s' AND active") == 0 ]] && break
			sleep 0.1
		done
		sql postgres -c "SELECT pg_drop_replication_slot('$s')" >/dev/null && log "dropped slot $s"
	done
	sql postgres -c "DROP DATABASE IF EXISTS $SUB WITH (FORCE)"
	sql postgres -c "DROP DATABASE IF EXISTS $SRC WITH (FORCE)"
	return "$rc"
}

# --- checks ----------------------------------------------------------------

preflight() {
	[[ $CHANGES =~ ^[1-9][0-9]*$ ]] || die "BENCH_CHANGES must be a positive integer, not '$CHANGES'"
	command -v jq >/dev/null || die "jq is needed"
	command -v psql >/dev/null || die "psql is needed"
	[[ -x $SLUICE ]] || die "bin/sluice is missing; run make worker (it builds)"
	sql postgres -c 'SELECT 1' >/dev/null || die "no PostgreSQL at $PG; run make worker"
	[[ $(sql postgres -c 'SHOW wal_level') == logical ]] || die "wal_level is not logical; run make worker (deploy/dev/services.sh)"
	curl -fsS "http://$ADMIN/readyz" >/dev/null 2>&1 || die "no sluice worker answers on $ADMIN; run make worker"
	if [[ -s $SLUICE_STATE/worker.pid && $ROOT/bin/sluice-worker -nt $SLUICE_STATE/worker.pid ]]; then
		log "warning: bin/sluice-worker is newer than the running worker; run make worker to restart it"
	fi
	PGVER=$(sql postgres -c 'SHOW server_version')
	PGDATA_DIR=$(sql postgres -c 'SHOW data_directory')
	PGMAJOR=$(sql postgres -c 'SHOW server_version_num')
	PGMAJOR=$((PGMAJOR / 10000))
	((PGMAJOR >= 15)) || die "PostgreSQL 15 or later is needed (found $PGVER)"
}

worker_pid() {
	if [[ -s $SLUICE_STATE/worker.pid ]] && kill -0 "$(<"$SLUICE_STATE/worker.pid")" 2>/dev/null; then
		cat "$SLUICE_STATE/worker.pid"
	else
		pgrep -o -x sluice-worker || true
	fi
}

# --- schema and data -----------------------------------------------------

SCHEMA_SQL="
CREATE TABLE bench_wide (
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
CREATE TABLE bench_narrow (
	id bigint PRIMARY KEY,
	v  integer NOT NULL
);
CREATE TABLE bench_log (
	seq  bigint NOT NULL,
	kind text,
	at   timestamptz,
	val  integer
);
ALTER TABLE bench_log REPLICA IDENTITY FULL;
"

# Insert statements of rows lo..hi, deterministic (same values in both
# databases, so the subscriber starts equal to the source).
ins_wide() {
	printf "INSERT INTO bench_wide SELECT g, g %% 1000, (g %% 100000) / 100.0, 'item-' || md5(g::text), timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', g %% 3 = 0, jsonb_build_object('g', g, 'tag', 't' || g %% 17), md5(g::text)::uuid, g * 0.001 FROM generate_series(%d, %d) g;\n" "$1" "$2"
}
ins_narrow() { printf 'INSERT INTO bench_narrow SELECT g, g %% 100000 FROM generate_series(%d, %d) g;\n' "$1" "$2"; }
ins_log() {
	printf "INSERT INTO bench_log SELECT g, (ARRAY['info','warn','error'])[1 + g %% 3], timestamptz '2024-01-01 00:00:00+00' + g * interval '1 ms', g %% 7919 FROM generate_series(%d, %d) g;\n" "$1" "$2"
}

create_dbs() {
	local db
	for db in "$SRC" "$SUB"; do
		sql postgres -c "CREATE DATABASE $db"
		{
			echo "$SCHEMA_SQL"
			ins_wide 1 "$SEED_WIDE"
			ins_narrow 1 "$SEED_NARROW"
			ins_log 1 "$SEED_LOG"
			echo "VACUUM ANALYZE;"
		} | sql "$db"
	done
}

# gen_sql: the change workload as SQL on stdout, one transaction per
# BEGIN/COMMIT. Transaction sizes are log-uniform in 1..1000 (fixed seed);
# each transaction's changes are split over nine (table, operation) kinds by
# fixed shares, carrying remainders across transactions. Keys stay contiguous
# per table (inserts above the top, deletes from the bottom, updates of ranges
# inside), so every statement changes exactly the rows it counts. The last
# line, "-- stats ...", gives the transaction count and expected row counts.
gen_sql() {
	awk -v total="$CHANGES" -v sw="$SEED_WIDE" -v sn="$SEED_NARROW" -v sl="$SEED_LOG" '
	function ins(t, n,   a, b) {
		a = hi[t] + 1; b = hi[t] + n; hi[t] = b
		if (t == "w") printf "INSERT INTO bench_wide SELECT g, g %% 1000, (g %% 100000) / 100.0, \x27item-\x27 || md5(g::text), timestamptz \x272024-01-01 00:00:00+00\x27 + g * interval \x271 second\x27, g %% 3 = 0, jsonb_build_object(\x27g\x27, g, \x27tag\x27, \x27t\x27 || g %% 17), md5(g::text)::uuid, g * 0.001 FROM generate_series(%d, %d) g;\n", a, b
		else if (t == "n") printf "INSERT INTO bench_narrow SELECT g, g %% 100000 FROM generate_series(%d, %d) g;\n", a, b
		else printf "INSERT INTO bench_log SELECT g, (ARRAY[\x27info\x27,\x27warn\x27,\x27error\x27])[1 + g %% 3], timestamptz \x272024-01-01 00:00:00+00\x27 + g * interval \x271 ms\x27, g %% 7919 FROM generate_series(%d, %d) g;\n", a, b
	}
	function upd(t, n,   cnt, a, b) {
		cnt = hi[t] - lo[t] + 1
		if (n > cnt) { print "gen: table " t " too small" > "/dev/stderr"; exit 1 }
		a = lo[t] + pos[t] % (cnt - n + 1); b = a + n - 1
		pos[t] += n * 7 + 13
		if (t == "w") printf "UPDATE bench_wide SET qty = qty + 1, price = price + 0.01, label = \x27upd-\x27 || md5((id + qty)::text), active = NOT active, attrs = attrs || jsonb_build_object(\x27u\x27, qty + 1), score = score + 1 WHERE id BETWEEN %d AND %d;\n", a, b
		else if (t == "n") printf "UPDATE bench_narrow SET v = v + 1 WHERE id BETWEEN %d AND %d;\n", a, b
		else printf "UPDATE bench_log SET val = val + 1, kind = kind || \x27+\x27 WHERE seq BETWEEN %d AND %d;\n", a, b
	}
	function del(t, n,   a, b) {
		if (n > hi[t] - lo[t] + 1) { print "gen: table " t " too small" > "/dev/stderr"; exit 1 }
		a = lo[t]; b = lo[t] + n - 1; lo[t] = b + 1
		if (t == "w") printf "DELETE FROM bench_wide WHERE id BETWEEN %d AND %d;\n", a, b
		else if (t == "n") printf "DELETE FROM bench_narrow WHERE id BETWEEN %d AND %d;\n", a, b
		else printf "DELETE FROM bench_log WHERE seq BETWEEN %d AND %d;\n", a, b
	}
	BEGIN {
		srand(20240101)
		lo["w"] = 1; hi["w"] = sw; lo["n"] = 1; hi["n"] = sn; lo["l"] = 1; hi["l"] = sl
		# kind: table, operation, share per mille (sums to 1000; keyless
		# inserts = deletes so that table stays near its seed size).
		K = 9
		split("w w w n n n l l l", kt, " ")
		split("i u d i u d i u d", ko, " ")
		split("250 250 100 120 130 80 30 10 30", kw, " ")
		done = 0; tx = 0
		while (done < total) {
			k = int(exp(rand() * log(1001)))
			if (k < 1) k = 1
			if (k > 1000) k = 1000
			if (k > total - done) k = total - done
			s = 0
			for (i = 1; i <= K; i++) { acc[i] += k * kw[i] / 1000; n[i] = int(acc[i]); acc[i] -= n[i]; s += n[i] }
			for (; s < k; s++) {
				best = 1
				for (i = 2; i <= K; i++) if (acc[i] > acc[best]) best = i
				n[best]++; acc[best] -= 1
			}
			print "BEGIN;"
			for (i = 1; i <= K; i++) {
				if (n[i] == 0) continue
				if (ko[i] == "i") ins(kt[i], n[i])
				else if (ko[i] == "u") upd(kt[i], n[i])
				else del(kt[i], n[i])
				cnt[ko[i]] += n[i]
			}
			print "COMMIT;"
			done += k; tx++
		}
		printf "-- stats %d %d %d %d %d %d %d\n", tx, hi["w"] - lo["w"] + 1, hi["n"] - lo["n"] + 1, hi["l"] - lo["l"] + 1, cnt["i"], cnt["u"], cnt["d"]
	}'
}

# counts DB: "n1 n2 n3" row counts of the tables.
counts() {
	sql "$1" -c "SELECT (SELECT count(*) FROM bench_wide) || ' ' || (SELECT count(*) FROM bench_narrow) || ' ' || (SELECT count(*) FROM bench_log)"
}
# digest DB: an order-independent hash of every table's rows.
digest() {
	local t q=""
	for t in "${TABLES[@]}"; do
		q+="${q:+ || ' ' || }(SELECT coalesce(sum(hashtext(x::text)::bigint), 0) FROM $t x)"
	done
	sql "$1" -c "SELECT $q"
}

# --- sampling during a timed step ----------------------------------------

# sampler STEP SLOT: every 0.5 s, the CPU ticks of the walsender of SLOT and
# of the subscription's apply worker (both exit with their step, so the last
# sample is kept); with BENCH_TOP=1 a `top -H` snapshot every TOP_EVERY s.
sampler() {
	local step=$1 slot=$2 last_top=0 t ws ap
	: >"$DIR/$step.top"
	while :; do
		read -r ws ap < <(sql postgres -F ' ' -c "SELECT (SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$slot'), (SELECT pid FROM pg_stat_subscription WHERE subname = '$SUBNAME' AND relid IS NULL)" 2>/dev/null || true)
		printf '%s %s %s %s %s\n' "$(now)" "${ws:-}" "$(ticks "${ws:-}")" "${ap:-}" "$(ticks "${ap:-}")" >>"$DIR/$step.samples"
		t=$(date +%s)
		if [[ $TOP == 1 ]] && ((t - last_top >= TOP_EVERY)); then
			{
				echo "=== $(date +%T)"
				top -b -n 1 -H -w 200 | head -n 25
			} >>"$DIR/$step.top" 2>/dev/null
			last_top=$t
		fi
		sleep 0.5
	done
}
start_sampler() {
	: >"$DIR/$1.samples"
	sampler "$1" "$2" &
	SAMPLER_PID=$!
}
stop_sampler() {
	kill "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" 2>/dev/null || true
	SAMPLER_PID=
}
# max_ticks STEP COLUMN: the largest tick count seen in a samples column, in seconds.
max_secs() {
	awk -v c="$2" -v hz="$HZ" '$c + 0 > m { m = $c + 0 } END { printf "%.2f", m / hz }' "$DIR/$1.samples"
}

# activity_secs WORKFLOW_ID: seconds between the first activity's start and
# its completion in the workflow's history ("null" without the temporal CLI).
activity_secs() {
	[[ -x $TEMPORAL_CLI ]] || {
		echo null
		return
	}
	"$TEMPORAL_CLI" workflow show -w "$1" -o json 2>/dev/null | jq -r '
		def t: sub("\\.[0-9]+Z$"; "Z") as $s | (capture("\\.(?<f>[0-9]+)Z$").f // "0") as $f
			| ($s | fromdateiso8601) + ("0." + $f | tonumber);
		[.events[] | select(.eventType == "EVENT_TYPE_ACTIVITY_TASK_STARTED" or .eventType == "EVENT_TYPE_ACTIVITY_TASK_COMPLETED") | .eventTime | t]
		| if length >= 2 then ((.[-1] - .[0]) * 1000 | round / 1000) else null end' 2>/dev/null || echo null
}

# --- main ------------------------------------------------------------------

main() {
	preflight
	log "cleaning up any previous run"
	(cleanup start)
	trap cleanup EXIT
	trap 'exit 130' INT TERM
	rm -rf "$DIR"
	mkdir -p "$DIR"

	log "creating $SRC and $SUB (schema + seed rows)"
	create_dbs

	log "anchoring sluice: full backup with --chain-slot into $CHAIN"
	"$SLUICE" backup full --source "$(dsn "$SRC")" --target "file://$CHAIN" --chain-slot >"$DIR/sluice-full.log" 2>&1 ||
		die "sluice backup full failed: $(tail -n 5 "$DIR/sluice-full.log")"
	[[ $(sql "$SRC" -c "SELECT count(*) FROM pg_publication WHERE pubname = '$PUB'") == 1 ]] || die "publication $PUB missing after the full backup"

	log "anchoring PostgreSQL: slot $SUBNAME and a disabled subscription in $SUB"
	sql "$SRC" -c "SELECT pg_create_logical_replication_slot('$SUBNAME', 'pgoutput')" >/dev/null
	sql "$SUB" -c "CREATE SUBSCRIPTION $SUBNAME CONNECTION 'host=127.0.0.1 dbname=$SRC user=postgres' PUBLICATION $PUB WITH (create_slot = false, slot_name = '$SUBNAME', enabled = false, copy_data = false)"

	log "generating $CHANGES changes on $SRC"
	gen_sql >"$DIR/changes.sql"
	local stats tx exp_w exp_n exp_l n_ins n_upd n_del
	stats=$(tail -n 1 "$DIR/changes.sql")
	read -r _ _ tx exp_w exp_n exp_l n_ins n_upd n_del <<<"$stats"
	local stat_q="SELECT sum(n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables"
	local stat0 lsn0 lsn1 t0 t1 gen_s
	stat0=$(sql "$SRC" -c "$stat_q")
	lsn0=$(sql "$SRC" -c 'SELECT pg_current_wal_lsn()')
	t0=$(now)
	sql "$SRC" -f "$DIR/changes.sql"
	t1=$(now)
	lsn1=$(sql "$SRC" -c 'SELECT pg_current_wal_lsn()')
	gen_s=$(secs "$t0" "$t1")
	local wal_bytes src_counts stat1
	wal_bytes=$(sql "$SRC" -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')::bigint")
	src_counts=$(counts "$SRC")
	[[ $src_counts == "$exp_w $exp_n $exp_l" ]] || die "source row counts $src_counts, the generator expected $exp_w $exp_n $exp_l"
	sleep 1
	stat1=$(sql "$SRC" -c "$stat_q")
	(( stat1 - stat0 == CHANGES )) || die "the source counted $((stat1 - stat0)) row changes (pg_stat_user_tables), expected $CHANGES"
	log "generated $CHANGES changes ($n_ins inserts, $n_upd updates, $n_del deletes) in $tx transactions in ${gen_s}s; WAL $lsn0 → $lsn1 ($wal_bytes bytes)"

	# --- sluice -----------------------------------------------------------
	local wpid wt0 wt1 pt0 pt1 s_t0 s_t1 sluice_s chain_slot
	chain_slot=$(jq -r '.source.slot' "$(ls -t "$CHAIN"/manifests/*.json | head -n 1)")
	sql postgres -c CHECKPOINT
	wpid=$(worker_pid)
	[[ -n $wpid ]] || log "warning: no local sluice-worker process found; worker CPU is not measured"
	log "timing sluice: backup incremental (worker pid ${wpid:-?}, chain slot $chain_slot)"
	wt0=$(ticks "$wpid")
	pt0=$(pg_ticks)
	start_sampler sluice "$chain_slot"
	s_t0=$(now)
	"$SLUICE" backup incremental --source "$(dsn "$SRC")" --target "file://$CHAIN" >"$DIR/sluice-incremental.log" 2>&1 ||
		die "sluice backup incremental failed: $(tail -n 5 "$DIR/sluice-incremental.log") (worker log $SLUICE_STATE/worker.log)"
	s_t1=$(now)
	stop_sampler
	wt1=$(ticks "$wpid")
	pt1=$(pg_ticks)
	sluice_s=$(secs "$s_t0" "$s_t1")
	local act_s
	act_s=$(activity_secs "backup-incremental/file://$CHAIN")
	[[ -n $act_s ]] || act_s=null
	[[ $(worker_pid) == "$wpid" ]] || log "warning: the sluice worker restarted during the step; its CPU figure is unreliable"
	local sluice_worker_cpu sluice_ws_cpu sluice_pg_cpu
	sluice_worker_cpu=$(awk -v a="$wt0" -v b="$wt1" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz }')
	sluice_pg_cpu=$(awk -v a="$pt0" -v b="$pt1" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz }')
	sluice_ws_cpu=$(max_secs sluice 3)

	local manifest kind m_changes m_tx m_bytes m_raw m_chunks m_end
	manifest=$(ls -t "$CHAIN"/manifests/*.json | head -n 1)
	kind=$(jq -r .kind "$manifest")
	[[ $kind == incremental ]] || die "the newest manifest $manifest is a $kind, not the incremental"
	m_changes=$(jq -r '.changes // 0' "$manifest")
	m_tx=$(jq -r '.transactions // 0' "$manifest")
	m_bytes=$(jq -r '[.chunks[]?.size] | add // 0' "$manifest")
	m_raw=$(jq -r '[.chunks[]?.raw_size] | add // 0' "$manifest")
	m_chunks=$(jq -r '.chunks | length' "$manifest")
	m_end=$(jq -r .end_position "$manifest")
	((m_changes == CHANGES)) || die "the incremental holds $m_changes changes, expected $CHANGES ($manifest)"
	((m_tx == tx)) || log "warning: the incremental holds $m_tx transactions, the generator ran $tx"
	log "sluice: ${sluice_s}s, $m_changes changes, $m_tx transactions, $m_chunks chunks, $m_bytes bytes stored (end $m_end)"

	# --- PostgreSQL -------------------------------------------------------
	local p_t0 p_t1 pg_s pt2 pt3 caught=0 errs
	sql postgres -c CHECKPOINT
	log "timing PostgreSQL: ALTER SUBSCRIPTION $SUBNAME ENABLE until confirmed_flush_lsn >= $lsn1"
	pt2=$(pg_ticks)
	start_sampler pg "$SUBNAME"
	p_t0=$(now)
	sql "$SUB" -c "ALTER SUBSCRIPTION $SUBNAME ENABLE"
	for i in $(seq 1 36000); do
		if [[ $(sql postgres -c "SELECT coalesce(confirmed_flush_lsn >= '$lsn1'::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = '$SUBNAME'") == t ]]; then
			caught=1
			break
		fi
		if ((i % 50 == 0)); then
			errs=$(sql "$SUB" -c "SELECT apply_error_count FROM pg_stat_subscription_stats WHERE subname = '$SUBNAME'")
			((${errs:-0} == 0)) || die "the subscription reports $errs apply errors (see the PostgreSQL log)"
		fi
		sleep 0.1
	done
	p_t1=$(now)
	stop_sampler
	pt3=$(pg_ticks)
	((caught)) || die "the subscription did not confirm $lsn1 within an hour"
	pg_s=$(secs "$p_t0" "$p_t1")
	local pg_ws_cpu pg_apply_cpu pg_pg_cpu
	pg_ws_cpu=$(max_secs pg 3)
	pg_apply_cpu=$(max_secs pg 5)
	pg_pg_cpu=$(awk -v a="$pt2" -v b="$pt3" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz }')
	sql "$SUB" -c "ALTER SUBSCRIPTION $SUBNAME DISABLE"

	local sub_counts src_digest sub_digest
	sub_counts=$(counts "$SUB")
	[[ $sub_counts == "$src_counts" ]] || die "subscriber row counts ($sub_counts) differ from the source's ($src_counts)"
	src_digest=$(digest "$SRC")
	sub_digest=$(digest "$SUB")
	[[ $src_digest == "$sub_digest" ]] || die "subscriber rows differ from the source's (row hashes $sub_digest vs $src_digest)"
	log "PostgreSQL: ${pg_s}s; subscriber rows equal the source's ($src_counts)"

	# --- report -----------------------------------------------------------
	local s_rate p_rate ratio bpc wal_mbs mem_kb cpu_model
	s_rate=$(awk -v c="$m_changes" -v s="$sluice_s" 'BEGIN { printf "%.0f", c / s }')
	p_rate=$(awk -v c="$CHANGES" -v s="$pg_s" 'BEGIN { printf "%.0f", c / s }')
	ratio=$(awk -v a="$s_rate" -v b="$p_rate" 'BEGIN { printf "%.3f", a / b }')
	bpc=$(awk -v b="$m_bytes" -v c="$m_changes" 'BEGIN { printf "%.2f", b / c }')
	wal_mbs=$(awk -v b="$wal_bytes" -v s="$sluice_s" 'BEGIN { printf "%.2f", b / 1e6 / s }')
	mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
	cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)

	jq -n \
		--arg pg_version "$PGVER" --arg cpu_model "$cpu_model" \
		--argjson nproc "$(nproc)" --argjson mem_kb "$mem_kb" \
		--argjson changes "$CHANGES" --argjson transactions "$tx" \
		--argjson inserts "$n_ins" --argjson updates "$n_upd" --argjson deletes "$n_del" \
		--arg lsn_before "$lsn0" --arg lsn_after "$lsn1" --argjson wal_bytes "$wal_bytes" \
		--argjson gen_seconds "$gen_s" \
		--argjson s_seconds "$sluice_s" --argjson s_activity "$act_s" --argjson s_rate "$s_rate" --argjson s_changes "$m_changes" \
		--argjson s_tx "$m_tx" --argjson s_bytes "$m_bytes" --argjson s_raw "$m_raw" --argjson s_chunks "$m_chunks" \
		--argjson bpc "$bpc" --argjson wal_mbs "$wal_mbs" --arg manifest "$(basename "$manifest")" \
		--argjson s_worker_cpu "$sluice_worker_cpu" --argjson s_ws_cpu "$sluice_ws_cpu" --argjson s_pg_cpu "$sluice_pg_cpu" \
		--argjson p_seconds "$pg_s" --argjson p_rate "$p_rate" \
		--argjson p_ws_cpu "$pg_ws_cpu" --argjson p_apply_cpu "$pg_apply_cpu" --argjson p_pg_cpu "$pg_pg_cpu" \
		--argjson ratio "$ratio" --arg rows "$src_counts" \
		'{
			machine: {nproc: $nproc, mem_kb: $mem_kb, cpu_model: $cpu_model, postgres: $pg_version},
			workload: {changes: $changes, transactions: $transactions, inserts: $inserts, updates: $updates, deletes: $deletes,
				lsn_before: $lsn_before, lsn_after: $lsn_after, wal_bytes: $wal_bytes, generate_seconds: $gen_seconds,
				final_rows: ($rows | split(" ") | map(tonumber) | {bench_wide: .[0], bench_narrow: .[1], bench_log: .[2]})},
			sluice: {seconds: $s_seconds, capture_activity_seconds: $s_activity, changes_per_second: $s_rate, changes: $s_changes, transactions: $s_tx,
				chunks: $s_chunks, stored_bytes: $s_bytes, raw_bytes: $s_raw, bytes_per_change: $bpc, wal_mb_per_second: $wal_mbs,
				manifest: $manifest, cpu_seconds: {worker: $s_worker_cpu, walsender: $s_ws_cpu, postgres_total: $s_pg_cpu}},
			postgres: {seconds: $p_seconds, changes_per_second: $p_rate,
				cpu_seconds: {walsender: $p_ws_cpu, apply_worker: $p_apply_cpu, postgres_total: $p_pg_cpu}},
			ratio_sluice_to_postgres_changes_per_second: $ratio
		}' >"$DIR/capture.json"

	cat <<EOF

sluice capture benchmark — $(date -u +%FT%TZ)
machine     $(nproc) CPUs ($cpu_model), $((mem_kb / 1024)) MiB RAM, PostgreSQL $PGVER
workload    $CHANGES changes ($n_ins ins, $n_upd upd, $n_del del) in $tx transactions of 1-1000
            WAL $lsn0 → $lsn1: $wal_bytes bytes ($(awk -v b="$wal_bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB), generated in ${gen_s}s

                     seconds    changes/s   CPU s (process / walsender / all PostgreSQL)
sluice capture     $(printf '%9s %12s' "$sluice_s" "$s_rate")   worker $sluice_worker_cpu / $sluice_ws_cpu / $sluice_pg_cpu
PostgreSQL apply   $(printf '%9s %12s' "$pg_s" "$p_rate")   apply $pg_apply_cpu / $pg_ws_cpu / $pg_pg_cpu

sluice: capture activity ${act_s}s of the ${sluice_s}s (the rest: starting and following the workflow)
sluice: $m_changes changes, $m_tx transactions, $m_chunks chunks, $m_bytes bytes stored ($bpc bytes/change), $wal_mbs MB/s of WAL
ratio sluice / PostgreSQL changes/s: $ratio
results: $DIR/capture.json$([[ $TOP == 1 ]] && echo "; top -H samples: $DIR/sluice.top, $DIR/pg.top")
EOF
}

main "$@"
