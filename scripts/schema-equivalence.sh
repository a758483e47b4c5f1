#!/usr/bin/env bash
# schema-equivalence.sh OLD_REF [NEW_REF]: migrates one fresh database with the
# migrations/*.up.sql of git revision OLD_REF and another with those of NEW_REF
# (default: the working tree), then compares what they define:
#   * pg_dump --schema-only with owners and ACLs, and again with --no-owner,
#     after removing comments (and blank lines) inside function bodies, which
#     may differ; the code may not. The GRANTs of one object are sorted: their
#     order is the order they were given in, which means nothing. COMMENT ON
#     statements are compared apart, their diff shown but not failing;
#   * the pgrelay_* roles and their memberships (roles are cluster-wide, so
#     pg_dump does not show them);
#   * the rows the migrations insert (pg_dump --data-only), except
#     schema_migrations and this_node's random wake-up key and timestamp.
# With KEEP=DIR set, the compared files are kept in DIR (a.* old, b.* new).
# Prints the diffs and exits 1 when anything differs. Needs PostgreSQL 15's
# binaries in $PGRELAY_PG_BIN (default /usr/lib/postgresql/15/bin).
set -euo pipefail

old=${1:?usage: schema-equivalence.sh OLD_REF [NEW_REF]}
new=${2:-}
bin=${PGRELAY_PG_BIN:-/usr/lib/postgresql/15/bin}
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
work=$(mktemp -d)
chmod 755 "$work"
as_pg=()
if [ "$(id -u)" = 0 ]; then as_pg=(runuser -u postgres --); chown postgres "$work"; fi
port=$((20000 + RANDOM % 20000))

cleanup() {
  "${as_pg[@]}" "$bin/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"${as_pg[@]}" "$bin/initdb" -D "$work/data" -U postgres -A trust -E UTF8 --no-locale --no-sync >/dev/null
"${as_pg[@]}" "$bin/pg_ctl" -D "$work/data" -l "$work/log" -w \
  -o "-p $port -k $work -c listen_addresses='' -c fsync=off" start >/dev/null

psql=("$bin/psql" -X -q -h "$work" -p "$port" -U postgres -v ON_ERROR_STOP=1)

# extract REF DIR: the migration files of REF (or of the working tree) into DIR.
extract() {
  mkdir -p "$2"
  if [ -z "$1" ]; then
    cp "$repo"/migrations/*.up.sql "$2"/
  else
    git -C "$repo" archive "$1" migrations | tar -x -C "$2" --strip-components=1 --wildcards 'migrations/*.up.sql'
  fi
}

# migrate DB DIR: what migrations.Up does, with psql: one transaction under
# pgrelay's search_path, the version table first, each file recorded.
migrate() {
  "${psql[@]}" -d postgres -c "CREATE DATABASE $1"
  {
    echo "BEGIN;"
    echo "SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true) \\g /dev/null"
    echo "CREATE SCHEMA IF NOT EXISTS pgrelay;"
    echo "CREATE TABLE IF NOT EXISTS pgrelay.schema_migrations (version pg_catalog.int4 PRIMARY KEY, name pg_catalog.text NOT NULL, applied_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now());"
    for f in $(ls "$2"/*.up.sql | sort); do
      b=$(basename "$f" .up.sql)
      echo "\\i $f"
      echo "INSERT INTO pgrelay.schema_migrations (version, name) VALUES (${b%%_*}, '${b#*_}');"
    done
    echo "COMMIT;"
  } | "${psql[@]}" -d "$1" >/dev/null 2>"$work/$1.warnings" || { cat "$work/$1.warnings" >&2; exit 1; }
}

# strip_bodies: removes comments, trailing blanks and blank lines inside the
# $$-quoted function bodies of a dump.
strip_bodies() {
  grep -v '^\\\(un\)\?restrict ' | grep -v '^COMMENT ON ' | awk '
    { line = $0 }
    inbody {
      if (line ~ /^\$\$;?$/ || line ~ /^\$_?[a-z]*\$;?$/) { inbody = 0; print line; next }
      sub(/[ \t]*--.*$/, "", line)
      sub(/[ \t]+$/, "", line)
      if (line == "") next
      print line; next
    }
    /AS \$[a-z_]*\$$/ { inbody = 1 }
    { print line }' | sort_grants
}

# sort_grants: sorts each run of consecutive GRANT lines.
sort_grants() {
  awk '
    function flush() { if (n) { close("sort"); n = 0 } }
    /^GRANT / { if (!n) fflush(); print | "sort"; n++; next }
    { flush(); print }
    END { flush() }'
}

dump() {
  local db=$1 out=$2
  "$bin/pg_dump" -h "$work" -p "$port" -U postgres --schema-only "$db" | strip_bodies >"$out.schema"
  "$bin/pg_dump" -h "$work" -p "$port" -U postgres --schema-only --no-owner "$db" | strip_bodies >"$out.noowner"
  "$bin/pg_dump" -h "$work" -p "$port" -U postgres --schema-only "$db" | grep '^COMMENT ON ' >"$out.comments" || true
  "${psql[@]}" -d "$db" -At -c "
    SELECT r.rolname, r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin,
           r.rolreplication, r.rolbypassrls, r.rolconnlimit,
           (SELECT pg_catalog.string_agg(g.rolname || ':' || m.admin_option, ',' ORDER BY g.rolname)
              FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
             WHERE m.member = r.oid)
      FROM pg_catalog.pg_roles r WHERE r.rolname LIKE 'pgrelay%' ORDER BY 1" >"$out.roles"
  "$bin/pg_dump" -h "$work" -p "$port" -U postgres --data-only \
    --exclude-table-data=pgrelay.schema_migrations --exclude-table-data=pgrelay.this_node "$db" | grep -v '^\\\(un\)\?restrict ' >"$out.data"
  "${psql[@]}" -d "$db" -At -c "SELECT node_id, pg_catalog.length(wake_key) FROM pgrelay.this_node" >>"$out.data"
}

extract "$old" "$work/old"
extract "$new" "$work/new"
migrate old_chain "$work/old"
migrate new_chain "$work/new"
dump old_chain "$work/a"
dump new_chain "$work/b"

if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$work"/a.* "$work"/b.* "$KEEP"/; fi
status=0
for part in schema noowner roles data; do
  if diff -u --label "old:$part" --label "new:$part" "$work/a.$part" "$work/b.$part"; then
    echo "$part: identical ($(wc -l <"$work/a.$part") lines)"
  else
    status=1
  fi
done
if diff -u --label "old:comments" --label "new:comments" "$work/a.comments" "$work/b.comments"; then
  echo "comments: identical ($(wc -l <"$work/a.comments") lines)"
else
  echo "comments: differ (COMMENT ON texts; not counted)"
fi
exit $status
