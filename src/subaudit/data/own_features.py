"""A user's own data: a features file, audited like the packaged sources.

An experiment with ``source: own-features`` names an ``.npz`` file (``features_file``)
holding ``x`` (n, d) finite floats and ``y`` (n,) integer labels 0..K-1, and optionally
``aux_x``/``aux_y`` (candidate records for S5) and ``test_x``/``test_y`` (for Fig A1's
utility runs), and gives the file's sha256 (``checksum``), which names the data its
results came from.  The training records are drawn from ``x``/``y`` by the seeded
:func:`subaudit.data.split` (``n_train``, ``per_class``); auxiliary and test records
come from the file where it has them, else from the rest of ``x``/``y`` (``n_aux``,
``n_test``).  The features are used as they are (``backbone: none``).

:func:`check` runs while the workflow parses, so a missing, damaged, malformed or
mismatched file stops the run before any job, naming the key.
"""

from __future__ import annotations

import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from subaudit.data.acquisition import file_digest
from subaudit.data.loaders import Dataset
from subaudit.data.splits import split
from subaudit.validation import ParameterError

__all__ = ["NAME", "check", "features", "layer_ends", "read"]

#: The source name that selects a user's features file in params.yaml.
NAME = "own-features"

_PARTS = ("aux", "test")


@lru_cache(maxsize=8)
def _read(path: str, size: int, mtime_ns: int, checksum: str) -> dict[str, np.ndarray]:
    """The verified arrays of a file (cached by path, size and mtime within one process)."""
    file = Path(path)
    digest = file_digest(file)
    if digest != checksum.lower():
        raise ParameterError("checksum", checksum,
                             f"the sha256 of {path}, which is {digest} (is it the file you meant?)")
    try:
        with np.load(file, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise ParameterError("features_file", path, f"an .npz file numpy can read ({err})") from None
    return arrays


def read(path: str | Path, checksum: str) -> dict[str, np.ndarray]:
    """The arrays of a user's features file, verified against ``checksum`` and checked.

    Raises :class:`ParameterError` naming ``features_file`` (missing, unreadable or
    malformed file) or ``checksum`` (another file's digest).
    """
    file = Path(path)
    if not file.is_file():
        raise ParameterError("features_file", str(path), "an existing .npz file")
    stat = file.stat()
    arrays = _read(str(file.resolve()), stat.st_size, stat.st_mtime_ns, str(checksum))
    _check_arrays(arrays, str(path))
    return arrays


def _check_arrays(arrays: dict[str, np.ndarray], path: str) -> None:
    def bad(allowed: str) -> ParameterError:
        return ParameterError("features_file", path, allowed)

    if "x" not in arrays or "y" not in arrays:
        raise bad(f"an .npz with arrays x (n, d) and y (n,); it has {', '.join(sorted(arrays))}")
    unknown = sorted(set(arrays) - {"x", "y"} - {f"{p}_{v}" for p in _PARTS for v in "xy"})
    if unknown:
        raise bad(f"arrays x, y and optionally aux_x, aux_y, test_x, test_y; not {', '.join(unknown)}")
    d = None
    for part in ("", *(f"{p}_" for p in _PARTS)):
        if f"{part}x" not in arrays and f"{part}y" not in arrays:
            continue
        if (f"{part}x" in arrays) != (f"{part}y" in arrays):
            raise bad(f"{part}x and {part}y together")
        x, y = arrays[f"{part}x"], arrays[f"{part}y"]
        if x.ndim != 2 or x.dtype.kind not in "fiu" or not np.isfinite(x).all():
            raise bad(f"{part}x a 2-D array of finite numbers (got {x.dtype} {x.shape})")
        if y.shape != (x.shape[0],) or y.dtype.kind not in "iu" or (y.size and y.min() < 0):
            raise bad(f"{part}y integer labels >= 0, one per row of {part}x (got {y.dtype} {y.shape})")
        if d is not None and x.shape[1] != d:
            raise bad(f"{part}x with the {d} columns of x (got {x.shape[1]})")
        d = x.shape[1]
    if arrays["x"].shape[0] < 2:
        raise bad("at least 2 records in x")
    if len(np.unique(arrays["y"])) < 2:
        raise bad("labels y of at least 2 classes")


def _classes(arrays: dict[str, np.ndarray]) -> int:
    """The classes of a features file's labels (the largest label of any part, plus one)."""
    return int(max(int(arrays[k].max()) for k in arrays if k.endswith("y") and arrays[k].size)) + 1


def layer_ends(path: str | Path) -> tuple[int, int]:
    """The columns of a features file's ``x`` and its classes, for a model's layer sizes, read
    cheaply: ``x``'s header only and the labels, unverified (a training job's resources, which
    every cluster job's workflow computes; the job itself reads the file through :func:`read`)."""
    with zipfile.ZipFile(path) as zf, zf.open("x.npy") as fh:
        version = np.lib.format.read_magic(fh)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape = header(fh)[0]
    with np.load(path, allow_pickle=False) as data:
        labels = {k: data[k] for k in data.files if k.endswith("y")}
    return int(shape[1]), _classes(labels)


def _split(arrays: dict[str, np.ndarray], n_train: int, n_aux: int, n_test: int,
           per_class: bool, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(x, y) of train, aux and test; the parts the file has are taken from it."""
    classes = _classes(arrays)
    ds = Dataset("tabular", arrays["x"].astype(np.float32), arrays["y"].astype(np.int64),
                 classes, NAME)
    from_file = {p for p in _PARTS if f"{p}_x" in arrays}
    sp = split(ds, n_train=n_train, n_aux=0 if "aux" in from_file else n_aux,
               n_test=0 if "test" in from_file else n_test, seed=seed, per_class=per_class)
    out = {"train": (ds.x[sp.train], ds.y[sp.train])}
    for part in _PARTS:
        if part in from_file:
            out[part] = (arrays[f"{part}_x"].astype(np.float32), arrays[f"{part}_y"].astype(np.int64))
        else:
            idx = getattr(sp, part)
            out[part] = (ds.x[idx], ds.y[idx])
    return out


def check(path: str | Path, checksum: str, *, n_train: int, n_aux: int, n_test: int,
          per_class: bool) -> None:
    """Everything :func:`features` would refuse, without writing anything."""
    arrays = read(path, checksum)
    _split(arrays, n_train, n_aux, n_test, per_class, seed=0)  # sizes only: any seed


def features(path: str | Path, checksum: str, *, n_train: int, n_aux: int, n_test: int,
             per_class: bool, seed: int) -> dict[str, Any]:
    """The arrays of a features artifact (``{part}_x``, ``{part}_y``, ``classes``, ``backbone``)."""
    arrays = read(path, checksum)
    parts = _split(arrays, n_train, n_aux, n_test, per_class, seed)
    out: dict[str, Any] = {"classes": np.array(_classes(arrays)), "backbone": np.array("none")}
    for part, (x, y) in parts.items():
        out[f"{part}_x"], out[f"{part}_y"] = x, y
    return out
