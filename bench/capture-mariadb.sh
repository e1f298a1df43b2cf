#!/usr/bin/env bash
# bench/capture-mariadb.sh: how fast sluice captures a MariaDB source's
# changes from its binlog into a chain (`sluice backup incremental
# --source-driver mariadb`), beside MariaDB's own binlog decoder,
# `mariadb-binlog --read-from-remote-server --verbose
# --base64-output=DECODE-ROWS`, reading and decoding the same span of the
# same binlog from the same server to /dev/null, on this machine in the same
# run. `make bench-capture` runs it after bench/capture.sh (the MariaDB row).
#
# It needs what `make worker` started: MariaDB on 127.0.0.1:3306 with its
# binlog on (ROW, FULL image, FULL metadata; deploy/dev/services.sh), the
# Temporal dev server and a running sluice-worker.
#
# Steps: a fresh database with a keyed wide table, a keyed narrow table and a
# keyless log table, seeded; a sluice full backup (the chain's position is the
# binlog position after it); the server's binlog position P0; BENCH_CHANGES
# row changes (inserts, updates, deletes of 1 to 1000 rows a transaction);
# P1; then, timed one after the other, one sluice incremental (P0 → now) and
# mariadb-binlog decoding P0 → P1.
#
# Environment:
#   BENCH_CHANGES=1000000   row changes to generate.
#   BENCH_DIR=/tmp/sluice-bench   work dir; this benchmark uses $BENCH_DIR/capture-mariadb.
#   BENCH_KEEP=0            1: keep the database.
#   BENCH_MARIADB=mysql://root@127.0.0.1:3306   server (no password).
#
# Caveats: wall clock around each step; the sluice step includes starting the
# workflow through Temporal and following it, and writes compressed chunks;
# mariadb-binlog only prints. Both read the binlog the generation just wrote
# (in the page cache for both). Other writers on the server (tests) add to
# the span both read; run it on a quiet server.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CHANGES=${BENCH_CHANGES:-1000000}
DIR=${BENCH_DIR:-/tmp/sluice-bench}/capture-mariadb
KEEP=${BENCH_KEEP:-0}
MY=${BENCH_MARIADB:-mysql://root@127.0.0.1:3306}
SLUICE=$ROOT/bin/sluice
DB=sluice_bench_cap_my
CHAIN=$DIR/chain

BENCH_NAME=capture-mariadb
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
my_parse

cleanup() {
	[[ $KEEP == 1 ]] || my '' -e "DROP DATABASE IF EXISTS $DB" 2>/dev/null || true
}
trap cleanup EXIT

for cmd in mariadb mariadb-binlog jq awk; do
	command -v "$cmd" >/dev/null || die "$cmd is not installed"
done
[[ -x $SLUICE ]] || die "$SLUICE is missing; run make build"
my '' -e 'SELECT 1' >/dev/null || die "MariaDB does not answer at $MY; run make services"
[[ $(my '' -e 'SELECT @@log_bin') == 1 ]] || die "MariaDB's binlog is off; run make services"

rm -rf "$DIR"
mkdir -p "$DIR"
log "database $DB: schema and seed rows"
my '' -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB CHARACTER SET utf8mb4"
my "$DB" <<'SQL'
CREATE TABLE bench_wide (id bigint PRIMARY KEY, qty int, price decimal(12,2), label varchar(64), at datetime(6),
  active boolean, attrs json, u uuid, score double);
CREATE TABLE bench_narrow (id bigint PRIMARY KEY, v int);
CREATE TABLE bench_log (seq bigint, kind varchar(8), at timestamp(6) NULL DEFAULT NULL, val int);
INSERT INTO bench_wide SELECT seq, seq % 1000, (seq % 100000) / 100, CONCAT('item-', MD5(seq)), '2024-01-01' + INTERVAL seq SECOND,
  seq % 3 = 0, JSON_OBJECT('g', seq, 'tag', CONCAT('t', seq % 17)), UUID(), seq * 0.001 FROM seq_1_to_100000;
INSERT INTO bench_narrow SELECT seq, seq % 100000 FROM seq_1_to_100000;
INSERT INTO bench_log SELECT seq, ELT(1 + seq % 3, 'info', 'warn', 'error'), '2024-01-01' + INTERVAL seq SECOND, seq % 7919 FROM seq_1_to_2000;
SQL

log "sluice backup full of $DB"
"$SLUICE" backup full --source-driver mariadb --source "$(my_dsn "$DB")" --target "file://$CHAIN" >"$DIR/full.log" 2>&1 ||
	die "sluice backup full failed ($DIR/full.log)"

# master_pos: the server's binlog "file pos".
master_pos() { my '' -e 'SHOW MASTER STATUS' | awk '{ print $1, $2 }'; }
read -r F0 P0 < <(master_pos)

# The changes: one statement of n rows a transaction, n from 1 to 1000;
# inserts, updates and deletes over the three tables, the keyless one kept
# near its seed size. Counts are exact: every range exists.
log "generating $CHANGES changes from $F0:$P0"
t0=$(now)
awk -v total="$CHANGES" 'BEGIN {
	srand(42); whi = 100000; wlo = 1; nhi = 100000; nlo = 1; lhi = 2000; llo = 1; done = 0; tx = 0
	while (done < total) {
		n = 1 + int(rand() * 1000); if (n > total - done) n = total - done
		r = rand()
		if (r < 0.25) { printf "INSERT INTO bench_wide SELECT seq, seq %% 1000, (seq %% 100000) / 100, CONCAT(\x27item-\x27, MD5(seq)), \x272024-01-01\x27 + INTERVAL seq SECOND, seq %% 3 = 0, JSON_OBJECT(\x27g\x27, seq), UUID(), seq * 0.001 FROM seq_%d_to_%d;\n", whi + 1, whi + n; whi += n }
		else if (r < 0.40) { printf "INSERT INTO bench_narrow SELECT seq, seq FROM seq_%d_to_%d;\n", nhi + 1, nhi + n; nhi += n }
		else if (r < 0.60) { if (whi - wlo + 1 < n) continue; printf "UPDATE bench_wide SET qty = qty + 1, price = price + 0.01, label = CONCAT(\x27upd-\x27, id), active = NOT active, score = score + 1 WHERE id BETWEEN %d AND %d;\n", wlo, wlo + n - 1 }
		else if (r < 0.75) { if (nhi - nlo + 1 < n) continue; printf "UPDATE bench_narrow SET v = v + 1 WHERE id BETWEEN %d AND %d;\n", nlo, nlo + n - 1 }
		else if (r < 0.85) { if (whi - wlo + 1 < n + 1000) continue; printf "DELETE FROM bench_wide WHERE id BETWEEN %d AND %d;\n", wlo, wlo + n - 1; wlo += n }
		else if (r < 0.90) { if (nhi - nlo + 1 < n + 1000) continue; printf "DELETE FROM bench_narrow WHERE id BETWEEN %d AND %d;\n", nlo, nlo + n - 1; nlo += n }
		else if (r < 0.95) { printf "INSERT INTO bench_log SELECT seq, \x27info\x27, \x272024-01-01\x27 + INTERVAL seq SECOND, seq %% 7919 FROM seq_%d_to_%d;\n", lhi + 1, lhi + n; lhi += n }
		else { if (lhi - llo + 1 < n) continue; printf "DELETE FROM bench_log WHERE seq BETWEEN %d AND %d;\n", llo, llo + n - 1; llo += n }
		done += n; tx++
	}
	printf "-- %d transactions\n", tx > "/dev/stderr"
}' 2>"$DIR/gen.stats" | my "$DB" --init-command="SET autocommit = 1" || die "generating the changes failed"
gen_s=$(secs "$t0" "$(now)")
read -r F1 P1 < <(master_pos)
log "generated in ${gen_s}s; binlog now at $F1:$P1 ($(cat "$DIR/gen.stats"))"

