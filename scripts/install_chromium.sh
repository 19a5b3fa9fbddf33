#!/usr/bin/env bash
# Headless Chromium and its WebDriver for the console's browser tests (Debian packages).
# Idempotent: does nothing when both are installed. Needs root (CI runs as root) or sudo.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
