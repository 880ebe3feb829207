"""Two runs' numbers side by side: every figure CSV and ``report.json`` of a run against a
reference (``subaudit compare``).

A file is **bitwise equal** where its bytes are.  Each value falls in one of three classes:
**identical** (the same text as stored: the CSVs hold 10 significant digits, ``report.json``
every digit of the float64), **printed** (different, but the same at the precision the report and the figures
print numbers, :data:`PRINTED`), or **different** (by how much: absolute and relative
difference).  A list of numbers (``a;b;c``, the repeats' bounds) is as its worst element.  Text that is not
a number is identical or different.  Every claim verdict that
changed is listed on its own.  A run agrees with its reference when nothing is different
beyond the printed precision, no verdict changed and both hold the same files, columns and
rows.

A reference is a results folder (``results/``, or a folder holding ``figures/*.csv`` and
``report.json``, such as the default's own reference kept in git, ``reference/``), or a git
revision: its ``reference/`` where that revision has one, else its ``results/`` restored by
DVC (:func:`restore_with_dvc`).

May import: the base modules; pandas and DVC (a revision without ``reference/``) where used.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from subaudit.validation import ParameterError

__all__ = ["PRINTED", "REFERENCE", "Cell", "Comparison", "FileComparison", "compare", "compare_folders",
           "format_comparison", "reference_folder", "restore_with_dvc", "results_folder"]

PRINTED = ".3g"
"""The format the report and the figures print a number in (three significant digits)."""

REFERENCE = "reference"
"""The folder, in the repository, that holds the default run's reference results."""

IDENTICAL, PRINTED_EQUAL, DIFFERENT = "identical", "printed", "different"


@dataclass(frozen=True)
class Cell:
    """One value that is not identical in the run and the reference."""

    file: str
    row: str
    column: str
    run: str
    reference: str
    status: str                       # PRINTED_EQUAL or DIFFERENT
    abs_diff: float | None = None     # numbers only
    rel_diff: float | None = None     # |run - reference| / |reference| (None where reference is 0)


@dataclass
class FileComparison:
    """One file's values: how many in each class, the structure's differences and the cells
    that are not identical."""

    name: str
    same_bytes: bool = False
    counts: dict[str, int] = field(default_factory=lambda: {IDENTICAL: 0, PRINTED_EQUAL: 0, DIFFERENT: 0})
    structure: list[str] = field(default_factory=list)
    cells: list[Cell] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return not self.structure and self.counts[DIFFERENT] == 0

    @property
    def largest(self) -> Cell | None:
        """The numeric cell with the largest relative (else absolute) difference."""
        numeric = [c for c in self.cells if c.abs_diff is not None]
        return max(numeric, key=lambda c: (c.rel_diff if c.rel_diff is not None else math.inf, c.abs_diff),
                   default=None)


@dataclass
class Comparison:
    """Every file of a run against its reference, and the verdicts that changed."""

    files: list[FileComparison]
    verdicts: list[Cell]

    @property
    def agrees(self) -> bool:
        """Nothing moved beyond the printed precision: exit status 0 of ``subaudit compare``."""
        return all(f.agrees for f in self.files) and not self.verdicts

    def as_dict(self) -> dict[str, Any]:
        return {"agrees": self.agrees,
                "files": [{"name": f.name, "same_bytes": f.same_bytes, "agrees": f.agrees, "counts": f.counts,
                           "structure": f.structure,
                           "cells": [vars(c) for c in f.cells]} for f in self.files],
                "verdicts": [vars(c) for c in self.verdicts]}


