"""Make the versioned outputs exactly what the configuration owns: move away the files no job
of it writes, and fail naming any output that is missing with the command that rebuilds it.

Snakemake neither removes the outputs of a setting the configuration no longer has (a changed
``s1.target_epsilons`` leaves the old setting's files beside the new ones) nor rebuilds a
missing file whose consumers are up to date (an intermediate score file, an audit), so neither
"Nothing to be done" nor a finished run means the folders DVC versions hold what the
configuration produces, and ``dvc repro`` records whatever they hold.  This script runs after
Snakemake, in ``make run`` and in the DVC stage, before DVC records anything.  It reads
``snakemake --summary`` (every output file of the workflow's jobs and its status) with the same
options (e.g. ``--configfile``) and the folders and files DVC versions (``dvc.yaml``'s outs and
metrics).  The files there that no job writes are moved, not deleted, to
``stale/<time>/<their path>`` (a reverted setting's outputs come back from DVC's cache with
``dvc checkout``, or from there by hand); hidden files (a running writer's temporaries, which
``.dvcignore`` keeps out of DVC) are left alone.

    python workflow/check_complete.py [snakemake options, never targets]
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

#: Where the files no job of the configuration writes go, under a folder named for the time.
STALE = Path("stale")


def summary(options: list[str]) -> dict[str, str]:
    """Every output file of the workflow's jobs, with its status, from `snakemake --summary`."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--summary", *options],
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"snakemake --summary failed:\n{proc.stderr[-3000:]}")
    rows = [line.split("\t") for line in proc.stdout.splitlines() if "\t" in line]
    header = rows[0]
    path, status = header.index("output_file"), header.index("status")
    return {os.path.normpath(row[path]): row[status] for row in rows[1:]}


def versioned(dvc_yaml: Path = Path("dvc.yaml")) -> list[Path]:
    """The folders and files the DVC stages version (their outs and metrics); none without DVC."""
    if not dvc_yaml.is_file():
        return []
    stages = (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {})
    entries = [e for stage in stages.values() for key in ("outs", "metrics") for e in stage.get(key, [])]
    return [Path(next(iter(e)) if isinstance(e, dict) else e) for e in entries]


def stale_files(roots: list[Path], owned: set[str]) -> list[Path]:
    """Files under ``roots`` that are not in ``owned``, hidden ones (and hidden folders) left out."""
    found = [f for root in roots for f in ([root] if root.is_file() else sorted(root.rglob("*")))]
    return [f for f in found if f.is_file() and not any(part.startswith(".") for part in f.parts)
            and os.path.normpath(f) not in owned]


def move_away(files: list[Path], roots: list[Path]) -> Path:
    """Move ``files`` to ``stale/<time>/`` (same path below it), then remove the folders under
    ``roots`` they leave empty; returns that folder."""
    into = STALE / time.strftime("%Y%m%dT%H%M%S")
    for f in files:
        dest = into / f
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(f, dest)          # a copy where stale/ is on another file system
    for folder in sorted({p for f in files for p in f.parents}, key=lambda p: -len(p.parts)):
        if any(folder != root and root in folder.parents for root in roots) and not any(folder.iterdir()):
            folder.rmdir()
    return into


def listing(paths: list[str], limit: int = 50) -> str:
    lines = [f"  {p}" for p in paths[:limit]]
    if len(paths) > limit:
        lines.append(f"  ... and {len(paths) - limit} more")
    return "\n".join(lines)


def main(options: list[str]) -> int:
    # Targets would narrow what the configuration owns to their jobs, and move the rest away.
    targets = [o for o in options if o == "--" or o.startswith(("results/", "data/"))]
    if targets:
        print(f"workflow/check_complete.py checks the whole configuration: give it Snakemake's options "
              f"(--configfile, --profile), not targets ({' '.join(targets)})", file=sys.stderr)
        return 2
    outputs = summary(options)
    roots = versioned()
    stale = stale_files(roots, set(outputs))
    if stale:
        into = move_away(stale, roots)
        print(f"{len(stale)} file(s) under what DVC versions are outputs of no job of this "
              f"configuration (a setting it no longer has); moved to {into}/ so that DVC does not "
              f"record them:\n{listing([str(f) for f in stale])}", file=sys.stderr)
    missing = sorted(p for p, status in outputs.items() if status == "missing")
    if not missing:
        return 0
    print(f"{len(missing)} output(s) of the workflow are missing, so its results are incomplete:\n"
          f"{listing(missing)}", file=sys.stderr)
    print("Snakemake does not rebuild a missing file whose consumers are up to date. Restore them "
          "(dvc pull, dvc checkout) or rebuild them:\n  snakemake --cores all "
          + " ".join(shlex.quote(o) for o in [*missing, *options]), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
