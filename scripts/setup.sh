#!/usr/bin/env bash
# Create (or refresh) the project environment in .venv/ at the repository root.
# Idempotent: reinstalls only when pyproject.toml, constraints.txt, requirements.lock or this
# script changed (the Makefile decides that through the .venv/.installed stamp).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "subaudit needs Python >= 3.11 (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# On the platform requirements.lock was written on (its "# platform:" line): torch by version
# (its build is the machine's: CPU, or CUDA with its nvidia packages), then every other package
# from the lock in hash-checking mode (each file's sha256 pinned; scripts/lock.py rewrites it),
# then subaudit itself without dependencies. Elsewhere pip resolves the extras under
# constraints.txt (same versions, no hashes).
# uv installs (its own entry in the lock goes first, by pip with its hashes): it fetches and
# unpacks in parallel, the lock in 8 s here where pip took 76 s, a CPU torch wheel in 6 s where
# pip took 22 s (pip still picks torch's file, from the indexes it is configured with). Where uv
# cannot (no uv wheel for the platform, an index only pip knows, a CUDA torch with its nvidia
# packages), pip installs the same files.
here=$(.venv/bin/python -c 'import platform, sys; print(f"{platform.system()}-{platform.machine()}-cp{sys.version_info.major}{sys.version_info.minor}")')
if grep -qx "# platform: $here" requirements.lock; then
    uv=.venv/bin/uv
    lock_entry() {  # one package's lines of the lock: "name==version \" and its hash lines
        awk -v name="$1" '$0 ~ "^"name"==" {p = 1; print; next} p && /^    --hash/ {print; next} {p = 0}' requirements.lock
    }
    install_uv() {
        local req
        req=$(mktemp)
        lock_entry uv >"$req"
        [ -s "$req" ] && .venv/bin/python -m pip install --progress-bar off --require-hashes --no-deps -r "$req" ||
            echo "(no uv: pip installs everything)"
        rm -f "$req"
    }
    install_torch() {  # a CPU build's dependencies are all in the lock; a CUDA build brings its own
        local wheels
        wheels=$(mktemp -d)
        if [ -x "$uv" ] &&
            .venv/bin/python -m pip download --progress-bar off --no-deps -c constraints.txt -d "$wheels" torch &&
            ls "$wheels"/torch-*+cpu-*.whl >/dev/null 2>&1 &&
            "$uv" pip install --python .venv/bin/python --compile-bytecode --no-deps --no-index \
                --find-links "$wheels" -c constraints.txt torch; then
            rm -rf "$wheels"
            return 0
        fi
        rm -rf "$wheels"
        .venv/bin/python -m pip install --progress-bar off -c constraints.txt torch
    }
    install_lock() {
        if [ -x "$uv" ] && "$uv" pip install --python .venv/bin/python --require-hashes --no-deps -r requirements.lock; then
            return 0
        fi
        echo "(uv could not install the lock: pip installs it)"
        .venv/bin/python -m pip install --progress-bar off --require-hashes --no-deps -r requirements.lock
    }
    install() {
        install_uv &&
        install_torch &&
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
# torch's build (CPU or CUDA) is whatever the indexes pip is configured with offer for the pinned version
# (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu: the CPU build); say which it is.
echo "environment ready in .venv/ ($(.venv/bin/python -c 'import subaudit, torch; print("subaudit", subaudit.__version__, "with torch", torch.__version__, "(CUDA build)" if torch.version.cuda else "(CPU build)")'))"
