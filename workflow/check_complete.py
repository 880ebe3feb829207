"""Fail when an output of the workflow is missing, naming it and the command that rebuilds it.

Snakemake does not rebuild a missing file whose consumers are up to date (an intermediate
score file, an audit), so "Nothing to be done" does not mean every output is there: after a
`dvc pull` that missed one object, `dvc repro` would record the incomplete set under a new
hash.  dvc.yaml runs this after Snakemake; it reads `snakemake --summary` (every output file
of the workflow's jobs and its status) with the same options (e.g. --configfile).

    python workflow/check_complete.py [snakemake options]
"""

from __future__ import annotations

import shlex
import subprocess
import sys


def missing_outputs(options: list[str]) -> list[str]:
    """Output files that `snakemake --summary` (with ``options``) reports missing."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--summary", *options],
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"snakemake --summary failed:\n{proc.stderr[-3000:]}")
    rows = [line.split("\t") for line in proc.stdout.splitlines() if "\t" in line]
    header = rows[0]
    path, status = header.index("output_file"), header.index("status")
    return [row[path] for row in rows[1:] if row[status] == "missing"]


def main(options: list[str]) -> int:
    missing = missing_outputs(options)
    if not missing:
        return 0
    print(f"{len(missing)} output(s) of the workflow are missing, so its results are incomplete:",
          file=sys.stderr)
    for p in missing[:50]:
        print(f"  {p}", file=sys.stderr)
    if len(missing) > 50:
        print(f"  ... and {len(missing) - 50} more", file=sys.stderr)
    print("Snakemake does not rebuild a missing file whose consumers are up to date. Restore them "
          "(dvc pull, dvc checkout) or rebuild them:\n  snakemake --cores all "
          + " ".join(shlex.quote(o) for o in [*missing, *options]), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
