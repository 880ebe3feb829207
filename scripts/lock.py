"""Write requirements.lock: every package of an environment, pinned, with the sha256 of each file
PyPI (and any local wheel directory pip is configured with) holds for that version.

    .venv/bin/python scripts/lock.py > requirements.lock

Run after changing constraints.txt or pyproject's extras, from the environment ``make setup``
built (its ``pip freeze --all``); scripts/setup.sh installs the lock in pip's hash-checking mode
on the platform it was made on. Needs PyPI (its simple JSON API).
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, canonicalize_name
from packaging.utils import parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

InvalidFilename = (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion)

# pip runs the install; subaudit is the editable checkout itself; torch's build is the machine's
# (PyTorch's CPU wheel, or PyPI's CUDA one with its nvidia packages): setup.sh installs it first
# by version from constraints.txt
SKIP = {"pip", "subaudit", "torch"}
INDEX = "https://pypi.org/simple/{}/"


def file_pin(filename: str) -> tuple[str, Version] | None:
    """(name, version) of a wheel or sdist file name; None for anything else."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except InvalidFilename:
        return None
    return name, version


def frozen() -> list[tuple[str, Version]]:
    """(name, version) of every installed distribution, local version labels kept."""
    out = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all", "--disable-pip-version-check"],
                         check=True, capture_output=True, text=True).stdout
    pins = []
    for line in out.splitlines():
        if not line.strip() or line.startswith(("-e ", "#")):
            continue
        if " @ " in line:  # name @ file:///.../name-version-....whl#sha256=...
            pin = file_pin(line.split(" @ ")[1].split("#")[0].rsplit("/", 1)[-1])
        else:
            name, version = line.split("==")
            pin = (canonicalize_name(name), Version(version))
        if pin is None:
            raise SystemExit(f"cannot read the pin {line!r}")
        if pin[0] not in SKIP:
            pins.append(pin)
    return pins


def pypi_hashes(name: str, version: Version) -> set[str]:
    req = urllib.request.Request(INDEX.format(name),
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    return {f["hashes"]["sha256"] for f in files if file_pin(f["filename"]) == (name, version)}


def local_files(dirs: list[Path]) -> dict[tuple[str, Version], list[Path]]:
    """The wheels and sdists of ``dirs`` by (name, version), read once."""
    files: dict[tuple[str, Version], list[Path]] = {}
    for f in (f for d in dirs for f in sorted(d.iterdir())):
        if (pin := file_pin(f.name)) is not None:
            files.setdefault(pin, []).append(f)
    return files


def local_dirs() -> list[Path]:
    """The wheel directories pip's configuration names (find-links, file:// indexes)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                         text=True).stdout
    dirs = []
    for value in re.findall(r"(?:find-links|index-url)='([^']+)'", out):
        for item in value.split():
            path = Path(item.removeprefix("file://"))
            dirs += [path, path.parent / "files"] if path.name == "simple" else [path]
    return [d for d in dirs if d.is_dir()]


def main() -> None:
    dirs = local_dirs()
    local = local_files(dirs)
    lines = [f"# Written by scripts/lock.py on {platform.system()} {platform.machine()}, "
             f"CPython {sys.version_info.major}.{sys.version_info.minor}: every package of the "
             "environment make setup built,",
             "# but torch, with the sha256 of each file of that version on PyPI or in pip's local wheel "
             "directories.",
             "# scripts/setup.sh installs it with pip --require-hashes on this platform.",
             f"# platform: {platform.system()}-{platform.machine()}-cp{sys.version_info.major}"
             f"{sys.version_info.minor}"]
    for name, version in sorted(frozen()):
        hashes = pypi_hashes(name, version) | {hashlib.sha256(f.read_bytes()).hexdigest()
                                               for f in local.get((name, version), [])}
        if not hashes:
            raise SystemExit(f"no file of {name}=={version} on PyPI or in {dirs}")
        lines.append(" \\\n    ".join([f"{name}=={version}", *(f"--hash=sha256:{h}" for h in sorted(hashes))]))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
