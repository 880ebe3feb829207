#!/usr/bin/env bash
# Create (or refresh) the project environment in .venv/ at the repository root.
# Idempotent: reinstalls only when pyproject.toml, constraints.txt, requirements.lock or this
# script changed (the Makefile decides that through the .venv/.installed stamp).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "subaudit needs Python >= 3.10 (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# On the platform requirements.lock was written on (its "# platform:" line): torch by version
# (its build is the machine's: CPU, or CUDA with its nvidia packages), then every other package
# from the lock in hash-checking mode (each file's sha256 pinned; scripts/lock.py rewrites it),
# then subaudit itself without dependencies. Elsewhere pip resolves the extras under
# constraints.txt (same versions, no hashes).
# The lock goes through uv (its own entry in the lock, installed first by pip with its hashes):
# it fetches and unpacks in parallel, 8 s here where pip took 76 s for the same files; where
# uv cannot (no uv wheel, an index only pip is configured for), pip installs the same lock.
here=$(.venv/bin/python -c 'import platform, sys; print(f"{platform.system()}-{platform.machine()}-cp{sys.version_info.major}{sys.version_info.minor}")')
if grep -qx "# platform: $here" requirements.lock; then
    lock_entry() {  # one package's lines of the lock: "name==version \" and its hash lines
        awk -v name="$1" '$0 ~ "^"name"==" {p = 1; print; next} p && /^    --hash/ {print; next} {p = 0}' requirements.lock
    }
    install_lock() {
        local uv_req
        uv_req=$(mktemp)
        lock_entry uv >"$uv_req"
        if [ -s "$uv_req" ] &&
            .venv/bin/python -m pip install --progress-bar off --require-hashes --no-deps -r "$uv_req" &&
            .venv/bin/uv pip install --python .venv/bin/python --require-hashes --no-deps -r requirements.lock; then
            rm -f "$uv_req"
            return 0
        fi
        rm -f "$uv_req"
        echo "(uv could not install the lock: pip installs it)"
        .venv/bin/python -m pip install --progress-bar off --require-hashes --no-deps -r requirements.lock
    }
    install() {
        .venv/bin/python -m pip install --progress-bar off -c constraints.txt torch &&
        install_lock &&
        .venv/bin/python -m pip install --progress-bar off --no-deps --no-build-isolation -e .
    }
else
    echo "requirements.lock is for $(sed -n 's/^# platform: //p' requirements.lock), this is $here: installing under constraints.txt without hashes" >&2
    install() { .venv/bin/python -m pip install --progress-bar off -c constraints.txt -e ".[workflow,dev]"; }
fi
log=$(mktemp)
if ! install >"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" | tail -n 40 >&2
    rm -f "$log"
    echo "setup failed: see the pip output above" >&2
    exit 1
fi
rm -f "$log"
if ! out=$(.venv/bin/python -m pip check); then
    echo "$out" >&2
    echo "setup failed: the environment's requirements do not hold (pip check, above)" >&2
    exit 1
fi
touch .venv/.installed
echo "environment ready in .venv/ ($(.venv/bin/python -c 'import subaudit; print("subaudit", subaudit.__version__)'))"
