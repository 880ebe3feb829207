#!/usr/bin/env bash
# Create (or refresh) the project environment in .venv/ at the repository root.
# Idempotent: reinstalls only when pyproject.toml, constraints.txt or this script changed
# (the Makefile decides that through the .venv/.installed stamp).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "subaudit needs Python >= 3.10 (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
log=$(mktemp)
if ! .venv/bin/python -m pip install --progress-bar off -c constraints.txt -e ".[workflow,dev]" >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" | tail -n 40 >&2
    rm -f "$log"
    echo "setup failed: see the pip output above" >&2
    exit 1
fi
rm -f "$log"
.venv/bin/python -m pip check >/dev/null
touch .venv/.installed
echo "environment ready in .venv/ ($(.venv/bin/python -c 'import subaudit; print("subaudit", subaudit.__version__)'))"
