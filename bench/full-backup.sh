#!/usr/bin/env bash
# bench/full-backup.sh (make bench-full): times a sluice full backup and a
# sluice restore against pg_dump -Fd -j2 / pg_restore -j2 on the same source,
# on this machine, in one run, and checks that the sluice restore equals the
# source table by table. Beside each sluice row, the same step on an
# encrypted and signed chain (rows *_enc_sig, issue 27: sealing must not
# cost more than 10 %), with its ratio to the plain row; that restore is
# checked against the source too. Then a sluice restore into MariaDB
# (--target-driver mysql) beside MariaDB's own: mariadb-dump of the database
# sluice restored (untimed), loaded with the mariadb client into a fresh
# database (timed).
#
# It needs only what `make worker` started: PostgreSQL on 127.0.0.1:5432,
# MariaDB on 127.0.0.1:3306 (make services), the Temporal dev server and a
# running sluice-worker.
#
# Environment:
#   BENCH_SCALE=1          source size; 1 is about 1 GB (pg_database_size),
#                          0.05 a quick run of about 50 MB.
#   BENCH_DIR=/tmp/sluice-bench   work dir (chain, dump, logs, results.json).
#   BENCH_WARMUP=0         1: run each of the six PostgreSQL steps (and the
#                          MariaDB ones) once, untimed, first.
#   BENCH_ORDER=sluice-first      pg-first, or alternate (with BENCH_REPEAT):
#                          which tool goes first.
#   BENCH_REPEAT=1         runs of each step; the fastest is reported, all are
#                          listed (on a shared machine, 3 filters out noise).
#   BENCH_QUIET_WAIT=120   before each step, wait up to this many seconds for
#                          the machine to be at most BENCH_QUIET_PCT=15 % busy
#                          (0: do not wait).
#   BENCH_TOP=0            1: sample `top -b` every 5 s during each timed step
#                          into $BENCH_DIR/<step>.<run>.top.
#   BENCH_DROP_SOURCE=0    1: drop the source database at the end.
#   BENCH_KEEP_DBS=0       1: keep the restored databases (for inspection).
#   BENCH_PG=postgres://postgres@127.0.0.1:5432   server (no password).
#   BENCH_MARIADB=mysql://root@127.0.0.1:3306     MariaDB server (no password).
#   SLUICE_BENCH_PASSPHRASE=<a fixed bench value>  the passphrase of the
#                          encrypted chain, read by the worker from its
#                          environment (see "Encrypted + signed rows" below).
#
# Method and caveats:
#   - Wall clock (date +%s.%N) around each command. The sluice steps include
#     starting the workflow and waiting for it through Temporal, as a user sees.
#   - Before each timed step a CHECKPOINT runs (untimed) so one step's dirty
#     pages are not flushed on the next one's clock. The OS page cache cannot
#     be dropped here: after generation the source sits in memory for every
#     reader, and whichever tool goes first can still pay for hint bits or
#     cold shared_buffers. Order effects exist; BENCH_ORDER swaps the order and
#     BENCH_WARMUP=1 adds an untimed pass of everything first.
#   - MB/s is source database size (pg_database_size, 10^6 bytes) / seconds
#     for all four steps, so the rates compare directly; rows/s is the
#     source's total row count / seconds.
#   - CPU columns: "tool" is the sluice-worker process (sluice steps) or the
#     pg_dump/pg_restore processes and their children; "pg" is the PostgreSQL
#     server processes; "other" is the rest of the machine's busy time
#     (/proc/stat) minus the Temporal server: work that is not the benchmark's
#     and disturbed the step. results.json also has the machine total.
#   - Sluice steps also list their Temporal activities (per table for the
#     restore) with start offsets and durations, from the workflow history.
#   - Encrypted + signed rows (sluice_backup_enc_sig, sluice_restore_enc_sig):
#     the same full backup of the same source into a second chain,
#     $DIR/chain-enc-sig, written with --encrypt --key-passphrase-env
#     SLUICE_BENCH_PASSPHRASE --sign-key-file $DIR/keys/sign (AES-256-GCM under a
#     data key wrapped by the passphrase; each catalog generation signed with an
#     Ed25519 pair `sluice backup keygen` makes at the start of the run), and its
#     restore into $DST_ENC with --key-passphrase-env SLUICE_BENCH_PASSPHRASE
#     --verify-key-file $DIR/keys/sign.pub --require-signature, checked against
#     the source table by table like the plain restore; the run also checks that
#     every manifest of that chain is sealed and its catalog generation signed.
#     The encrypted backup comes right after the plain one, and the encrypted
#     restore right after the plain one, in odd runs, and right before them in
#     even runs (whatever BENCH_ORDER), so both see the same machine and, with
#     BENCH_REPEAT >= 2, each variant is timed in both places: in a run with the
#     plain backup always first (scale 0.5), it took 1.2 to 1.9 s longer than the
#     encrypted one right after it, with more CPU in both the worker and
#     PostgreSQL, while the two restores matched. "enc_sig / plain" is t_enc_sig
#     / t_plain of the reported (fastest) runs: > 1 is what sealing and signing
#     cost. The passphrase is stretched (Argon2id) once per worker process, so
#     the first encrypted step after a worker start pays it (a fraction of a
#     second; BENCH_REPEAT > 1 shows it in "all runs"). The worker reads the
#     passphrase from its own environment: when the running worker's environment
#     (/proc/<pid>/environ) lacks SLUICE_BENCH_PASSPHRASE with this run's value,
#     the script restarts it through deploy/dev/worker.sh with the variable
#     exported (the environment passes through), before any step.
#   - MariaDB rows. The source holds values a MySQL-family target refuses by
#     design (docs/mysql-target.md): float NaN, +-Infinity and -0 in
#     events.ratio, timestamptz +-infinity in events.occurred_at. So the
#     MariaDB rows restore from a derived copy of the source: $SRC_MY, made
#     with CREATE DATABASE ... TEMPLATE, in which exactly those values are
#     replaced by ordinary ones (ratio NaN and -0 -> 0, +Infinity -> 500000,
#     -Infinity -> -500000, the ends of the generator's range; occurred_at
#     infinity -> 2100-01-01, -infinity -> 1900-01-01 UTC) and everything else
#     is identical (same tables, rows, keys, NULLs; checked before its
#     backup: no refused value left, the other tables and the other columns
#     of events equal to the source's by md5); the run prints and
#     results.json records how many values were replaced. Its chain is a full
#     backup of $SRC_MY (untimed). Timed: sluice restore of that chain into a
#     fresh MariaDB database (sluice_bench_full_my_<run>_r<n>_sluice); then,
#     untimed, mariadb-dump --single-transaction of that database (every
#     table, sluice's own restore-links table too); timed: the mariadb client
#     loading the dump into another fresh database (..._load). The dump is of
#     what sluice wrote, so both loads hold the same rows in the same MariaDB
#     types; the dump recreates each table with its secondary indexes before
#     its rows, sluice adds them after. rows/s and MB/s use the source's row
#     count and pg_database_size, as every other row. In each run these two
#     come after the sluice and pg steps, sluice's first (the dump needs it).
#     "CPU my" is the MariaDB server (mariadbd). Checked: the sluice restore
#     against $SRC_MY (per table, row count and sums of the integer columns)
#     and the loaded dump against the sluice restore (the same figures, and
#     CHECKSUM TABLE). MariaDB databases of the prefix are dropped at the
#     start (and at the end unless BENCH_KEEP_DBS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

GEN_VERSION=4
SCALE=${BENCH_SCALE:-1}
DIR=${BENCH_DIR:-/tmp/sluice-bench}
WARMUP=${BENCH_WARMUP:-0}
ORDER=${BENCH_ORDER:-sluice-first}
TOP=${BENCH_TOP:-0}
REPEAT=${BENCH_REPEAT:-1}
QUIET_WAIT=${BENCH_QUIET_WAIT:-120}
QUIET_PCT=${BENCH_QUIET_PCT:-15}
DROP_SOURCE=${BENCH_DROP_SOURCE:-0}
KEEP_DBS=${BENCH_KEEP_DBS:-0}
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
MY=${BENCH_MARIADB:-mysql://root@127.0.0.1:3306}
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}
ADMIN=${SLUICE_ADMIN_ADDR:-127.0.0.1:9464}
SLUICE=$ROOT/bin/sluice
PARALLEL=2

