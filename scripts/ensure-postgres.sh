#!/usr/bin/env bash
# ensure-postgres.sh: makes sure PostgreSQL 15's server binaries (and, with
# --pglogical, the pglogical extension) are installed. Installs them with
# apt-get when running as root; otherwise says what to install and fails.
set -euo pipefail

PG_BIN=${PGRELAY_PG_BIN:-/usr/lib/postgresql/15/bin}
want=(postgresql-15)
if [ "${1:-}" = "--pglogical" ]; then want+=(postgresql-15-pglogical); fi

missing=()
for p in "${want[@]}"; do
  case $p in
    postgresql-15) [ -x "$PG_BIN/postgres" ] && [ -x "$PG_BIN/initdb" ] || missing+=("$p") ;;
    *) dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p") ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "pgrelay needs these Debian packages: ${missing[*]}" >&2
  echo "install them as root:  apt-get install -y ${missing[*]}" >&2
  echo "(or point PGRELAY_PG_BIN at a directory with PostgreSQL 15's initdb and postgres)" >&2
  exit 1
fi

echo "installing ${missing[*]} with apt-get ..." >&2
export DEBIAN_FRONTEND=noninteractive
# Do not let the package start its own cluster: pgrelay starts throwaway ones.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 ||
  { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
id postgres >/dev/null 2>&1 || useradd --system --no-create-home -s /usr/sbin/nologin postgres
[ -x "$PG_BIN/postgres" ] || { echo "install finished but $PG_BIN/postgres is missing" >&2; exit 1; }
echo "installed ${missing[*]}" >&2
