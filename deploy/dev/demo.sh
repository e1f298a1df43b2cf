#!/usr/bin/env bash
# The main job on defaults that need nothing else: a demo source database on
# this machine's PostgreSQL is backed up into a local-folder chain through the
# Temporal worker, then restored into a second database and compared.
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE_STATE=${SLUICE_STATE:-$HOME/.local/state/sluice}
PG=${SLUICE_DEMO_PG:-postgres://postgres@127.0.0.1:5432}
SRC_DB=sluice_demo
DST_DB=sluice_demo_restored
CHAIN=$SLUICE_STATE/demo/chain
SLUICE=bin/sluice

psql_admin() { psql "$PG/postgres?sslmode=disable" -v ON_ERROR_STOP=1 -qtA "$@"; }

if [[ $(psql_admin -c "SELECT count(*) FROM pg_database WHERE datname = '$SRC_DB'") == 0 ]]; then
	echo "demo: creating source database $SRC_DB"
	psql_admin -c "CREATE DATABASE $SRC_DB"
	psql "$PG/$SRC_DB?sslmode=disable" -v ON_ERROR_STOP=1 -q <<'SQL'
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
INSERT INTO customers (email, name, tags)
	SELECT 'user' || i || '@example.org', 'User ' || i, ARRAY['t' || (i % 5)] FROM generate_series(1, 20000) i;
INSERT INTO orders (customer_id, state, total, placed_at, details)
	SELECT 1 + i % 20000, (ARRAY['new','paid','shipped','returned'])[1 + i % 4]::order_state,
	       (i % 1000) + 0.99, now() - i * interval '1 minute', jsonb_build_object('items', i % 7)
	FROM generate_series(1, 100000) i;
INSERT INTO page_views SELECT '/p/' || (i % 100), now()::timestamp - i * interval '1 second', random() * 100
	FROM generate_series(1, 50000) i;
SQL
fi
if [[ $(psql_admin -c "SELECT count(*) FROM pg_database WHERE datname = '$DST_DB'") == 0 ]]; then
	psql_admin -c "CREATE DATABASE $DST_DB"
fi

# Each demo run writes a fresh chain.
rm -rf "$CHAIN"
mkdir -p "$(dirname "$CHAIN")"
echo "demo: Temporal UI at http://127.0.0.1:8233 (runs appear under the default namespace)"
echo "demo: backing up $SRC_DB into file://$CHAIN"
$SLUICE backup full --source "$PG/$SRC_DB?sslmode=disable" --target "file://$CHAIN"
echo "demo: restoring the chain into $DST_DB"
$SLUICE restore --backup-target "file://$CHAIN" --target "$PG/$DST_DB?sslmode=disable" --replace-existing

echo "demo: comparing source and restored tables"
status=0
for t in customers orders page_views; do
	q="SELECT count(*) || ' rows, md5 ' || md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) FROM public.$t x"
	a=$(psql "$PG/$SRC_DB?sslmode=disable" -qtA -c "$q")
	b=$(psql "$PG/$DST_DB?sslmode=disable" -qtA -c "$q")
	if [[ $a == "$b" ]]; then echo "  $t: equal ($a)"; else echo "  $t: DIFFERENT: $a vs $b"; status=1; fi
done
echo "demo: done. Stop the worker and the dev services with: make stop-services"
exit $status
