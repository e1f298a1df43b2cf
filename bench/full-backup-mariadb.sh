#!/usr/bin/env bash
# bench/full-backup-mariadb.sh: how fast `sluice backup full --source-driver
# mariadb` copies a MariaDB database into a chain, beside `mariadb-dump
# --single-transaction` of the same database into a file, on this machine in
# the same run. `make bench-full` runs it after bench/full-backup.sh (the
# MariaDB source row).
#
# It needs what `make worker` started: MariaDB on 127.0.0.1:3306 with its
# binlog on (deploy/dev/services.sh), the Temporal dev server and a running
# sluice-worker.
#
# Data: BENCH_MY_ROWS rows (default 2,000,000; BENCH_SCALE multiplies it as
# for bench/full-backup.sh) over a wide keyed table of many MySQL types (half
# the rows), a narrow keyed table (a third) and a keyless log table (the
# rest). Each tool runs BENCH_RUNS times (default 2) after an untimed
# warm-up of each; the figures are the medians.
#
# Caveats: wall clock; the sluice step includes starting the workflow
# through Temporal and following it, reads with --parallel BENCH_PARALLEL
# (default 2) and writes zstd chunks; mariadb-dump reads one table at a time
# and writes SQL text uncompressed. Both read the tables from the buffer pool
# after the warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SCALE=${BENCH_SCALE:-1}
ROWS=$(awk -v r="${BENCH_MY_ROWS:-2000000}" -v s="$SCALE" 'BEGIN { printf "%d", r * s }')
RUNS=${BENCH_RUNS:-2}
PARALLEL=${BENCH_PARALLEL:-2}
DIR=${BENCH_DIR:-/tmp/sluice-bench}/full-mariadb
KEEP=${BENCH_KEEP:-0}
MY=${BENCH_MARIADB:-mysql://root@127.0.0.1:3306}
SLUICE=$ROOT/bin/sluice
DB=sluice_bench_full_my_src

BENCH_NAME=full-mariadb
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
my_parse

cleanup() {
	[[ $KEEP == 1 ]] || my '' -e "DROP DATABASE IF EXISTS $DB" 2>/dev/null || true
}
trap cleanup EXIT

for cmd in mariadb mariadb-dump jq awk du; do
	command -v "$cmd" >/dev/null || die "$cmd is not installed"
done
[[ -x $SLUICE ]] || die "$SLUICE is missing; run make build"
my '' -e 'SELECT 1' >/dev/null || die "MariaDB does not answer at $MY; run make services"

rm -rf "$DIR"
mkdir -p "$DIR"
wide=$((ROWS / 2))
narrow=$((ROWS / 3))
logrows=$((ROWS - wide - narrow))
log "database $DB: $wide wide, $narrow narrow and $logrows keyless rows"
t0=$(now)
my '' -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB CHARACTER SET utf8mb4"
my "$DB" >/dev/null <<SQL
CREATE TABLE wide (id bigint PRIMARY KEY, qty int unsigned, big bigint unsigned, price decimal(14,4), label varchar(64),
  body text, at datetime(6), ts timestamp(6) NULL DEFAULT NULL, d date, tm time(6), y year, active boolean,
  flags bit(8), size enum('s','m','l'), tags set('a','b','c'), attrs json, u uuid, raw varbinary(32), score double);
CREATE TABLE narrow (id bigint PRIMARY KEY, v int);
CREATE TABLE log (seq bigint, kind varchar(8), at datetime(6), val int);
INSERT INTO wide SELECT seq, seq % 1000, 18446744073709551615 - seq, (seq % 100000) / 100, CONCAT('item-', MD5(seq)),
  REPEAT(MD5(seq), 4), '2024-01-01' + INTERVAL seq SECOND, '2024-01-01' + INTERVAL seq SECOND, '2024-01-01' + INTERVAL seq % 3000 DAY,
  SEC_TO_TIME(seq % 86400), 1901 + seq % 255, seq % 3 = 0, seq % 256, ELT(1 + seq % 3, 's', 'm', 'l'), ELT(1 + seq % 4, '', 'a', 'a,b', 'a,b,c'),
  JSON_OBJECT('g', seq, 'tag', CONCAT('t', seq % 17)), UUID(), UNHEX(MD5(seq)), seq * 0.001 FROM seq_1_to_$wide;
INSERT INTO narrow SELECT seq, seq % 100000 FROM seq_1_to_$narrow;
INSERT INTO log SELECT seq % 1000, ELT(1 + seq % 3, 'info', 'warn', 'error'), '2024-01-01' + INTERVAL seq SECOND, seq % 7919 FROM seq_1_to_$logrows;
ANALYZE TABLE wide, narrow, log;
SQL
log "generated in $(secs "$t0" "$(now)")s; data $(my '' -e "SELECT ROUND(SUM(data_length) / 1e6) FROM information_schema.tables WHERE table_schema = '$DB'") MB"

sluice_full() { "$SLUICE" backup full --source-driver mariadb --source "$(my_dsn "$DB")" --target "file://$1" --parallel "$PARALLEL"; }
dump() { mariadb-dump "${MY_OPTS[@]}" --single-transaction "$DB" >"$1"; }

log "warm-up (untimed)"
sluice_full "$DIR/warm-chain" >"$DIR/warm.log" 2>&1 || die "sluice backup full failed ($DIR/warm.log)"
dump "$DIR/warm.sql" 2>>"$DIR/warm.log" || die "mariadb-dump failed ($DIR/warm.log)"
rm -rf "$DIR/warm-chain" "$DIR/warm.sql"

S=()
D=()
for r in $(seq 1 "$RUNS"); do
	rm -rf "$DIR/chain" "$DIR/dump.sql"
	t0=$(now)
	sluice_full "$DIR/chain" >"$DIR/sluice-$r.log" 2>&1 || die "sluice backup full failed ($DIR/sluice-$r.log)"
	S+=("$(secs "$t0" "$(now)")")
	t0=$(now)
	dump "$DIR/dump.sql" 2>"$DIR/dump-$r.log" || die "mariadb-dump failed ($DIR/dump-$r.log)"
	D+=("$(secs "$t0" "$(now)")")
	log "run $r: sluice ${S[-1]}s, mariadb-dump ${D[-1]}s"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
s_s=$(median "${S[@]}")
d_s=$(median "${D[@]}")
full_rows=$(jq -r '.rows // 0' "$(ls -t "$DIR"/chain/manifests/*.json | head -n 1)")
[[ $full_rows == "$ROWS" ]] || die "the full holds $full_rows rows, not $ROWS"
s_rate=$(awk -v n="$ROWS" -v s="$s_s" 'BEGIN { printf "%.0f", n / s }')
d_rate=$(awk -v n="$ROWS" -v s="$d_s" 'BEGIN { printf "%.0f", n / s }')
ratio=$(awk -v a="$d_s" -v b="$s_s" 'BEGIN { printf "%.2f", a / b }')
cat <<EOF

=== full backup, MariaDB source: $ROWS rows, median of $RUNS runs ===
versions: $(mariadb --version | sed 's/,.*//'); $(mariadb-dump --version | sed 's/,.*//')
                          seconds       rows/s   output
sluice backup full  $(printf '%9s %12s' "$s_s" "$s_rate")   $(du -sb "$DIR/chain" | cut -f1) bytes (zstd chunks, --parallel $PARALLEL)
mariadb-dump        $(printf '%9s %12s' "$d_s" "$d_rate")   $(stat -c %s "$DIR/dump.sql") bytes (SQL text)
ratio (t_mariadb-dump / t_sluice, > 1 means sluice faster): $ratio
EOF
