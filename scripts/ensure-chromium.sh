#!/usr/bin/env bash
# ensure-chromium.sh: makes sure Chromium is installed for the console's
# browser test (internal/web, TestConsoleInBrowser). Installs the Debian
# package chromium with apt-get when running as root; otherwise says how and
# goes on: without a browser that one test skips, saying so.
set -euo pipefail

for b in chromium chromium-browser; do
  command -v "$b" >/dev/null 2>&1 && exit 0
done

if [ "$(id -u)" != 0 ]; then
  echo "the console's browser test needs Chromium; it will skip. Install it as root: apt-get install -y chromium" >&2
  exit 0
fi

echo "installing chromium with apt-get (the console's browser test) ..." >&2
export DEBIAN_FRONTEND=noninteractive
if apt-get install -y -q chromium >/dev/null 2>&1 ||
   { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; then
  echo "installed chromium" >&2
else
  echo "could not install chromium: the console's browser test will skip" >&2
fi