def results_folder(path: Path) -> Path:
    """The results folder of ``path``: a run's working directory (its ``results/``) or a folder
    holding ``report.json`` or ``figures/`` itself."""
    path = Path(path)
    for candidate in (path / "results", path):
        if (candidate / "report.json").is_file() or (candidate / "figures").is_dir():
            return candidate
    raise FileNotFoundError(2, "no results here (neither report.json nor figures/, nor results/ holding them)",
                            str(path))


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def reference_folder(reference: str, repo: Path, scratch: Path) -> Path:
    """The results folder a reference names: a folder, or a git revision of ``repo`` (its
    ``reference/`` extracted into ``scratch``, else its results restored by DVC)."""
    if Path(reference).is_dir():
        return results_folder(Path(reference))
    if _git(repo, "rev-parse", "--verify", "--quiet", f"{reference}^{{commit}}").returncode != 0:
        raise ParameterError("reference", reference, f"a results folder, or a git revision of {repo}")
    if _git(repo, "cat-file", "-e", f"{reference}:{REFERENCE}/report.json").returncode == 0:
        archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", reference, REFERENCE],
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive.stdout, check=True)
        return scratch / REFERENCE
    return restore_with_dvc(repo, reference, scratch)


def restore_with_dvc(repo: Path, rev: str, into: Path) -> Path:
    """``results/report.json`` and the figure CSVs that ``dvc.lock`` records at ``rev``, from
    the DVC cache or remote of ``repo``, into ``into/results``."""
    from dvc.api import DVCFileSystem

    fs = DVCFileSystem(str(repo), rev=rev)
    out = into / "results"
    (out / "figures").mkdir(parents=True, exist_ok=True)
    fs.get_file("results/report.json", str(out / "report.json"))
    for name in fs.ls("results/figures", detail=False):
        if name.endswith(".csv"):
            fs.get_file(name, str(out / "figures" / Path(name).name))
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _classify(run: str, ref: str) -> tuple[str, float | None, float | None]:
    if run == ref:
        return IDENTICAL, None, None
    if ";" in run and run.count(";") == ref.count(";"):        # a list of numbers (the repeats' bounds)
        parts = [_classify(a, b) for a, b in zip(run.split(";"), ref.split(";"))]
        worst = max(parts, key=lambda p: ([IDENTICAL, PRINTED_EQUAL, DIFFERENT].index(p[0]), p[1] or 0.0))
        return worst
    a, b = _number(run), _number(ref)
    if a is None or b is None:
        return DIFFERENT, None, None
    if format(a, PRINTED) == format(b, PRINTED):
        status = PRINTED_EQUAL
    else:
        status = DIFFERENT
    if not (math.isfinite(a) and math.isfinite(b)):
        return status, math.inf, None
    diff = abs(a - b)
    return status, diff, (diff / abs(b) if b != 0 else None)


def _tally(fc: FileComparison, row: str, column: str, run: str, ref: str) -> None:
    status, abs_diff, rel_diff = _classify(run, ref)
    fc.counts[status] += 1
    if status != IDENTICAL:
        fc.cells.append(Cell(fc.name, row, column, run, ref, status, abs_diff, rel_diff))


def compare_tables(name: str, run: Any, ref: Any) -> FileComparison:
    """Two tables (pandas DataFrames of strings) cell by cell, rows in order."""
    fc = FileComparison(name)
    for label, cols in (("columns only in the run", [c for c in run.columns if c not in ref.columns]),
                        ("columns only in the reference", [c for c in ref.columns if c not in run.columns])):
        if cols:
            fc.structure.append(f"{label}: {', '.join(map(str, cols))}")
    if len(run) != len(ref):
        fc.structure.append(f"{len(run)} rows in the run, {len(ref)} in the reference")
    common = [c for c in ref.columns if c in run.columns]
    for i in range(min(len(run), len(ref))):
        r, f = run.iloc[i], ref.iloc[i]
        keys = [f"{c}={f[c]}" for c in common if _number(f[c]) is None and f[c] != ""][:3]
        row = f"row {i + 1}" + (f" ({', '.join(keys)})" if keys else "")
        for c in common:
            _tally(fc, row, str(c), r[c], f[c])
    return fc


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, json.dumps(value)


def compare_json(name: str, run: Any, ref: Any) -> tuple[FileComparison, list[Cell]]:
    """Two JSON documents leaf by leaf; the changed leaves whose key names a verdict apart."""
    fc = FileComparison(name)
    a, b = dict(_leaves(run)), dict(_leaves(ref))
    for label, keys in (("keys only in the run", [k for k in a if k not in b]),
                        ("keys only in the reference", [k for k in b if k not in a])):
        if keys:
            fc.structure.append(f"{label}: {', '.join(keys)}")
    verdicts = []
    for key in (k for k in b if k in a):
        _tally(fc, "", key, a[key], b[key])
        if "verdict" in key.rsplit(".", 1)[-1] and a[key] != b[key]:
            verdicts.append(Cell(name, "", key, a[key], b[key], DIFFERENT))
    return fc, verdicts


