#!/usr/bin/env bash
# The main job on defaults that need nothing else: a demo source database on
# this machine's PostgreSQL with a live workload, the producer feeding a
# local-folder chain, and two brokers replaying it — into a second database
# and into an SQLite file — all as Temporal workflows you can watch in the UI.
#   demo.sh        start it all (again: it starts over)
#   demo.sh stop   stop the workload, let producer and broker catch up, stop
#                  them, compare the databases, and drop the chain's
#                  replication slot, so nothing holds WAL on the cluster
#   demo.sh clean  stop everything the demo runs and remove all it made: the
#                  slot, both databases, the chain folder and the SQLite file
# SLUICE_DEMO_DB names the source database (the replica is its name plus
# _replica, the broker streams are named after it); SLUICE_BIN the CLI.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}
PG=${SLUICE_DEMO_PG:-postgres://postgres@127.0.0.1:5432}
SRC_DB=${SLUICE_DEMO_DB:-sluice_demo}
DST_DB=${SRC_DB}_replica
CHAIN=file://$SLUICE_STATE/demo/chain
STREAM=${SRC_DB#sluice_}
SQLITE_STREAM=$STREAM-sqlite
SQLITE_FILE=$SLUICE_STATE/demo/replica.db
WORKLOAD_PID=$SLUICE_STATE/demo/workload.pid
SLUICE=${SLUICE_BIN:-bin/sluice}
SRC="$PG/$SRC_DB?sslmode=disable"
DST="$PG/$DST_DB?sslmode=disable"

psql_admin() { psql "$PG/postgres?sslmode=disable" -v ON_ERROR_STOP=1 -qtA "$@"; }
say() { printf 'demo: %s\n' "$*"; }

stop_workload() {
	if [[ -s $WORKLOAD_PID ]] && kill -0 "$(<"$WORKLOAD_PID")" 2>/dev/null; then
		kill "$(<"$WORKLOAD_PID")" 2>/dev/null || true
		say "workload stopped"
	fi
	rm -f "$WORKLOAD_PID"
}

# running ID: true while the workflow ID has a running execution.
running() { $SLUICE "$@" >/dev/null 2>&1; }

# stop_runs: ask the producer and both brokers to stop, and wait until none
# of them runs any more.
stop_runs() {
	$SLUICE backup stream stop --target "$CHAIN" >/dev/null 2>&1 || true
	$SLUICE sync from-backup stop --backup-target "$CHAIN" --stream-id "$STREAM" >/dev/null 2>&1 || true
	$SLUICE sync from-backup stop --backup-target "$CHAIN" --stream-id "$SQLITE_STREAM" >/dev/null 2>&1 || true
	wait_ended
}

# wait_ended: until neither the producer nor a broker of the demo runs.
wait_ended() {
	for _ in $(seq 1 120); do
		running backup stream status --target "$CHAIN" || running sync from-backup status --stream-id "$STREAM" ||
			running sync from-backup status --stream-id "$SQLITE_STREAM" || return 0
		sleep 0.5
	done
}

# drop_slots: drop the replication slots on the demo's source database once
# no walsender holds them (the producer's ends with its run). A slot left
# behind keeps every WAL segment of the whole cluster from then on.
drop_slots() {
	local slots
	for _ in $(seq 1 60); do
		[[ -z $(psql_admin -c "SELECT slot_name FROM pg_replication_slots WHERE database = '$SRC_DB' AND active") ]] && break
		sleep 0.5
	done
	slots=$(psql_admin -c "SELECT slot_name FROM pg_replication_slots WHERE database = '$SRC_DB' AND NOT active")
	for s in $slots; do
		psql_admin -c "SELECT pg_drop_replication_slot('$s')" >/dev/null &&
			say "dropped the replication slot $s on $SRC_DB (left behind, it would hold WAL for the whole cluster)"
	done
	if [[ -n $(psql_admin -c "SELECT slot_name FROM pg_replication_slots WHERE database = '$SRC_DB'") ]]; then
		say "a replication slot on $SRC_DB is still in use: see SELECT * FROM pg_replication_slots"
		return 1
	fi
}

compare() {
	local status=0 q a b t
	for t in customers orders page_views; do
		q="SELECT count(*) || ' rows, md5 ' || md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM public.$t x"
		a=$(psql "$SRC" -qtA -c "$q")
		b=$(psql "$DST" -qtA -c "$q")
		if [[ $a == "$b" ]]; then say "  $t: equal ($a)"; else say "  $t: DIFFERENT: source $a, replica $b"; status=1; fi
	done
	return $status
}

# compare_sqlite: the same tables' row counts in the SQLite replica (values
# are stored by the rules of docs/sqlite-target.md, so their text differs).
compare_sqlite() {
	local status=0 t a b
	if ! command -v sqlite3 >/dev/null; then
		say "  (sqlite3 is not installed: apt-get install sqlite3 to compare $SQLITE_FILE)"
		return 0
	fi
	for t in customers orders page_views; do
		a=$(psql "$SRC" -qtA -c "SELECT count(*) FROM public.$t")
		b=$(sqlite3 "$SQLITE_FILE" "SELECT count(*) FROM $t")
		if [[ $a == "$b" ]]; then say "  $t: $a rows in both"; else say "  $t: DIFFERENT: source $a rows, SQLite $b"; status=1; fi
	done
	return $status
}

# wait_applied STREAM: until the stream has applied the chain's newest link.
wait_applied() {
	local last applied
	for _ in $(seq 1 120); do
		last=$(ls -t "$SLUICE_STATE/demo/chain/manifests/" | head -n 1 | sed 's/\.json$//')
		applied=$($SLUICE sync from-backup status --stream-id "$1" --json 2>/dev/null | sed -n 's/.*"last_applied": "\([0-9a-f]*\)".*/\1/p')
		[[ -n $last && $applied == "$last" ]] && return 0
		sleep 0.5
	done
}

if [[ ${1:-} == stop ]]; then
	stop_workload
	target=$(psql "$SRC" -qtA -c "SELECT pg_current_wal_lsn()")
	say "waiting for the producer to capture everything up to $target"
	for _ in $(seq 1 120); do
		ok=$(psql "$SRC" -qtA -c "SELECT coalesce(bool_and(confirmed_flush_lsn >= '$target'), false) FROM pg_replication_slots WHERE database = '$SRC_DB' AND NOT temporary")
		[[ $ok == t ]] && break
		sleep 0.5
	done
	$SLUICE backup stream stop --target "$CHAIN" || true
	say "waiting for the brokers to apply the last incremental"
	wait_applied $STREAM
	wait_applied $SQLITE_STREAM
	$SLUICE sync from-backup stop --backup-target "$CHAIN" --stream-id "$STREAM" || true
	$SLUICE sync from-backup stop --backup-target "$CHAIN" --stream-id "$SQLITE_STREAM" || true
	wait_ended
	say "comparing $SRC_DB with $DST_DB"
	status=0
	compare || status=1
	say "comparing $SRC_DB with $SQLITE_FILE"
	compare_sqlite || status=1
	drop_slots || status=1
	say "the databases and the chain stay for you to look at; make demo-clean removes them"
	exit $status
fi

if [[ ${1:-} == clean ]]; then
	stop_workload
	stop_runs
	drop_slots
	psql_admin -c "DROP DATABASE IF EXISTS $SRC_DB WITH (FORCE)" -c "DROP DATABASE IF EXISTS $DST_DB WITH (FORCE)"
	rm -rf "$SLUICE_STATE/demo"
	say "removed $SRC_DB, $DST_DB, the chain and the SQLite replica under $SLUICE_STATE/demo"
	exit 0
fi

# Start over: stop what an earlier demo left running.
stop_workload
stop_runs

say "creating the source database $SRC_DB and an empty $DST_DB"
drop_slots >/dev/null || true
psql_admin -c "DROP DATABASE IF EXISTS $SRC_DB WITH (FORCE)" -c "DROP DATABASE IF EXISTS $DST_DB WITH (FORCE)"
psql_admin -c "CREATE DATABASE $SRC_DB" -c "CREATE DATABASE $DST_DB"
psql "$SRC" -v ON_ERROR_STOP=1 -q <<'SQL'
CREATE TYPE order_state AS ENUM ('new', 'paid', 'shipped', 'returned');
CREATE TABLE customers (
	id bigserial PRIMARY KEY,
	email text NOT NULL UNIQUE,
	name text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	tags text[]
);
CREATE TABLE orders (
	id bigserial PRIMARY KEY,
	customer_id bigint NOT NULL REFERENCES customers(id),
	state order_state NOT NULL DEFAULT 'new',
	total numeric(12,2) NOT NULL,
	placed_at timestamptz NOT NULL,
	details jsonb
);
CREATE INDEX orders_customer ON orders (customer_id);
CREATE TABLE page_views (path text, viewed_at timestamp, ms float8);
ALTER TABLE page_views REPLICA IDENTITY FULL;
INSERT INTO customers (email, name, tags)
	SELECT 'user' || i || '@example.org', 'User ' || i, ARRAY['t' || (i % 5)] FROM generate_series(1, 20000) i;
INSERT INTO orders (customer_id, state, total, placed_at, details)
	SELECT 1 + i % 20000, (ARRAY['new','paid','shipped','returned'])[1 + i % 4]::order_state,
	       (i % 1000) + 0.99, now() - i * interval '1 minute', jsonb_build_object('items', i % 7)
	FROM generate_series(1, 100000) i;
INSERT INTO page_views SELECT '/p/' || (i % 100), now()::timestamp - i * interval '1 second', random() * 100
	FROM generate_series(1, 50000) i;
SQL

rm -rf "$SLUICE_STATE/demo/chain" "$SQLITE_FILE" "$SQLITE_FILE"-wal "$SQLITE_FILE"-shm
mkdir -p "$SLUICE_STATE/demo"
say "Temporal UI: http://127.0.0.1:8233 (namespace ${TEMPORAL_NAMESPACE:-default})"
say "full backup of $SRC_DB into $CHAIN, anchored on its own replication slot"
$SLUICE backup full --source "$SRC" --target "$CHAIN" --chain-slot
say "starting the producer (an incremental every 2 s, a new segment every 20)"
$SLUICE backup stream run --source "$SRC" --target "$CHAIN" --rollover-window 2s --retain-rotate-at-chain-length 20 --detach
say "starting the broker into $DST_DB (cold start: it restores the chain, then tails it)"
$SLUICE sync from-backup run --backup-target "$CHAIN" --target "$DST" --stream-id "$STREAM" \
	--apply-concurrency 2 --poll-interval 1s --reset-target-data --yes --detach
say "starting a second broker into the SQLite file $SQLITE_FILE (one writer, its own stream)"
$SLUICE sync from-backup run --backup-target "$CHAIN" --target-driver sqlite --target "$SQLITE_FILE" --stream-id "$SQLITE_STREAM" \
	--poll-interval 1s --reset-target-data --yes --detach

say "starting a live workload on $SRC_DB"
(
	i=0
	while :; do
		i=$((i + 1))
		psql "$SRC" -q -c "BEGIN;
			INSERT INTO orders (customer_id, total, placed_at, details) SELECT 1 + (random() * 19999)::int, (random() * 500)::numeric(12,2), now(), '{\"live\": true}' FROM generate_series(1, 1 + $i % 20);
			UPDATE orders SET state = 'paid' WHERE id = (SELECT max(id) FROM orders) - $i % 50;
			UPDATE customers SET tags = tags || 'seen'::text WHERE id = 1 + $i % 20000;
			INSERT INTO page_views VALUES ('/live/' || $i % 10, now(), random() * 100);
			DELETE FROM page_views WHERE ctid = (SELECT ctid FROM page_views LIMIT 1);
			COMMIT;" || true
		sleep 0.2
	done
) </dev/null >>"$SLUICE_STATE/demo/workload.log" 2>&1 &
echo $! >"$WORKLOAD_PID"

# field KEY: the value of KEY in the JSON on stdin (flat keys, any order).
field() { tr -d '\n' | sed -nE 's/.*"'"$1"'": "?([^",}]*)"?.*/\1/p'; }
for _ in 1 2 3 4 5 6; do
	sleep 3
	json=$($SLUICE sync from-backup status --stream-id "$STREAM" --json 2>/dev/null || true)
	if [[ -z $json ]]; then
		say "broker: starting"
		continue
	fi
	verdict=$(field verdict <<<"$json")
	cause=$(field cause <<<"$json")
	say "broker: ${verdict}${cause:+ ($cause)}, $(field phase <<<"$json"):" \
		"$(field links_behind <<<"$json") links behind ($(field seconds_behind <<<"$json") s)," \
		"$(field incrementals_applied <<<"$json") incrementals and $(field changes_applied <<<"$json") changes applied"
done
say "running. Follow it:  bin/sluice sync from-backup status --stream-id $STREAM   /   bin/sluice backup stream status --target $CHAIN"
say "look at the SQLite replica: sqlite3 $SQLITE_FILE 'SELECT count(*) FROM orders'   (sqlite3 is in Debian's packages)"
say "  its broker: bin/sluice sync from-backup status --stream-id $SQLITE_STREAM"
say "stop it and compare: make demo-stop"