SRC=sluice_bench_src
DST_SLUICE=sluice_bench_dst_sluice
DST_PG=sluice_bench_dst_pg
DST_ENC=sluice_bench_dst_enc_sig
WARM_DB=sluice_bench_dst_warmup
SRC_MY=sluice_bench_src_mariadb
TEMP_DBS=("$DST_SLUICE" "$DST_PG" "$DST_ENC" "$WARM_DB" "$SRC_MY")
# The encrypted + signed chain: its folder in $DIR, the signing pair (made
# each run) and the variable that holds the passphrase in the worker's
# environment. A bench value, not a secret: the chain is a local folder.
ENC_CHAIN_DIR=chain-enc-sig
KEY_ENV=SLUICE_BENCH_PASSPHRASE
export SLUICE_BENCH_PASSPHRASE=${SLUICE_BENCH_PASSPHRASE:-sluice-bench-passphrase}
# MariaDB databases: MY_PREFIX + this run's ID + _r<run>_<sluice|load>.
MY_PREFIX=sluice_bench_full_my_
MY_RUN=$(date -u +%Y%m%d%H%M%S)_$$

BENCH_NAME=bench
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
calc() { awk "BEGIN { printf \"%.${2:-3}f\", $1 }"; }
drop_db() { sql postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)"; }
fresh_db() {
	drop_db "$1"
	sql postgres -c "CREATE DATABASE $1 TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8'" 2>/dev/null ||
		sql postgres -c "CREATE DATABASE $1 TEMPLATE template0 ENCODING 'UTF8'"
}

cleanup() {
	local rc=$?
	[[ -n ${TOP_PID:-} ]] && kill "$TOP_PID" 2>/dev/null || true
	if [[ $KEEP_DBS != 1 ]]; then
		for db in "${TEMP_DBS[@]}"; do drop_db "$db" >/dev/null 2>&1 || true; done
		if [[ -n ${MY_OPTS+x} ]]; then my_drop_like "$MY_PREFIX" || true; fi
	else
		log "keeping ${TEMP_DBS[*]} and the MariaDB databases $MY_PREFIX$MY_RUN* (BENCH_KEEP_DBS=1)"
	fi
	if [[ $DROP_SOURCE == 1 ]]; then
		log "dropping $SRC (BENCH_DROP_SOURCE=1)"
		drop_db "$SRC" >/dev/null 2>&1 || true
	fi
	rm -rf "$DIR/warmup"
	exit "$rc"
}

# ------------------------------------------------------------ preconditions

