#!/usr/bin/env bash
# Starts a PostgreSQL server for the tests and benchmarks (installing Debian's `postgresql`
# when it is missing) and prints the URL tests read from PIXIE_TEST_POSTGRES_URL: a role that
# may create databases (each test makes and drops its own). Everything else goes to stderr;
# any failure exits non-zero with the reason, so .ci/run stops loudly.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
say() { echo "postgres.sh: $*" >&2; }

as_postgres() {
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$1"; else sudo -n -u postgres sh -c "$1"; fi
}

if ! command -v pg_lsclusters >/dev/null || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  say "installing postgresql"
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends postgresql >&2
fi
ver=$(ls /usr/lib/postgresql | sort -V | tail -1)
[ -n "$ver" ] || { say "no PostgreSQL server binaries under /usr/lib/postgresql"; exit 1; }
if ! pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" { found = 1 } END { exit !found }'; then
  say "creating cluster $ver/main"
  pg_createcluster "$ver" main >&2
fi
if ! pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" && $4 ~ /online/ { found = 1 } END { exit !found }'; then
  say "starting cluster $ver/main"
  pg_ctlcluster --skip-systemctl-redirect "$ver" main start >&2 || {
    say "PostgreSQL did not start; its log:"; tail -n 30 "/var/log/postgresql/postgresql-$ver-main.log" >&2 || true; exit 1; }
fi
port=$(pg_lsclusters -h | awk -v v="$ver" '$1 == v && $2 == "main" { print $3 }')
for _ in $(seq 1 50); do
  pg_isready -q -h 127.0.0.1 -p "$port" && break
  sleep 0.2
done
pg_isready -q -h 127.0.0.1 -p "$port" || { say "PostgreSQL $ver is not accepting connections on port $port"; exit 1; }
pw=pixie-test-secret
as_postgres "psql -q -v ON_ERROR_STOP=1 -p $port -c \"DO \\\$\\\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pixie') THEN CREATE ROLE pixie LOGIN CREATEDB PASSWORD '$pw';
  ELSE ALTER ROLE pixie LOGIN CREATEDB PASSWORD '$pw'; END IF; END \\\$\\\$;\"" >&2
echo "postgres://pixie:$pw@127.0.0.1:$port/postgres"
