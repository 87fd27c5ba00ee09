#!/bin/sh
# First start: initdb with POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB, password
# (scram) authentication from the network, UTF-8 (SQL_ASCII would hand clients bytes);
# then run the server in the foreground (it stops cleanly on SIGTERM).
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
data=/var/lib/postgresql/data
user="${POSTGRES_USER:-postgres}"
if [ ! -s "$data/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" >"$pwfile"
    "$bin/initdb" -D "$data" -U "$user" --pwfile="$pwfile" --auth-local=trust \
        --encoding=UTF8 --locale=C.UTF-8 \
        --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all 0.0.0.0/0 scram-sha-256" >>"$data/pg_hba.conf"
    "$bin/pg_ctl" -D "$data" -o "-c listen_addresses=''" -w start >/dev/null
    database="${POSTGRES_DB:-$user}"  # as the official image: the user's name by default
    if [ "$database" != postgres ]; then
        "$bin/createdb" -U "$user" "$database"
    fi
    "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
fi
exec "$bin/postgres" -D "$data" -c listen_addresses='*'