preflight() {
	[[ $SCALE =~ ^[0-9]*\.?[0-9]+$ ]] && awk "BEGIN { exit !($SCALE > 0) }" || die "BENCH_SCALE must be a positive number, got '$SCALE'"
	[[ $ORDER == sluice-first || $ORDER == pg-first || $ORDER == alternate ]] || die "BENCH_ORDER must be sluice-first, pg-first or alternate"
	[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT must be a positive integer"
	[[ $QUIET_WAIT =~ ^[0-9]+$ && $QUIET_PCT =~ ^[0-9]+$ ]] || die "BENCH_QUIET_WAIT and BENCH_QUIET_PCT must be integers"
	[[ -x $SLUICE ]] || die "$SLUICE is missing; run make build (or make bench-full)"
	for cmd in psql pg_dump pg_restore curl awk du mariadb mariadb-dump; do
		command -v "$cmd" >/dev/null || die "$cmd not found"
	done
	sql postgres -c 'SELECT 1' >/dev/null || die "PostgreSQL does not answer at $PG"
	my_parse
	my '' -e 'SELECT 1' >/dev/null || die "MariaDB does not answer at $MY; run make services"
	[[ $(sql postgres -c 'SHOW wal_level') == logical ]] || die "wal_level is not logical; run make worker (deploy/dev/services.sh)"
	local i
	for i in $(seq 1 30); do
		curl -fsS "http://$ADMIN/readyz" >/dev/null 2>&1 && break
		((i < 30)) || die "no sluice worker answers on $ADMIN; run make worker"
		sleep 1
	done
	local major
	major=$(pg_dump --version | awk '{ print $3 }' | cut -d. -f1)
	[[ $major == "$(sql postgres -c 'SHOW server_version_num' | cut -c1-2)" ]] ||
		die "pg_dump major version $major differs from the server's"
}

# ------------------------------------------------------------ source data

# Row counts per table at this scale. "events" gets two extra rows holding the
# extreme bigint keys.
N_REGIONS=200
n_rows() { awk "BEGIN { n = int($1 * $SCALE); print (n < 10 ? 10 : n) }"; }
N_ACCOUNTS=$(n_rows 600000)
N_EVENTS=$(n_rows 950000)
N_DOCUMENTS=$(n_rows 65000)
N_TAGSETS=$(n_rows 420000)
N_AUDIT=$(n_rows 1550000)
declare -A EXPECT=(
	[regions]=$N_REGIONS [accounts]=$N_ACCOUNTS [events]=$((N_EVENTS + 2))
	[documents]=$N_DOCUMENTS [tag_sets]=$N_TAGSETS [audit_log]=$N_AUDIT [bench_meta]=1
)
TABLES=(regions accounts events documents tag_sets audit_log bench_meta)

source_ok() {
	db_exists "$SRC" || return 1
	local meta t n
	meta=$(sql "$SRC" -c "SELECT generator_version || ' ' || scale FROM bench_meta" 2>/dev/null) || return 1
	if [[ $meta != "$GEN_VERSION $SCALE" ]]; then
		log "source $SRC was generated with (version scale) = ($meta), want ($GEN_VERSION $SCALE)"
		return 1
	fi
	for t in "${TABLES[@]}"; do
		n=$(sql "$SRC" -c "SELECT count(*) FROM public.$t") || return 1
		if [[ $n != "${EXPECT[$t]}" ]]; then
			log "source table $t has $n rows, want ${EXPECT[$t]}"
			return 1
		fi
	done
}

# Tables are filled bare (two psql sessions at once, one per core), then keys,
# indexes and the foreign keys are added, as a loader would.
generate_source() {
	log "generating $SRC at scale $SCALE (accounts $N_ACCOUNTS, events $N_EVENTS, documents $N_DOCUMENTS, tag_sets $N_TAGSETS, audit_log $N_AUDIT)"
	local t0
	t0=$(now)
	drop_db "$SRC"
	fresh_db "$SRC"
	sql "$SRC" <<'SQL'
CREATE TYPE account_state AS ENUM ('pending', 'active', 'suspended', 'closed', 'gelöscht');
CREATE TABLE regions (
	id int2 NOT NULL,
	code text NOT NULL,
	name text NOT NULL,
	utc_offset interval NOT NULL
);
CREATE TABLE accounts (
	id bigint NOT NULL,
	region_id int2,
	email text NOT NULL,
	display_name text,
	state account_state NOT NULL,
	balance numeric(20,6),
	score int4,
	verified bool,
	birth_date date,
	created_at timestamptz NOT NULL
);
CREATE TABLE events (
	id bigint NOT NULL,
	account_id bigint NOT NULL,
	kind int2 NOT NULL,
	seq int4 NOT NULL,
	occurred_at timestamptz NOT NULL,
	local_time timestamp,
	duration interval,
	trace_id uuid,
	amount numeric(20,6),
	ratio float8,
	payload jsonb,
	raw json,
	note text
);
CREATE TABLE documents (
	id bigint NOT NULL,
	account_id bigint,
	title text NOT NULL,
	body text,
	attachment bytea,
	digest bytea NOT NULL,
	published date,
	flags int2
);
CREATE TABLE tag_sets (
	id int4 NOT NULL,
	weight int2,
	ids int[],
	labels text[],
	updated_at timestamp
);
-- No primary key.
CREATE TABLE audit_log (
	at timestamp NOT NULL,
	level int2 NOT NULL,
	pid int4,
	source text,
	message text,
	ok bool
);
SQL
	local -a pids=()
	sql "$SRC" -v n_acc="$N_ACCOUNTS" -v n_ev="$N_EVENTS" -v n_reg="$N_REGIONS" >"$DIR/gen-a.log" 2>&1 <<'SQL' &
SELECT setseed(0.17);
INSERT INTO regions
SELECT i, 'R' || lpad(i::text, 3, '0'),
       (ARRAY['Zürich', 'São Paulo', 'Москва', '東京', 'Αθήνα', 'القاهرة', 'Kraków', 'Reykjavík'])[1 + i % 8] || ' ' || i,
       make_interval(mins => (i % 49 - 24) * 30)
FROM generate_series(1, :n_reg) i;

-- Keys above 2^53 (2^53 + 1 is the first integer a float64 cannot hold).
INSERT INTO accounts
SELECT 9007199254740993 + i * 1000,
       CASE WHEN i % 50 = 0 THEN NULL ELSE 1 + i % :n_reg END,
       'user' || i || '@' || (ARRAY['example.org', 'beispiel.de', 'пример.рф', 'example.co.jp'])[1 + i % 4],
       CASE WHEN i % 13 = 0 THEN NULL
            ELSE (ARRAY['Zoë', 'Łukasz', 'Ἀθηνᾶ', '李小龍', 'Renée', 'Søren', 'Ægir', '🦀 Ferris'])[1 + i % 8]
                 || ' ' || chr(65 + i % 26) || '. ' || (ARRAY['Müller', 'O''Brien', 'Nguyễn', 'Иванов'])[1 + i % 4] END,
       (ARRAY['pending', 'active', 'active', 'active', 'suspended', 'closed', 'gelöscht'])[1 + i % 7]::account_state,
       CASE WHEN i % 17 = 0 THEN NULL ELSE round((random() * 2e10 - 1e10)::numeric, 6) END,
       CASE WHEN i % 11 = 0 THEN NULL ELSE (random() * 2147483647)::int4 * (1 - 2 * (i % 2)) END,
       CASE i % 3 WHEN 0 THEN true WHEN 1 THEN false END,
       CASE WHEN i % 9 = 0 THEN NULL ELSE date '1940-01-01' + (i * 7) % 25000 END,
       timestamptz '2015-01-01 00:00:00+00' + i * interval '97 seconds' + (i % 1000) * interval '1 microsecond'
FROM generate_series(1, :n_acc) i;

INSERT INTO events
SELECT CASE WHEN i % 2 = 0 THEN i ELSE -(9007199254740993 + i) END,
       9007199254740993 + (1 + (i::bigint * 7919) % :n_acc) * 1000,
       (i % 40)::int2,
       i,
       timestamptz '2020-01-01 00:00:00+00' + i * interval '13.000001 seconds',
       CASE WHEN i % 20 = 0 THEN NULL ELSE timestamp '2020-01-01 00:00:00' + i * interval '11 seconds' END,
       CASE WHEN i % 25 = 0 THEN NULL
            ELSE make_interval(months => i % 5, days => i % 40, secs => (i % 86400) + (i % 1000) / 1000.0) END,
       CASE WHEN i % 30 = 0 THEN NULL ELSE md5('trace' || i)::uuid END,
       CASE WHEN i % 8 = 0 THEN NULL ELSE round((random() * 1e8 - 5e7)::numeric, 6) END,
       CASE i % 1000 WHEN 1 THEN 'NaN'::float8 WHEN 2 THEN 'Infinity'::float8 WHEN 3 THEN '-Infinity'::float8
            WHEN 4 THEN '-0'::float8 WHEN 5 THEN 1e-300 WHEN 6 THEN NULL ELSE random() * 1e6 - 5e5 END,
       CASE WHEN i % 10 = 0 THEN NULL
            ELSE jsonb_build_object('v', i, 'kind', i % 40, 'ok', i % 3 = 0, 'score', random(),
                                    'tags', jsonb_build_array('a' || i % 7, 'b' || i % 11),
                                    'who', jsonb_build_object('name', 'Zoë ' || i % 100, 'lang', 'fr'))
       END,
       CASE WHEN i % 6 = 0 THEN NULL
            ELSE ('{"id": ' || i || ',  "dup": 1, "dup": 2, "s" : "' || md5(i::text) || '", "arr":[1, 2 , 3]}')::json END,
       CASE WHEN i % 10 = 0 THEN NULL WHEN i % 10 = 1 THEN ''
            WHEN i % 97 = 0 THEN E'tab\there, newline\nthere, back\\slash, quote '' and "double", NUL-free ✓'
            ELSE left(repeat(md5(i::text) || ' ', 1 + i % 12), (i * 37) % 400) END
FROM generate_series(1, :n_ev) i;
INSERT INTO events (id, account_id, kind, seq, occurred_at, note)
VALUES (9223372036854775807, 9007199254740993 + 1000, 0, -1, 'infinity', 'max bigint key'),
       (-9223372036854775808, 9007199254740993 + 1000, 0, -2, '-infinity', 'min bigint key');
SQL
	pids+=($!)
	sql "$SRC" -v n_doc="$N_DOCUMENTS" -v n_tag="$N_TAGSETS" -v n_log="$N_AUDIT" -v n_acc="$N_ACCOUNTS" >"$DIR/gen-b.log" 2>&1 <<'SQL' &
SELECT setseed(0.29);
INSERT INTO documents
SELECT i,
       CASE WHEN i % 5 = 0 THEN NULL ELSE 9007199254740993 + (1 + i % :n_acc) * 1000 END,
       (ARRAY['Rapport annuel', 'Jahresbericht', 'Годовой отчёт', '年次報告書', 'Ετήσια έκθεση', 'Informe 📈'])[1 + i % 6] || ' #' || i,
       CASE WHEN i % 15 = 0 THEN NULL
            ELSE (SELECT string_agg(md5((i * 131 + k)::text), CASE WHEN k % 9 = 0 THEN E'\n' ELSE ' ' END)
                  FROM generate_series(1, 1 + (i * 7) % 70) k) END,
       CASE WHEN i % 20 = 0 THEN NULL WHEN i % 20 = 1 THEN ''::bytea
            ELSE decode(repeat(md5(i::text) || md5((i + 1)::text), 1 + i % 40), 'hex') END,
       sha256(('doc' || i)::bytea),
       CASE WHEN i % 7 = 0 THEN NULL ELSE date '2001-01-01' + i % 9000 END,
       (i % 32767)::int2
FROM generate_series(1, :n_doc) i;

INSERT INTO tag_sets
SELECT i,
       CASE WHEN i % 10 = 0 THEN NULL ELSE (i % 65535 - 32767)::int2 END,
       CASE WHEN i % 12 = 0 THEN NULL WHEN i % 12 = 1 THEN '{}'::int[]
            ELSE ARRAY(SELECT (i * k * 2654435761 % 2147483647)::int4 FROM generate_series(1, 1 + i % 9) k) END,
       CASE WHEN i % 14 = 0 THEN NULL
            ELSE ARRAY['tag' || i % 100, 'ünï' || i % 7, CASE WHEN i % 5 = 0 THEN NULL ELSE 'x y,"z"' END, '日本' || i % 3] END,
       timestamp '2022-06-01 12:00:00' + i * interval '1.5 seconds'
FROM generate_series(1, :n_tag) i;

INSERT INTO audit_log
SELECT timestamp '2023-01-01 00:00:00' + i * interval '250 milliseconds',
       (i % 5)::int2,
       CASE WHEN i % 4 = 0 THEN NULL ELSE 1000 + i % 30000 END,
       (ARRAY['api', 'worker', 'scheduler', 'auth', 'billing'])[1 + i % 5],
       (ARRAY['request served', 'login failed for user', 'job finished', 'cache miss', 'retrying after timeout'])[1 + i % 5]
         || ' id=' || i || CASE WHEN i % 3 = 0 THEN ' detail=' || md5(i::text) ELSE '' END,
       CASE WHEN i % 21 = 0 THEN NULL ELSE i % 7 <> 0 END
FROM generate_series(1, :n_log) i;
SQL
	pids+=($!)
	local p rc=0
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	if ((rc)); then
		cat "$DIR/gen-a.log" "$DIR/gen-b.log" >&2
		die "generating $SRC failed"
	fi
	log "data loaded in $(calc "$(now) - $t0" 0)s; adding keys, indexes, foreign keys"
	sql "$SRC" <<'SQL'
ALTER TABLE regions ADD PRIMARY KEY (id), ADD CONSTRAINT regions_code_key UNIQUE (code);
ALTER TABLE accounts ADD PRIMARY KEY (id), ADD CONSTRAINT accounts_email_key UNIQUE (email);
ALTER TABLE events ADD PRIMARY KEY (id);
ALTER TABLE documents ADD PRIMARY KEY (id);
ALTER TABLE tag_sets ADD PRIMARY KEY (id);
CREATE INDEX accounts_region_state ON accounts (region_id, state);
CREATE INDEX events_account_time ON events (account_id, occurred_at);
CREATE INDEX documents_published ON documents (published) WHERE published IS NOT NULL;
CREATE INDEX audit_log_at ON audit_log (at);
ALTER TABLE accounts ADD CONSTRAINT accounts_region_fk FOREIGN KEY (region_id) REFERENCES regions (id);
ALTER TABLE events ADD CONSTRAINT events_account_fk FOREIGN KEY (account_id) REFERENCES accounts (id);
ALTER TABLE documents ADD CONSTRAINT documents_account_fk FOREIGN KEY (account_id) REFERENCES accounts (id);
CREATE TABLE bench_meta (generator_version int PRIMARY KEY, scale text NOT NULL, generated_at timestamptz NOT NULL DEFAULT now());
SQL
	sql "$SRC" -c 'VACUUM (FREEZE, ANALYZE)'
	# The marker goes in last: a generation cut short has none and is redone.
	sql "$SRC" -c "INSERT INTO bench_meta (generator_version, scale) VALUES ($GEN_VERSION, '$SCALE')"
	sql postgres -c CHECKPOINT
	log "generated $SRC in $(calc "$(now) - $t0" 0)s"
}

# ------------------------------------------------------------ measurement

# CPU seconds: the machine's busy time, a process's own time, and the
# PostgreSQL server's (postmaster with reaped backends + live children).
HZ=$(getconf CLK_TCK)
cpu_all() { awk -v hz="$HZ" '/^cpu / { print ($2 + $3 + $4 + $7 + $8) / hz }' /proc/stat; }
cpu_pid() { # own + reaped children; 0 for a process that is gone, also one that ends while it is read
	local v=
	[[ -n $1 ]] && v=$(awk -v hz="$HZ" '{ sub(/^.*\) /, ""); print ($12 + $13 + $14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || true)
	echo "${v:-0}"
}
PM_PID=
find_postmaster() { PM_PID=$(head -n1 "$(sql postgres -c 'SHOW data_directory')/postmaster.pid" 2>/dev/null || true); }
cpu_pg() {
	local total p
	total=$(cpu_pid "$PM_PID")
	for p in $(pgrep -P "$PM_PID" 2>/dev/null || true); do
		total=$(calc "$total + $(cpu_pid "$p")" 2)
	done
	echo "$total"
}
worker_pid() {
	if [[ -s $SLUICE_STATE/worker.pid ]] && kill -0 "$(<"$SLUICE_STATE/worker.pid")" 2>/dev/null; then
		cat "$SLUICE_STATE/worker.pid"
	else
		pgrep -o -x sluice-worker || true
	fi
}

temporal_pid() { [[ -s $SLUICE_STATE/temporal.pid ]] && cat "$SLUICE_STATE/temporal.pid" || pgrep -o -x temporal || true; }
# cpu_my: CPU seconds of the MariaDB server (one process, all its threads).
cpu_my() { cpu_pid "$(mariadb_pid)"; }

# wait_quiet: before a timed step, waits (up to BENCH_QUIET_WAIT seconds) until
# the machine is at most BENCH_QUIET_PCT % busy, so other work on a shared
# machine (tests, builds) does not land on a step's clock.
busy_pct() {
	local a b
	a=$(cpu_all)
	sleep 2
	b=$(cpu_all)
	calc "($b - $a) / 2 / $(nproc) * 100" 0
}
wait_quiet() {
	((QUIET_WAIT > 0)) || return 0
	local deadline=$((SECONDS + QUIET_WAIT)) pct said=0
	while :; do
		pct=$(busy_pct)
		((pct <= QUIET_PCT)) && return 0
		if ((SECONDS >= deadline)); then
			log "warning: the machine is still ${pct}% busy with other work after ${QUIET_WAIT}s; timing anyway (see CPU other)"
			return 0
		fi
		((said)) || log "the machine is ${pct}% busy with other work; waiting up to ${QUIET_WAIT}s for it to quiet down"
		said=1
		sleep 3
	done
}

STEPS=(sluice_backup sluice_backup_enc_sig sluice_restore sluice_restore_enc_sig pg_dump pg_restore sluice_restore_mariadb mariadb_load)
declare -A SECS CPU_TOOL CPU_PG CPU_MY CPU_ALL CPU_OTHER LOAD
RUN=1
# timed STEP TOOLCPU CMD...: runs CMD once and records wall and CPU seconds
# under STEP#RUN. TOOLCPU is "worker" (the sluice-worker process) or "self"
# (CMD and its children).
timed() {
	local step=$1 toolcpu=$2
	shift 2
	local k="$step#$RUN" out="$DIR/$step.$RUN"
	sql postgres -c CHECKPOINT
	wait_quiet
	local wpid tpid a0 p0 y0 w0 m0 t0 t1 tool
	wpid=$(worker_pid)
	tpid=$(temporal_pid)
	if [[ $TOP == 1 ]]; then
		top -b -d 5 -w 200 >"$out.top" 2>&1 &
		TOP_PID=$!
	fi
	LOAD[$k]=$(cut -d' ' -f1 /proc/loadavg)
	a0=$(cpu_all)
	p0=$(cpu_pg)
	y0=$(cpu_my)
	w0=$(cpu_pid "$wpid")
	m0=$(cpu_pid "$tpid")
	log "$step (run $RUN/$REPEAT): $* (load average ${LOAD[$k]})"
	t0=$(now)
	if [[ $toolcpu == self ]]; then
		/usr/bin/time -f '%U %S' -o "$out.time" "$@" >"$out.log" 2>&1 || {
			tail -n 30 "$out.log" >&2
			die "$step failed (log $out.log)"
		}
	else
		"$@" >"$out.log" 2>&1 || {
			tail -n 30 "$out.log" >&2
			die "$step failed (log $out.log; worker log $SLUICE_STATE/worker.log)"
		}
	fi
	t1=$(now)
	if [[ -n ${TOP_PID:-} ]]; then
		kill "$TOP_PID" 2>/dev/null || true
		wait "$TOP_PID" 2>/dev/null || true
		TOP_PID=
	fi
	SECS[$k]=$(calc "$t1 - $t0" 3)
	CPU_ALL[$k]=$(calc "$(cpu_all) - $a0" 1)
	CPU_PG[$k]=$(calc "$(cpu_pg) - $p0" 1)
	CPU_MY[$k]=$(calc "$(cpu_my) - $y0" 1)
	if [[ $toolcpu == self ]]; then
		tool=$(awk '{ print $1 + $2 }' "$out.time")
	else
		[[ $(worker_pid) == "$wpid" ]] || log "warning: the sluice worker restarted during $step; its CPU figure is unreliable"
		tool=$(calc "$(cpu_pid "$wpid") - $w0" 1)
	fi
	CPU_TOOL[$k]=$(calc "$tool" 1)
	# Other = everything else on the machine (Temporal's server counts as
	# neither tool nor other); large values mean the step was disturbed.
	CPU_OTHER[$k]=$(calc "${CPU_ALL[$k]} - ${CPU_TOOL[$k]} - ${CPU_PG[$k]} - ${CPU_MY[$k]} - ($(cpu_pid "$tpid") - $m0)" 1)
	log "$step: ${SECS[$k]}s (CPU: tool ${CPU_TOOL[$k]}s, postgres ${CPU_PG[$k]}s, mariadb ${CPU_MY[$k]}s, other ${CPU_OTHER[$k]}s, machine ${CPU_ALL[$k]}s)"
	if [[ $toolcpu == worker ]]; then activities_of "$out.log" "$out.activities"; fi
}

# activities_of LOG OUT: per-activity timings of the workflow the sluice CLI
# started (named in LOG), from its Temporal history, into OUT.tsv:
# activity, table, start (s after the workflow started), queued s, run s.
TEMPORAL_CLI=${SLUICE_TOOLS:-$HOME/.cache/sluice/bin}/temporal
JQ_ACTIVITIES='
def ts: (.[0:19] + "Z" | fromdateiso8601) + (if length > 20 then ("0." + (.[20:] | rtrimstr("Z")) | tonumber) else 0 end);
def r2: . * 100 | round / 100;
(.events[0].eventTime | ts) as $t0
| (.events[-1].eventTime | ts) as $t1
| (reduce .events[] as $e ({};
    if $e.eventType == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED" then
      .[$e.eventId | tostring] = {name: $e.activityTaskScheduledEventAttributes.activityType.name,
        table: (($e.activityTaskScheduledEventAttributes.input.payloads[0].data // "") | @base64d | (fromjson? // {}) | (.table? // "")),
        sched: ($e.eventTime | ts)}
    elif $e.eventType == "EVENT_TYPE_ACTIVITY_TASK_STARTED" then
      .[$e.activityTaskStartedEventAttributes.scheduledEventId | tostring].start = ($e.eventTime | ts)
    elif ($e.eventType | test("^EVENT_TYPE_ACTIVITY_TASK_(COMPLETED|FAILED|TIMED_OUT|CANCELED)$")) then
      .[(($e.activityTaskCompletedEventAttributes // $e.activityTaskFailedEventAttributes
          // $e.activityTaskTimedOutEventAttributes // $e.activityTaskCanceledEventAttributes).scheduledEventId) | tostring].end = ($e.eventTime | ts)
    else . end))
| ([to_entries[] | .value] | sort_by(.sched) | .[]
   | [.name, .table, (.sched - $t0 | r2), ((.start // .sched) - .sched | r2), ((.end // .start // .sched) - (.start // .sched) | r2)]),
  ["(workflow)", "", 0, 0, ($t1 - $t0 | r2)]
| @tsv'
activities_of() {
	[[ -x $TEMPORAL_CLI ]] && command -v jq >/dev/null || return 0
	local id run
	id=$(sed -n 's/^started workflow \(.*\) (run \([^)]*\)).*$/\1/p' "$1" | head -n1)
	run=$(sed -n 's/^started workflow .* (run \([^)]*\)).*$/\1/p' "$1" | head -n1)
	[[ -n $id && -n $run ]] || return 0
	"$TEMPORAL_CLI" workflow show --address "${TEMPORAL_ADDRESS:-127.0.0.1:7233}" --namespace "${TEMPORAL_NAMESPACE:-default}" \
		-w "$id" -r "$run" --output json >"$2.json" 2>/dev/null || return 0
	jq -r "$JQ_ACTIVITIES" "$2.json" >"$2.tsv" 2>/dev/null || rm -f "$2.tsv"
}

# pick_best: for each step, the run with the shortest wall time becomes the
# reported figure (BENCH_REPEAT > 1 filters out disturbed runs).
declare -A BEST ALL_SECS
pick_best() {
	local s r best arr
	for s in "${STEPS[@]}"; do
		best=1
		ALL_SECS[$s]=${SECS[$s#1]}
		for ((r = 2; r <= REPEAT; r++)); do
			ALL_SECS[$s]+=", ${SECS[$s#$r]}"
			awk "BEGIN { exit !(${SECS[$s#$r]} < ${SECS[$s#$best]}) }" && best=$r
		done
		BEST[$s]=$best
		for arr in SECS CPU_TOOL CPU_PG CPU_MY CPU_ALL CPU_OTHER LOAD; do
			declare -n ref=$arr
			ref[$s]=${ref[$s#$best]}
			unset -n ref
		done
	done
}

# sluice_backup CHAIN [DB [FLAG...]], sluice_restore CHAIN DB [FLAG...]
sluice_backup() { "$SLUICE" backup full --source "$(dsn "${2:-$SRC}")" --target "file://$1" --parallel "$PARALLEL" "${@:3}"; }
sluice_restore() { "$SLUICE" restore --backup-target "file://$1" --target "$(dsn "$2")" --parallel "$PARALLEL" "${@:3}"; }
# The encrypted + signed chain: written sealed and signed, read with the
# passphrase and only if every catalog generation verifies.
sluice_backup_enc() { sluice_backup "$1" "$SRC" --encrypt --key-passphrase-env "$KEY_ENV" --sign-key-file "$KEY_DIR/sign"; }
sluice_restore_enc() { sluice_restore "$1" "$2" --key-passphrase-env "$KEY_ENV" --verify-key-file "$KEY_DIR/sign.pub" --require-signature; }
pg_backup() { pg_dump -Fd -j"$PARALLEL" -f "$1" -d "$(dsn "$SRC")"; }
pg_restore_() { pg_restore -j"$PARALLEL" -d "$(dsn "$2")" "$1"; }
# MariaDB: sluice's restore, and the reference (dump untimed, load timed).
sluice_restore_my() { "$SLUICE" restore --backup-target "file://$1" --target-driver mysql --target "$(my_dsn "$2")" --parallel "$PARALLEL"; }
my_dump() { mariadb-dump "${MY_OPTS[@]}" --single-transaction "$1" >"$2"; }
my_fresh() { my '' -e "DROP DATABASE IF EXISTS \`$1\`; CREATE DATABASE \`$1\`"; }
# my_load: the command the timed step runs, the mariadb client reading
# the dump (through bash, so that /usr/bin/time covers client and redirect).
my_load_cmd() { MY_LOAD=(bash -c 'exec mariadb "${@:2}" <"$1"' my_load "$2" "${MY_OPTS[@]}" --batch "--database=$1"); }
MY_CHAIN_DIR=chain-mariadb
MY_DUMP_FILE=mariadb-dump.sql

# prepare_mariadb_source: $SRC_MY, the source with exactly the values a
# MySQL-family target refuses replaced by ordinary ones, and its chain
# (untimed). Sets MY_N_FLOATS and MY_N_TS (the values replaced) and checks
# that none is left and that nothing else changed (row counts, and the
# source's other columns by md5 of every row without ratio and occurred_at).
prepare_mariadb_source() {
	log "deriving $SRC_MY from $SRC (float NaN, +-Infinity, -0 and timestamptz +-infinity replaced by ordinary values) and its chain (untimed)"
	drop_db "$SRC_MY"
	sql postgres -c "CREATE DATABASE $SRC_MY TEMPLATE $SRC"
	MY_N_FLOATS=$(sql "$SRC_MY" -c "WITH u AS (UPDATE events SET ratio = CASE WHEN ratio = 'Infinity' THEN 500000 WHEN ratio = '-Infinity' THEN -500000 ELSE 0 END
		WHERE ratio = 'NaN' OR ratio IN ('Infinity', '-Infinity') OR (ratio = 0 AND ratio::text = '-0') RETURNING 1) SELECT count(*) FROM u")
	MY_N_TS=$(sql "$SRC_MY" -c "WITH u AS (UPDATE events SET occurred_at = CASE WHEN occurred_at = 'infinity' THEN timestamptz '2100-01-01 00:00:00+00' ELSE timestamptz '1900-01-01 00:00:00+00' END
		WHERE NOT isfinite(occurred_at) RETURNING 1) SELECT count(*) FROM u")
	local left q t a b
	left=$(sql "$SRC_MY" -c "SELECT count(*) FROM events WHERE ratio = 'NaN' OR ratio IN ('Infinity', '-Infinity') OR (ratio = 0 AND ratio::text = '-0') OR NOT isfinite(occurred_at)")
	[[ $left == 0 ]] || die "$SRC_MY still holds $left refused values after the replacement"
	q="SELECT count(*) || ' ' || md5(string_agg(md5((id, account_id, kind, seq, local_time, duration, trace_id, amount, payload, raw, note)::text), '' ORDER BY id)) FROM events"
	a=$(sql "$SRC" -c "$q")
	b=$(sql "$SRC_MY" -c "$q")
	[[ $a == "$b" ]] || die "$SRC_MY.events differs from $SRC beyond ratio and occurred_at: $b against $a"
	for t in "${TABLES[@]}"; do
		[[ $t == events ]] && continue
		# shellcheck disable=SC2059
		q=$(printf "$TABLE_CHECK_SQL" "$t")
		a=$(sql "$SRC" -c "$q")
		b=$(sql "$SRC_MY" -c "$q")
		[[ $a == "$b" ]] || die "$SRC_MY.$t differs from $SRC: $b against $a"
	done
	sql "$SRC_MY" -c 'VACUUM ANALYZE events'
	rm -rf "${DIR:?}/$MY_CHAIN_DIR"
	sluice_backup "$DIR/$MY_CHAIN_DIR" "$SRC_MY" >"$DIR/mariadb-chain.log" 2>&1 || die "sluice backup full of $SRC_MY failed ($DIR/mariadb-chain.log)"
	log "$SRC_MY: $MY_N_FLOATS ratio and $MY_N_TS occurred_at values replaced, the rest equal to $SRC; chain $DIR/$MY_CHAIN_DIR"
}

# prepare_keys: this run's signing pair, $KEY_DIR/sign and sign.pub
# (keygen never overwrites: the previous run's pair is removed first).
prepare_keys() {
	KEY_DIR=$(cd "$DIR" && pwd)/keys
	rm -rf "$KEY_DIR"
	mkdir -p "$KEY_DIR"
	"$SLUICE" backup keygen --out "$KEY_DIR/sign" >"$DIR/keygen.log" 2>&1 || die "sluice backup keygen failed ($DIR/keygen.log)"
}

# worker_has_key PID: whether the environment PID started with holds
# KEY_ENV with this run's passphrase (the worker reads it from there).
worker_has_key() {
	[[ -n $1 && -r /proc/$1/environ ]] || return 1
	grep -qxF "$KEY_ENV=${!KEY_ENV}" < <(tr '\0' '\n' <"/proc/$1/environ")
}
# ensure_worker_key: a worker whose environment holds KEY_ENV; one without
# it is restarted through deploy/dev/worker.sh with KEY_ENV exported.
ensure_worker_key() {
	local pid
	pid=$(worker_pid)
	if worker_has_key "$pid"; then
		log "the worker (pid $pid) has $KEY_ENV in its environment"
		return 0
	fi
	[[ -s $SLUICE_STATE/worker.pid ]] ||
		die "the worker answering on $ADMIN was not started by deploy/dev/worker.sh and its environment lacks $KEY_ENV (or cannot be read): restart it with $KEY_ENV exported"
	log "restarting the worker (pid $pid) with $KEY_ENV in its environment: it reads the encrypted chain's passphrase from there"
	bash deploy/dev/worker.sh stop >/dev/null
	bash deploy/dev/worker.sh >"$DIR/worker-start.log" 2>&1 || die "the worker did not start again: $(tail -n 5 "$DIR/worker-start.log")"
	pid=$(worker_pid)
	worker_has_key "$pid" || die "the restarted worker (pid $pid) still lacks $KEY_ENV in its environment"
	log "worker restarted (pid $pid)"
}

# check_enc_chain CHAIN: every manifest of CHAIN is sealed (format 3: only
# chunk keys and sizes in the clear), it holds wrapped data keys under keys/,
# and every catalog commit and checkpoint carries a signature
# (docs/chain-format.md).
check_enc_chain() {
	command -v jq >/dev/null || {
		log "jq not found: not checking that $1 is sealed and signed"
		return 0
	}
	local f n_man=0 n_cat=0
	for f in "$1"/manifests/*.json; do
		[[ -e $f ]] || continue
		jq -e '.format_version == 3 and (.sealed | length > 0)' "$f" >/dev/null || die "manifest $f of the encrypted chain is not sealed"
		n_man=$((n_man + 1))
	done
	((n_man > 0)) || die "the encrypted chain $1 has no manifest"
	compgen -G "$1/keys/*.json" >/dev/null || die "the encrypted chain $1 holds no wrapped data key under keys/"
	for f in "$1"/catalog/commit-*.json "$1"/catalog/checkpoint-*.json; do
		[[ -e $f ]] || continue
		jq -e '.signature.sig | length > 0' "$f" >/dev/null || die "catalog object $f of the encrypted chain carries no signature"
		n_cat=$((n_cat + 1))
	done
	((n_cat > 0)) || die "the encrypted chain $1 has no catalog commit"
	log "$1: $n_man manifest(s) sealed, data keys wrapped under keys/, $n_cat catalog commit(s) and checkpoint(s) signed"
}

warmup() {
	log "warm-up pass (untimed)"
	local w=$DIR/warmup
	rm -rf "$w"
	mkdir -p "$w"
	sluice_backup "$w/chain" >"$w/log" 2>&1 || die "warm-up sluice backup failed ($w/log)"
	fresh_db "$WARM_DB"
	sluice_restore "$w/chain" "$WARM_DB" >>"$w/log" 2>&1 || die "warm-up sluice restore failed ($w/log)"
	sluice_backup_enc "$w/$ENC_CHAIN_DIR" >>"$w/log" 2>&1 || die "warm-up encrypted sluice backup failed ($w/log)"
	fresh_db "$WARM_DB"
	sluice_restore_enc "$w/$ENC_CHAIN_DIR" "$WARM_DB" >>"$w/log" 2>&1 || die "warm-up encrypted sluice restore failed ($w/log)"
	pg_backup "$w/dump" >>"$w/log" 2>&1 || die "warm-up pg_dump failed ($w/log)"
	fresh_db "$WARM_DB"
	pg_restore_ "$w/dump" "$WARM_DB" >>"$w/log" 2>&1 || die "warm-up pg_restore failed ($w/log)"
	drop_db "$WARM_DB"
	local ma=${MY_PREFIX}${MY_RUN}_warmup_sluice mb=${MY_PREFIX}${MY_RUN}_warmup_load
	my_fresh "$ma"
	sluice_restore_my "$DIR/$MY_CHAIN_DIR" "$ma" >>"$w/log" 2>&1 || die "warm-up sluice restore into MariaDB failed ($w/log)"
	my_dump "$ma" "$w/mariadb-dump.sql" 2>>"$w/log" || die "warm-up mariadb-dump failed ($w/log)"
	my_fresh "$mb"
	my_load_cmd "$mb" "$w/mariadb-dump.sql"
	"${MY_LOAD[@]}" >>"$w/log" 2>&1 || die "warm-up mariadb load failed ($w/log)"
	my '' -e "DROP DATABASE \`$ma\`; DROP DATABASE \`$mb\`"
	rm -rf "$w"
}

# run_sluice: the plain backup and the encrypted + signed one, then the two
# restores; each encrypted step right after its plain one in odd runs, right
# before it in even runs (the first of the two backups is the slower one).
run_sluice() {
	local -a kinds=(plain enc_sig)
	local k
	if ((RUN % 2 == 0)); then kinds=(enc_sig plain); fi
	rm -rf "$DIR/chain" "${DIR:?}/$ENC_CHAIN_DIR"
	for k in "${kinds[@]}"; do
		if [[ $k == plain ]]; then
			timed sluice_backup worker sluice_backup "$DIR/chain"
		else
			timed sluice_backup_enc_sig worker sluice_backup_enc "$DIR/$ENC_CHAIN_DIR"
		fi
	done
	for k in "${kinds[@]}"; do
		if [[ $k == plain ]]; then
			fresh_db "$DST_SLUICE"
			timed sluice_restore worker sluice_restore "$DIR/chain" "$DST_SLUICE"
		else
			fresh_db "$DST_ENC"
			timed sluice_restore_enc_sig worker sluice_restore_enc "$DIR/$ENC_CHAIN_DIR" "$DST_ENC"
		fi
	done
}
run_pg() {
	rm -rf "$DIR/dump"
	timed pg_dump self pg_dump -Fd -j"$PARALLEL" -f "$DIR/dump" -d "$(dsn "$SRC")"
	fresh_db "$DST_PG"
	timed pg_restore self pg_restore -j"$PARALLEL" -d "$(dsn "$DST_PG")" "$DIR/dump"
}
# run_mariadb: this run's two MariaDB databases (the previous run's dropped);
# MY_DST_SLUICE and MY_DST_LOAD name the last ones.
run_mariadb() {
	my_drop_like "$MY_PREFIX"
	MY_DST_SLUICE=${MY_PREFIX}${MY_RUN}_r${RUN}_sluice
	MY_DST_LOAD=${MY_PREFIX}${MY_RUN}_r${RUN}_load
	my_fresh "$MY_DST_SLUICE"
	timed sluice_restore_mariadb worker sluice_restore_my "$DIR/$MY_CHAIN_DIR" "$MY_DST_SLUICE"
	log "mariadb-dump of $MY_DST_SLUICE (untimed)"
	my_dump "$MY_DST_SLUICE" "$DIR/$MY_DUMP_FILE" 2>"$DIR/mariadb-dump.log" || die "mariadb-dump of $MY_DST_SLUICE failed ($DIR/mariadb-dump.log)"
	my_fresh "$MY_DST_LOAD"
	my_load_cmd "$MY_DST_LOAD" "$DIR/$MY_DUMP_FILE"
	timed mariadb_load self "${MY_LOAD[@]}"
}

# ------------------------------------------------------------ verification

# Per table: row count and the md5 of the rows' md5s (row text form) in
# order, computed by PostgreSQL on both sides at once.
TABLE_CHECK_SQL="SELECT count(*) || ' ' || md5(coalesce(string_agg(h, '' ORDER BY h), '')) FROM (SELECT md5(x::text) AS h FROM public.%s x) s"
# Structure: columns with types, indexes, constraints, enum labels.
SCHEMA_SQL=$(
	cat <<'SQL'
SELECT 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL SELECT 'idx ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL SELECT 'con ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL SELECT 'enum ' || t.typname || ' ' || string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY t.typname
ORDER BY 1
SQL
)

verify() {
	local db=$1 t a b status=0
	log "verifying $db against $SRC"
	for t in "${TABLES[@]}"; do
		local q
		# shellcheck disable=SC2059
		q=$(printf "$TABLE_CHECK_SQL" "$t")
		sql "$SRC" -c "$q" >"$DIR/verify-src.$t" &
		local p1=$!
		sql "$db" -c "$q" >"$DIR/verify-dst.$t" 2>&1 || true
		wait "$p1" || die "checksum of $SRC.$t failed"
		a=$(<"$DIR/verify-src.$t")
		b=$(<"$DIR/verify-dst.$t")
		if [[ $a == "$b" ]]; then
			printf '  %-10s equal: %s rows, md5 %s\n' "$t" "${a%% *}" "${a#* }"
		else
			printf '  %-10s DIFFERENT: source %s, restored %s\n' "$t" "$a" "$b"
			status=1
		fi
		rm -f "$DIR/verify-src.$t" "$DIR/verify-dst.$t"
	done
	sql "$SRC" -c "$SCHEMA_SQL" >"$DIR/schema-src.txt"
	sql "$db" -c "$SCHEMA_SQL" >"$DIR/schema-$db.txt"
	if diff -u "$DIR/schema-src.txt" "$DIR/schema-$db.txt" >"$DIR/schema-$db.diff"; then
		printf '  %-10s equal: %s columns, indexes, constraints and enums\n' schema "$(wc -l <"$DIR/schema-src.txt")"
	else
		printf '  %-10s DIFFERENT (source -, restored +):\n' schema
		sed -n '3,$p' "$DIR/schema-$db.diff" | grep '^[-+]' | sed 's/^/    /'
		status=1
	fi
	return $status
}

# MariaDB: per table, the row count and the sums of its integer columns, the
# same figures from PostgreSQL ($SRC_MY) and MariaDB; between the two MariaDB
# databases also CHECKSUM TABLE.
declare -A INT_COLS=(
	[regions]="id" [accounts]="id region_id score" [events]="id account_id kind seq"
	[documents]="id account_id flags" [tag_sets]="id weight" [audit_log]="level pid" [bench_meta]="generator_version"
)
sums_sql() { # sums_sql pg|my TABLE
	local c e="count(*)"
	for c in ${INT_COLS[$2]}; do
		if [[ $1 == pg ]]; then
			e+=" || ' ' || coalesce(sum($c), 0)"
		else
			e+=", coalesce(sum($c), 0)"
		fi
	done
	if [[ $1 == pg ]]; then
		printf 'SELECT %s FROM public.%s' "$e" "$2"
	else
		printf "SELECT CONCAT_WS(' ', %s) FROM \`%s\`" "$e" "$2"
	fi
}
verify_mariadb() {
	local t a b c x y status=0
	log "verifying MariaDB $MY_DST_SLUICE against $SRC_MY, and $MY_DST_LOAD against $MY_DST_SLUICE"
	for t in "${TABLES[@]}"; do
		a=$(sql "$SRC_MY" -c "$(sums_sql pg "$t")") || die "the sums of $SRC_MY.$t could not be read"
		b=$(my "$MY_DST_SLUICE" -e "$(sums_sql my "$t")" 2>&1 || true)
		c=$(my "$MY_DST_LOAD" -e "$(sums_sql my "$t")" 2>&1 || true)
		x=$(my "$MY_DST_SLUICE" -e "CHECKSUM TABLE \`$t\` EXTENDED" 2>&1 | awk '{ print $2 }' || true)
		y=$(my "$MY_DST_LOAD" -e "CHECKSUM TABLE \`$t\` EXTENDED" 2>&1 | awk '{ print $2 }' || true)
		if [[ $a == "$b" && $b == "$c" && $x =~ ^[0-9]+$ && $x == "$y" ]]; then
			printf '  %-10s equal: %s rows, sums %s; checksum %s\n' "$t" "${a%% *}" "${a#* }" "$x"
		else
			printf '  %-10s DIFFERENT: %s %s, sluice restore %s, dump load %s; checksums %s, %s\n' "$t" "$SRC_MY" "$a" "$b" "$c" "$x" "$y"
			status=1
		fi
	done
	return $status
}

# ------------------------------------------------------------ report

# activities_table STEP: the per-activity timings of STEP's reported run.
activities_table() {
	local f="$DIR/$1.${BEST[$1]}.activities.tsv"
	[[ -s $f ]] || return 0
	echo "$1, Temporal activities of run ${BEST[$1]} (s after the workflow started; queued = scheduled to started):"
	printf '  %-14s %-18s %7s %7s %8s\n' activity table start queued seconds
	awk -F'\t' '{ printf "  %-14s %-18s %7.2f %7.2f %8.2f\n", $1, $2, $3, $4, $5 }' "$f"
}
activities_json() {
	local f="$DIR/$1.${BEST[$1]}.activities.tsv"
	if [[ -s $f ]] && command -v jq >/dev/null; then
		jq -R -s -c 'split("\n") | map(select(length > 0) | split("\t")
			| {activity: .[0], table: .[1], start_s: (.[2] | tonumber), queued_s: (.[3] | tonumber), run_s: (.[4] | tonumber)})' "$f"
	else
		echo '[]'
	fi
}

report() {
	local src_bytes=$1 rows=$2 chain_bytes=$3 dump_bytes=$4 my_chain_bytes=$5 my_dump_bytes=$6 enc_chain_bytes=$7
	local mb
	mb=$(calc "$src_bytes / 1e6" 1)
	local bk_ratio rs_ratio sz_ratio my_ratio es_bk_ratio es_rs_ratio es_sz_ratio
	es_bk_ratio=$(calc "${SECS[sluice_backup_enc_sig]} / ${SECS[sluice_backup]}" 2)
	es_rs_ratio=$(calc "${SECS[sluice_restore_enc_sig]} / ${SECS[sluice_restore]}" 2)
	es_sz_ratio=$(calc "$enc_chain_bytes / $chain_bytes" 3)
	bk_ratio=$(calc "${SECS[pg_dump]} / ${SECS[sluice_backup]}" 2)
	rs_ratio=$(calc "${SECS[pg_restore]} / ${SECS[sluice_restore]}" 2)
	sz_ratio=$(calc "$chain_bytes / $dump_bytes" 2)
	my_ratio=$(calc "${SECS[mariadb_load]} / ${SECS[sluice_restore_mariadb]}" 2)
	local mem cpu kernel
	mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
	cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	kernel=$(uname -r)
	local v_pg v_dump v_sluice v_go v_temporal
	v_pg=$(sql postgres -c 'SHOW server_version')
	v_dump=$(pg_dump --version)
	v_sluice="git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo '+dirty'), bin/sluice-worker built $(date -u -r "$ROOT/bin/sluice-worker" +%FT%TZ 2>/dev/null || echo '?')"
	v_go=$(go version -m "$ROOT/bin/sluice-worker" 2>/dev/null | awk 'NR == 1 { print $2 }' || true)
	v_temporal=$({ "$TEMPORAL_CLI" --version 2>/dev/null || echo unknown; } | head -n1)
	local v_my v_mydump
	v_my=$(my '' -e 'SELECT VERSION()')
	v_mydump=$(mariadb-dump --version)

	echo
	echo "sluice full-backup benchmark, $(date -u +%FT%TZ)"
	echo "machine : $(nproc) CPUs ($cpu), $mem RAM, Linux $kernel"
	echo "versions: PostgreSQL $v_pg; $v_dump; MariaDB $v_my; $v_mydump; sluice $v_sluice (${v_go:-go ?}); $v_temporal"
	echo "source  : $SRC, scale $SCALE, $rows rows in ${#TABLES[@]} tables, pg_database_size $src_bytes bytes = $mb MB"
	echo "settings: --parallel $PARALLEL / -j$PARALLEL, order $ORDER, warm-up $([[ $WARMUP == 1 ]] && echo on || echo off), $REPEAT run(s) per step (fastest reported), CHECKPOINT + wait for an idle machine before each step"
	echo "MB/s = source pg_database_size (10^6 bytes) / wall seconds; rows/s = source rows / wall seconds"
	echo "CPU s: tool = sluice-worker process, or pg_dump/pg_restore (the mariadb client) and their children; pg = PostgreSQL server;"
	echo "       my = MariaDB server; other = rest of the machine minus Temporal (noise: should be ~0); load1 = 1-min load average before the step"
	echo "*_enc_sig rows: the same sluice step on a chain written with --encrypt --key-passphrase-env $KEY_ENV --sign-key-file,"
	echo "       restored with --key-passphrase-env $KEY_ENV --verify-key-file --require-signature (into $DST_ENC, checked against the source)"
	echo "MariaDB rows: a copy of the source with $MY_N_FLOATS NaN/±Inf/-0 floats and $MY_N_TS infinite timestamps replaced ($SRC_MY, see the"
	echo "       script's header), restored by sluice into $MY_DST_SLUICE; mariadb_load = the mariadb client loading mariadb-dump of that database"
	echo
	printf '%-22s %9s %10s %7s %8s %7s %7s %8s %6s  %s\n' step seconds rows/s MB/s 'CPU tool' 'CPU pg' 'CPU my' 'CPU other' load1 'all runs (s)'
	local s
	for s in sluice_backup sluice_backup_enc_sig pg_dump sluice_restore sluice_restore_enc_sig pg_restore sluice_restore_mariadb mariadb_load; do
		printf '%-22s %9.2f %10.0f %7.1f %8.1f %7.1f %7.1f %8.1f %6s  %s\n' "$s" "${SECS[$s]}" \
			"$(calc "$rows / ${SECS[$s]}" 0)" "$(calc "$mb / ${SECS[$s]}" 2)" "${CPU_TOOL[$s]}" "${CPU_PG[$s]}" "${CPU_MY[$s]}" "${CPU_OTHER[$s]}" "${LOAD[$s]}" "${ALL_SECS[$s]}"
	done
	echo
	printf '%-30s %12s bytes (%s MB)\n' 'sluice chain (du -sb)' "$chain_bytes" "$(calc "$chain_bytes / 1e6" 1)"
	printf '%-30s %12s bytes (%s MB)\n' 'sluice chain, enc+signed' "$enc_chain_bytes" "$(calc "$enc_chain_bytes / 1e6" 1)"
	printf '%-30s %12s bytes (%s MB)\n' 'pg_dump -Fd dir (du -sb)' "$dump_bytes" "$(calc "$dump_bytes / 1e6" 1)"
	printf '%-30s %12s bytes (%s MB)\n' 'sluice chain, MariaDB source' "$my_chain_bytes" "$(calc "$my_chain_bytes / 1e6" 1)"
	printf '%-30s %12s bytes (%s MB)\n' 'mariadb-dump file' "$my_dump_bytes" "$(calc "$my_dump_bytes / 1e6" 1)"
	echo
	echo "sluice vs pg_dump/pg_restore (time: t_pg / t_sluice, > 1 means sluice faster; size: chain / dump, > 1 means chain larger)"
	printf '  backup time  %6s\n  restore time %6s\n  size         %6s\n' "$bk_ratio" "$rs_ratio" "$sz_ratio"
	echo "encrypted+signed / plain (time: t_enc_sig / t_plain, > 1 means sealing and signing cost time; CPU: the worker's CPU s, enc_sig / plain)"
	printf '  backup  %5sx (CPU tool %s / %s s)\n' "$es_bk_ratio" "${CPU_TOOL[sluice_backup_enc_sig]}" "${CPU_TOOL[sluice_backup]}"
	printf '  restore %5sx (CPU tool %s / %s s)\n' "$es_rs_ratio" "${CPU_TOOL[sluice_restore_enc_sig]}" "${CPU_TOOL[sluice_restore]}"
	printf '  size    %5sx\n' "$es_sz_ratio"
	echo "sluice restore into MariaDB vs the mariadb client loading mariadb-dump (t_load / t_sluice, > 1 means sluice faster)"
	printf '  restore time %6s\n' "$my_ratio"
	echo
	activities_table sluice_backup
	activities_table sluice_backup_enc_sig
	activities_table sluice_restore
	activities_table sluice_restore_enc_sig
	activities_table sluice_restore_mariadb

	local step_json="" sep=""
	for s in "${STEPS[@]}"; do
		step_json+="$sep\"$s\": {\"seconds\": ${SECS[$s]}, \"rows_per_s\": $(calc "$rows / ${SECS[$s]}" 0), \"mb_per_s\": $(calc "$mb / ${SECS[$s]}" 2), \"cpu_tool_s\": ${CPU_TOOL[$s]}, \"cpu_postgres_s\": ${CPU_PG[$s]}, \"cpu_mariadb_s\": ${CPU_MY[$s]}, \"cpu_other_s\": ${CPU_OTHER[$s]}, \"cpu_machine_s\": ${CPU_ALL[$s]}, \"loadavg_1m_before\": ${LOAD[$s]}, \"all_runs_s\": [${ALL_SECS[$s]}]"
		[[ $s == sluice_* ]] && step_json+=", \"activities\": $(activities_json "$s")"
		step_json+="}"
		sep=", "
	done
	local js
	js=$(
		cat <<JSON
{
  "generated_at": "$(date -u +%FT%TZ)",
  "machine": {"nproc": $(nproc), "cpu": $(json_str "$cpu"), "mem_total_bytes": $(awk '/^MemTotal/ { print $2 * 1024 }' /proc/meminfo), "kernel": $(json_str "$kernel")},
  "versions": {"postgresql": $(json_str "$v_pg"), "pg_dump": $(json_str "$v_dump"), "mariadb": $(json_str "$v_my"), "mariadb_dump": $(json_str "$v_mydump"), "sluice": $(json_str "$v_sluice"), "go": $(json_str "${v_go:-}"), "temporal": $(json_str "$v_temporal")},
  "settings": {"scale": $SCALE, "parallel": $PARALLEL, "order": "$ORDER", "warmup": $([[ $WARMUP == 1 ]] && echo true || echo false), "repeat": $REPEAT, "reported_run": "fastest"},
  "mb_definition": "source pg_database_size in 10^6 bytes divided by wall seconds",
  "source": {"database": "$SRC", "size_bytes": $src_bytes, "rows": $rows, "tables": ${#TABLES[@]}},
  "steps": {$step_json},
  "mariadb": {"source": "$SRC_MY", "derived_from": "$SRC", "floats_replaced": $MY_N_FLOATS, "timestamps_replaced": $MY_N_TS,
    "replacements": "events.ratio NaN and -0 -> 0, +Infinity -> 500000, -Infinity -> -500000; events.occurred_at infinity -> 2100-01-01, -infinity -> 1900-01-01 UTC; all else identical",
    "sluice_restore_database": "$MY_DST_SLUICE", "load_database": "$MY_DST_LOAD", "load_command": "mariadb --batch --database=<db> < mariadb-dump --single-transaction <sluice_restore_database>"},
  "enc_sig": {"chain": "$DIR/$ENC_CHAIN_DIR", "restore_database": "$DST_ENC",
    "write_flags": "--encrypt --key-passphrase-env $KEY_ENV --sign-key-file $KEY_DIR/sign",
    "read_flags": "--key-passphrase-env $KEY_ENV --verify-key-file $KEY_DIR/sign.pub --require-signature",
    "order": "each encrypted step right after its plain one in odd runs, right before it in even runs"},
  "sizes": {"sluice_chain_bytes": $chain_bytes, "sluice_chain_enc_sig_bytes": $enc_chain_bytes, "pg_dump_dir_bytes": $dump_bytes, "sluice_chain_mariadb_source_bytes": $my_chain_bytes, "mariadb_dump_bytes": $my_dump_bytes},
  "ratios": {"backup_time_enc_sig_over_plain": $es_bk_ratio, "restore_time_enc_sig_over_plain": $es_rs_ratio, "size_enc_sig_over_plain": $es_sz_ratio, "backup_speed_sluice_over_pg": $bk_ratio, "restore_speed_sluice_over_pg": $rs_ratio, "size_chain_over_dump": $sz_ratio, "restore_speed_sluice_mariadb_over_mariadb_load": $my_ratio},
  "verified": true
}
JSON
	)
	printf '%s\n' "$js" >"$DIR/results.json"
	if command -v jq >/dev/null; then jq -e . "$DIR/results.json" >/dev/null || die "results.json is not valid JSON"; fi
	echo
	echo "results: $DIR/results.json (per-step logs in $DIR)"
}
json_str() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

# ------------------------------------------------------------ main

main() {
	mkdir -p "$DIR"
	preflight
	find_postmaster
	trap cleanup EXIT
	for db in "${TEMP_DBS[@]}"; do drop_db "$db" >/dev/null; done
	rm -rf "$DIR/chain" "${DIR:?}/$ENC_CHAIN_DIR" "$DIR/dump" "$DIR/warmup" "$DIR/results.json" "$DIR"/*.[0-9]*.* "$DIR"/top-*.log
	prepare_keys
	ensure_worker_key

	if source_ok; then
		log "reusing $SRC (generator $GEN_VERSION, scale $SCALE)"
	else
		generate_source
		source_ok || die "generated source does not have the expected row counts"
	fi
	local src_bytes rows=0 t
	src_bytes=$(sql postgres -c "SELECT pg_database_size('$SRC')")
	for t in "${TABLES[@]}"; do rows=$((rows + EXPECT[$t])); done
	log "source: $rows rows, $(calc "$src_bytes / 1e6" 1) MB"
	my_drop_like "$MY_PREFIX"
	prepare_mariadb_source

	if [[ $WARMUP == 1 ]]; then warmup; fi
	for ((RUN = 1; RUN <= REPEAT; RUN++)); do
		if [[ $ORDER == sluice-first || ($ORDER == alternate && $((RUN % 2)) == 1) ]]; then
			run_sluice
			run_pg
		else
			run_pg
			run_sluice
		fi
		run_mariadb
	done
	pick_best

	# The last sluice restore is the one checked (every run restores the same chain contents).
	verify "$DST_SLUICE" || die "the sluice restore differs from the source (see above; databases dropped unless BENCH_KEEP_DBS=1)"
	verify "$DST_ENC" || die "the sluice restore of the encrypted + signed chain differs from the source (see above; databases dropped unless BENCH_KEEP_DBS=1)"
	check_enc_chain "$DIR/$ENC_CHAIN_DIR"
	# Likewise the last run's two MariaDB databases.
	verify_mariadb || die "the MariaDB databases differ (see above; databases dropped unless BENCH_KEEP_DBS=1)"
	local chain_bytes dump_bytes my_chain_bytes my_dump_bytes enc_chain_bytes
	chain_bytes=$(du -sb "$DIR/chain" | cut -f1)
	enc_chain_bytes=$(du -sb "$DIR/$ENC_CHAIN_DIR" | cut -f1)
	dump_bytes=$(du -sb "$DIR/dump" | cut -f1)
	my_chain_bytes=$(du -sb "$DIR/$MY_CHAIN_DIR" | cut -f1)
	my_dump_bytes=$(du -sb "$DIR/$MY_DUMP_FILE" | cut -f1)
	report "$src_bytes" "$rows" "$chain_bytes" "$dump_bytes" "$my_chain_bytes" "$my_dump_bytes" "$enc_chain_bytes"
}

main "$@"
