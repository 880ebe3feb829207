"""Atomic file output: every artifact appears whole or not at all.

Each writer writes to a temporary file in the destination's directory and renames
it into place (os.replace is atomic on POSIX), so a killed job never leaves a
half-written file that a later step could take for complete.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp" + dest.suffix, dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results are for sharing
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_text(path: str | Path, writer: Callable[[IO[str]], None]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w") as fh:
        writer(fh)
        fh.flush()
        os.fsync(fh.fileno())


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats (NaN, +-inf) replaced by None, recursively.

    Strict JSON has no NaN or Infinity; None (null) means "not a finite number".
    """
    if isinstance(value, float | np.floating):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    return value


def dumps(data: Mapping[str, Any], indent: int | None = None) -> str:
    """Strict JSON text of ``data`` (sorted keys; non-finite floats as null)."""
    return json.dumps(json_safe(data), indent=indent, sort_keys=True, allow_nan=False)


def write_json(path: str | Path, data: Mapping[str, Any]) -> None:
    """Write a strict JSON object (sorted keys, trailing newline) atomically."""
    _write_text(path, lambda fh: fh.write(dumps(data, indent=2) + "\n"))


def read_json(path: str | Path) -> dict[str, Any]:
    """Read a JSON object."""
    return json.loads(Path(path).read_text())


def write_csv(path: str | Path, frame: pd.DataFrame) -> None:
    """Write a tidy CSV (no index) atomically, with full float precision."""
    _write_text(path, lambda fh: frame.to_csv(fh, index=False, float_format="%.10g"))


def write_npz(path: str | Path, **arrays: np.ndarray) -> None:
    """Write a compressed .npz atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Read every array of an .npz into memory."""
    with np.load(path) as data:
        return {k: data[k] for k in data.files}
