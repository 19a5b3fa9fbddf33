#!/usr/bin/env bash
# Create .venv and install kafkalite with its test extras. Idempotent: a second run
# only checks that the install is current (a stamp of pyproject.toml's hash).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null; then
  echo "kafkalite: python3 (>= 3.11) is required" >&2; exit 2
fi
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "kafkalite: Python >= 3.11 is required, found $("$PYTHON" --version)" >&2; exit 2; }
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.kafkalite-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test]'
  echo "$want" > "$stamp"
fi
