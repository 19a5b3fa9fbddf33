#!/usr/bin/env bash
# Create .venv and install kafkalite: `bootstrap.sh` with its test extras (make test, lint,
# ...), `bootstrap.sh runtime` with its runtime dependencies only (make serve: no pyspark,
# selenium or test tools). Idempotent: a second run only checks that the install is current
# (a stamp of pyproject.toml's hash; the test install also satisfies the runtime one).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
profile=${1:-test}
case "$profile" in
  test) target='.[test]'; stamp=.venv/.kafkalite-installed ;;
  runtime) target='.'; stamp=.venv/.kafkalite-runtime-installed ;;
  *) echo "usage: $0 [test|runtime]" >&2; exit 2 ;;
esac
if ! command -v "$PYTHON" >/dev/null; then
  echo "kafkalite: python3 (>= 3.11) is required" >&2; exit 2
fi
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "kafkalite: Python >= 3.11 is required, found $("$PYTHON" --version)" >&2; exit 2; }
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat .venv/.kafkalite-installed 2>/dev/null)" = "$want" ]; then
  exit 0  # the test install: runtime dependencies included
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e "$target"
  echo "$want" > "$stamp"
fi
