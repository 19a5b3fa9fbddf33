#!/usr/bin/env bash
# kcat (Debian's package) for the tests that read views with it (tests/integration/test_view_clients.py).
# Idempotent: does nothing when it is installed. Needs root (CI runs as root) or sudo.
set -euo pipefail
if command -v kcat >/dev/null; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends kcat >/dev/null
