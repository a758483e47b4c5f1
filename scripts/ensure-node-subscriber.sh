#!/usr/bin/env bash
# ensure-node-subscriber.sh: installs the Node.js subscriber of the status
# events that the tests run (internal/cli/testdata/node-subscriber,
# TestNodeSubscriber): `npm ci` of its package-lock.json into its own
# node_modules. Installs Debian's nodejs and npm with apt-get when they are
# missing and running as root; otherwise says so and goes on: without them
# that one test skips, saying so. So do jq (TestWatch's jq check) when
# missing.
set -euo pipefail

dir="$(cd "$(dirname "$0")/.." && pwd)/internal/cli/testdata/node-subscriber"

install() {
  [ "$(id -u)" = 0 ] || return 1
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "$@" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q "$@" >/dev/null; }
}

command -v jq >/dev/null 2>&1 || install jq || echo "jq is missing: TestWatch's jq check will skip (apt-get install -y jq)" >&2

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "installing nodejs and npm with apt-get (the Node.js subscriber test) ..." >&2
  if ! install nodejs npm; then
    echo "no Node.js: the Node.js subscriber test will skip (apt-get install -y nodejs npm)" >&2
    exit 0
  fi
fi

if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
  echo "npm ci failed in $dir: the Node.js subscriber test will skip" >&2
fi
exit 0
