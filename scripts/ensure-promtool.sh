#!/usr/bin/env bash
# ensure-promtool.sh: makes sure promtool is installed for the alert rules'
# test (internal/cli, TestAlertRules: `promtool test rules` over
# docs/alerts.yml). Installs the Debian package prometheus, which ships
# promtool, with apt-get when running as root; otherwise says how and goes
# on: without promtool that test skips, saying so.
set -euo pipefail

command -v promtool >/dev/null 2>&1 && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "the alert rules' test needs promtool; it will skip. Install it as root: apt-get install -y --no-install-recommends prometheus" >&2
  exit 0
fi

echo "installing prometheus (for promtool) with apt-get (the alert rules' test) ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt_install() {
  apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 prometheus >/dev/null 2>&1
}
if apt_install || { apt-get update -q >/dev/null 2>&1 && apt_install; }; then
  echo "installed promtool" >&2
  # Only promtool is wanted: where systemd runs, the package's server was
  # just started and enabled; stop it.
  if [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
else
  echo "could not install promtool: the alert rules' test will skip" >&2
fi