log "timed: sluice backup incremental"
t0=$(now)
"$SLUICE" backup incremental --source-driver mariadb --source "$(my_dsn "$DB")" --target "file://$CHAIN" >"$DIR/incremental.log" 2>&1 ||
	die "sluice backup incremental failed ($DIR/incremental.log)"
sluice_s=$(secs "$t0" "$(now)")
manifest=$(ls -t "$CHAIN"/manifests/*.json | head -n 1)
[[ $(jq -r .kind "$manifest") == incremental ]] || die "the newest manifest $manifest is not the incremental"
m_changes=$(jq -r '.changes // 0' "$manifest")
m_tx=$(jq -r '.transactions // 0' "$manifest")
m_bytes=$(jq -r '[.chunks[]?.size] | add // 0' "$manifest")
((m_changes >= CHANGES)) || die "the incremental holds $m_changes changes, fewer than the $CHANGES generated"

# The reference decodes the same span: from F0:P0 through F1:P1, every
# binlog file in between.
log "timed: mariadb-binlog --read-from-remote-server --verbose --base64-output=DECODE-ROWS $F0:$P0 → $F1:$P1"
files=$(my '' -e 'SHOW BINARY LOGS' | awk -v a="$F0" -v b="$F1" '$1 >= a && $1 <= b { print $1 }')
stop=()
[[ $F0 == "$F1" ]] && stop=(--stop-position="$P1")
t0=$(now)
# shellcheck disable=SC2086
mariadb-binlog "${MY_OPTS[@]}" --read-from-remote-server --verbose --base64-output=DECODE-ROWS \
	--start-position="$P0" "${stop[@]}" $files >/dev/null 2>"$DIR/mariadb-binlog.log" ||
	die "mariadb-binlog failed ($DIR/mariadb-binlog.log)"
ref_s=$(secs "$t0" "$(now)")

s_rate=$(awk -v c="$m_changes" -v s="$sluice_s" 'BEGIN { printf "%.0f", c / s }')
r_rate=$(awk -v c="$m_changes" -v s="$ref_s" 'BEGIN { printf "%.0f", c / s }')
ratio=$(awk -v a="$s_rate" -v b="$r_rate" 'BEGIN { printf "%.3f", a / b }')
cat <<EOF

=== capture, MariaDB source: $m_changes changes in $m_tx transactions, binlog $F0:$P0 → $F1:$P1 ===
versions: $(mariadb --version | sed 's/,.*//'); $(mariadb-binlog --version | sed 's/,.*//')
                         seconds    changes/s
sluice capture     $(printf '%9s %12s' "$sluice_s" "$s_rate")   chunks $m_bytes bytes
mariadb-binlog -v  $(printf '%9s %12s' "$ref_s" "$r_rate")   decoding to /dev/null
ratio (sluice changes/s / mariadb-binlog changes/s, > 1 means sluice faster): $ratio
EOF
