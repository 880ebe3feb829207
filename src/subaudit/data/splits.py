"""Splits: disjoint, seeded train/aux/test rows of a Dataset, and their storage.

Splits are drawn from the raw bit stream of a PCG64 generator keyed by
:func:`subaudit.seeding.derive_seed`, which numpy keeps stable across versions and
platforms, so a seed names the same rows everywhere. A split's rows are stored with
the artifact writer (:func:`subaudit.artifacts.write_npz`), text as fixed-width
unicode, so a stored split loads without pickles.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from subaudit.artifacts import read_npz, write_npz
from subaudit.data.loaders import Dataset
from subaudit.data.sources import DataError
from subaudit.seeding import derive_seed
from subaudit.validation import ParameterError, check_count

__all__ = ["Split", "load_split", "save_split", "split"]


@dataclass(frozen=True)
class Split:
    """Disjoint int64 row indices into a Dataset: training, auxiliary and test rows."""

    train: np.ndarray
    aux: np.ndarray
    test: np.ndarray


def _permutation(n: int, seed: int) -> np.ndarray:
    """A permutation of 0..n-1 fixed by ``seed`` alone.

    It sorts raw PCG64 outputs, which numpy guarantees stable across versions and
    platforms (``Generator`` methods such as ``permutation`` carry no such promise).
    """
    keys = np.random.PCG64(seed).random_raw(n)
    return np.argsort(keys, kind="stable").astype(np.int64)


def split(ds: Dataset, *, n_train: int, n_aux: int, n_test: int, seed: int, per_class: bool) -> Split:
    """Disjoint train/aux/test row indices, deterministic in (seed, source, len(ds)).

    Rows are visited in one seeded order: train takes the first ``n_train`` (with
    ``per_class`` the first ``n_train / classes`` of every class; ``n_train`` must
    then be a multiple of ``classes``), aux the next ``n_aux`` of the rest, test the
    next ``n_test``. The order does not depend on the sizes, so enlarging ``n_test``
    keeps train and aux. Indices come in that seeded order, not sorted.
    """
    n_train = check_count(n_train, "n_train", 1)
    n_aux = check_count(n_aux, "n_aux", 0)
    n_test = check_count(n_test, "n_test", 0)
    n = len(ds)
    order = _permutation(n, derive_seed(seed, "split", ds.source or ds.family, n))
    if per_class:
        if n_train % ds.classes:
            raise ParameterError("n_train", n_train, f"a multiple of classes = {ds.classes} when per_class=True")
        each = n_train // ds.classes
        counts = np.bincount(ds.y, minlength=ds.classes)[: ds.classes]
        if each > counts.min():
            raise ParameterError(
                "n_train", n_train,
                f"at most {int(counts.min()) * ds.classes} with per_class=True (the smallest class"
                f" of {ds.source or ds.family} has {int(counts.min())} rows)",
            )  # fmt: skip
        labels = ds.y[order]
        rank = np.empty(n, dtype=np.int64)  # position of each row among its class, in seeded order
        for c in range(ds.classes):
            hits = labels == c
            rank[hits] = np.arange(int(hits.sum()))
        chosen = rank < each
        train, rest = order[chosen], order[~chosen]
    else:
        if n_train > n:
            raise ParameterError("n_train", n_train, f"at most {n} ({ds.source or ds.family} has {n} rows)")
        train, rest = order[:n_train], order[n_train:]
    if n_aux > len(rest):
        raise ParameterError("n_aux", n_aux, f"at most {len(rest)} (rows left after n_train = {n_train})")
    if n_test > len(rest) - n_aux:
        raise ParameterError(
            "n_test", n_test, f"at most {len(rest) - n_aux} (rows left after n_train = {n_train}, n_aux = {n_aux})"
        )
    return Split(train=train, aux=rest[:n_aux], test=rest[n_aux : n_aux + n_test])


_PARTS = ("train", "aux", "test")


def _storable(x: np.ndarray) -> np.ndarray:
    """Text as a fixed-width unicode array (no pickles in .npz files); others as is."""
    if x.dtype == object:
        return np.array([str(s) for s in x], dtype=str) if len(x) else np.zeros(0, dtype="<U1")
    return x


def save_split(path: str | Path, ds: Dataset, sp: Split) -> None:
    """Write the rows of one split with the artifact writer (:func:`subaudit.artifacts.write_npz`).

    Keys: ``{part}_x``, ``{part}_y``, ``{part}_idx`` for part in train/aux/test, plus
    ``source``, ``family`` and ``classes``.
    """
    arrays: dict[str, np.ndarray] = {
        "source": np.array(ds.source),
        "family": np.array(ds.family),
        "classes": np.array(ds.classes, dtype=np.int64),
    }
    for part in _PARTS:
        idx = np.asarray(getattr(sp, part), dtype=np.int64)
        arrays[f"{part}_x"] = _storable(ds.x[idx])
        arrays[f"{part}_y"] = ds.y[idx].astype(np.int64)
        arrays[f"{part}_idx"] = idx
    write_npz(path, **arrays)


def load_split(path: str | Path) -> tuple[Dataset, Dataset, Dataset]:
    """The (train, aux, test) Datasets written by :func:`save_split` (text as str objects)."""
    data = read_npz(path)
    try:
        meta = {k: data[k] for k in ("source", "family", "classes")}
    except KeyError as err:
        raise DataError(f"{path} is not a split written by save_split: no {err}") from None
    parts = {k: v for k, v in data.items() if k.split("_")[0] in _PARTS}
    family = str(meta["family"])
    out = []
    for part in _PARTS:
        x = parts[f"{part}_x"]
        if family == "text":
            x = np.array(x.tolist(), dtype=object)
        out.append(Dataset(family, x, parts[f"{part}_y"], int(meta["classes"]), str(meta["source"])))
    return out[0], out[1], out[2]
