#!/usr/bin/env bash
# A throwaway PostgreSQL on loopback for the tests, from Debian's packages.
#
#   eval "$(bash .ci/postgres.sh | tail -1)"   # sets GEOREP_TEST_POSTGRES_URL
#
# Installs the `postgresql` package when no server binaries are found, initdb's a cluster
# under ${GEOREP_PG_DIR:-/tmp/georep-pg} (owned by the postgres user when run as root),
# starts it on 127.0.0.1 at ${GEOREP_PG_PORT:-a free ephemeral port}, kept in the
# directory's `port` file, with its unix socket in that directory, creates role `georep`
# and database `georep_test`, and prints the export line last. Never a fixed port: any
# other server may hold one (and one that answered there would be taken for ours).
# Idempotent: while that cluster runs, it only prints the line.
# The cluster trusts loopback and runs with fsync off: it holds test data only.
# Stop it with: pg_ctl -D "$GEOREP_PG_DIR/data" stop (as the postgres user when root).
set -euo pipefail

base="${GEOREP_PG_DIR:-${TMPDIR:-/tmp}/georep-pg}"
role=georep
database=georep_test

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
    local candidates
    candidates=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V || true)
    for dir in $candidates; do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then bindir="$dir"; fi
    done
}

bindir=""
find_bindir
if [ -z "$bindir" ]; then
    log "no PostgreSQL server binaries under /usr/lib/postgresql: installing the package"
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    $sudo apt-get update >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends postgresql >&2
    find_bindir
    [ -n "$bindir" ] || { log "postgresql installed but no initdb found"; exit 1; }
fi

# initdb and the server refuse to run as root.
as_owner=()
if [ "$(id -u)" = 0 ]; then as_owner=(runuser -u postgres --); fi

url_of() { echo "postgresql://$role@127.0.0.1:$1/$database"; }

# Our own cluster, running: its port is the one it was started on.
if [ -f "$base/port" ] && [ -f "$base/data/PG_VERSION" ] \
    && "${as_owner[@]}" "$bindir/pg_ctl" -D "$base/data" status >/dev/null 2>&1; then
    port=$(cat "$base/port")
    log "already running on 127.0.0.1:$port ($base)"
    echo "export GEOREP_TEST_POSTGRES_URL=$(url_of "$port")"
    exit 0
fi

port="${GEOREP_PG_PORT:-$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')}"

mkdir -p "$base"
if [ "$(id -u)" = 0 ]; then chown postgres: "$base"; fi
chmod 700 "$base"
echo "$port" > "$base/port"
if [ ! -f "$base/data/PG_VERSION" ]; then
    log "initdb into $base/data"
    "${as_owner[@]}" "$bindir/initdb" -D "$base/data" -U postgres -A trust -E UTF8 \
        --no-sync >&2
fi

log "starting on 127.0.0.1:$port (socket in $base)"
"${as_owner[@]}" "$bindir/pg_ctl" -D "$base/data" -l "$base/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $base -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" >&2

psql_admin() { "$bindir/psql" -h "$base" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"; }
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$role'")" != 1 ]; then
    psql_admin -c "CREATE ROLE $role LOGIN CREATEDB" >&2
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$database'")" != 1 ]; then
    psql_admin -c "CREATE DATABASE $database OWNER $role" >&2
fi

echo "export GEOREP_TEST_POSTGRES_URL=$(url_of "$port")"