def compare_folders(run: Path, ref: Path) -> Comparison:
    """Every figure CSV and ``report.json`` of two results folders."""
    import pandas as pd

    files, verdicts = [], []
    names = sorted({p.name for folder in (run, ref) for p in (folder / "figures").glob("*.csv")})
    for name in names:
        a, b = run / "figures" / name, ref / "figures" / name
        if not (a.is_file() and b.is_file()):
            fc = FileComparison(f"figures/{name}")
            fc.structure.append("only in the " + ("run" if a.is_file() else "reference"))
            files.append(fc)
            continue
        read = dict(dtype=str, keep_default_na=False)
        files.append(compare_tables(f"figures/{name}", pd.read_csv(a, **read), pd.read_csv(b, **read)))
        files[-1].same_bytes = a.read_bytes() == b.read_bytes()
    a, b = run / "report.json", ref / "report.json"
    if a.is_file() and b.is_file():
        fc, verdicts = compare_json("report.json", json.loads(a.read_text()), json.loads(b.read_text()))
        fc.same_bytes = a.read_bytes() == b.read_bytes()
        files.append(fc)
    elif a.is_file() or b.is_file():
        fc = FileComparison("report.json")
        fc.structure.append("only in the " + ("run" if a.is_file() else "reference"))
        files.append(fc)
    return Comparison(files, verdicts)


def compare(run: str | Path, reference: str, repo: str | Path = ".") -> Comparison:
    """A run (a folder) against a reference (a folder or a git revision of ``repo``)."""
    with tempfile.TemporaryDirectory(prefix="subaudit-compare-") as scratch:
        return compare_folders(results_folder(Path(run)), reference_folder(reference, Path(repo), Path(scratch)))


def _where(cell: Cell) -> str:
    return f"{cell.column} in {cell.row}" if cell.row else cell.column


def _value(cell: Cell) -> str:
    diff = "" if cell.abs_diff is None else f"  (|diff| {cell.abs_diff:.3g}" + (
        f", {cell.rel_diff:.2g} relative)" if cell.rel_diff is not None else ")")
    return f"{cell.run} vs {cell.reference}{diff}"


def format_comparison(c: Comparison, limit: int = 10) -> str:
    """The comparison for a reader: a line per file, then the cells that differ beyond the
    printed precision (at most ``limit`` a file) and every changed verdict."""
    if limit < 0:
        raise ParameterError("limit", limit, "a count >= 0")
    lines = [f"{'file':<26}{'bytes':>7}{'identical':>10}{'printed':>9}{'different':>10}  largest difference"]
    for f in c.files:
        big = f.largest
        note = "; ".join(f.structure) or ("" if big is None else
                                           f"{_where(big)}: {_value(big)}")
        lines.append(f"{f.name:<26}{'equal' if f.same_bytes else 'differ':>7}{f.counts[IDENTICAL]:>10}"
                     f"{f.counts[PRINTED_EQUAL]:>9}{f.counts[DIFFERENT]:>10}  {note}")
    for f in c.files:
        beyond = [cell for cell in f.cells if cell.status == DIFFERENT]
        if beyond:
            lines.append(f"\n{f.name}: {len(beyond)} values differ beyond the printed precision ({PRINTED})")
            lines += [f"  {_where(cell)}: {_value(cell)}" for cell in beyond[:limit]]
            if len(beyond) > limit:
                lines.append(f"  ... and {len(beyond) - limit} more (--json lists all)")
    if c.verdicts:
        lines.append("\nverdicts that changed:")
        lines += [f"  {_where(v)}: {v.run} (reference {v.reference})" for v in c.verdicts]
    lines.append("\n" + ("agrees: nothing moved beyond the printed precision" if c.agrees else
                         "DIFFERS: values moved beyond the printed precision, or a verdict or the files changed"))
    return "\n".join(lines)
