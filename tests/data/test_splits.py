"""Splits (subaudit.data.splits): seeded train/aux/test rows and their storage."""

from __future__ import annotations

import os

import numpy as np
import pytest

from subaudit import data as D
from subaudit.artifacts import CorruptArtifact, verify, write_npz
from subaudit.data import Dataset, DataError, Split
from subaudit.validation import ParameterError

# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def toy_dataset(n: int = 100, classes: int = 4, family: str = "tabular", source: str = "toy") -> Dataset:
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    if family == "text":
        x = np.array([f"row {i} \"quoted\" é" for i in range(n)], dtype=object)
    return Dataset(family, x, np.arange(n, dtype=np.int64) % classes, classes, source)


# --------------------------------------------------------------------------------------
# split()
# --------------------------------------------------------------------------------------


def test_split_disjoint_and_sized():
    ds = toy_dataset(100)
    for per_class in (False, True):
        sp = D.split(ds, n_train=40, n_aux=30, n_test=30, seed=3, per_class=per_class)
        assert isinstance(sp, Split)
        assert (len(sp.train), len(sp.aux), len(sp.test)) == (40, 30, 30)
        parts = np.concatenate([sp.train, sp.aux, sp.test])
        assert parts.dtype == np.int64 and len(np.unique(parts)) == 100 and parts.min() == 0 and parts.max() == 99


def test_split_is_deterministic_and_pinned():
    ds = toy_dataset(100)
    a = D.split(ds, n_train=8, n_aux=4, n_test=4, seed=0, per_class=True)
    b = D.split(toy_dataset(100), n_train=8, n_aux=4, n_test=4, seed=0, per_class=True)
    for part in ("train", "aux", "test"):
        np.testing.assert_array_equal(getattr(a, part), getattr(b, part))
    # the same on any machine and numpy version: raw PCG64 bits keyed by derive_seed
    assert a.train.tolist() == [11, 83, 82, 80, 20, 85, 69, 58]
    assert a.aux.tolist() == [35, 19, 28, 51] and a.test.tolist() == [67, 91, 4, 36]
    c = D.split(ds, n_train=8, n_aux=4, n_test=4, seed=0, per_class=False)
    assert c.train.tolist() == [11, 83, 82, 35, 80, 20, 85, 19]
    assert not np.array_equal(D.split(ds, n_train=8, n_aux=4, n_test=4, seed=1, per_class=False).train, c.train)
    other = D.split(toy_dataset(100, source="other"), n_train=8, n_aux=4, n_test=4, seed=0, per_class=False)
    assert not np.array_equal(other.train, c.train)  # keyed by the source name too


def test_split_is_nested_in_the_sizes():
    ds = toy_dataset(100)
    small = D.split(ds, n_train=20, n_aux=10, n_test=5, seed=9, per_class=False)
    large = D.split(ds, n_train=20, n_aux=10, n_test=50, seed=9, per_class=False)
    np.testing.assert_array_equal(small.train, large.train)
    np.testing.assert_array_equal(small.aux, large.aux)
    np.testing.assert_array_equal(small.test, large.test[:5])


def test_split_per_class_balance():
    y = np.repeat(np.arange(5), [30, 12, 50, 10, 40])  # unbalanced, sorted by class
    ds = Dataset("tabular", np.zeros((len(y), 2), np.float32), y, 5, "unbalanced")
    sp = D.split(ds, n_train=50, n_aux=20, n_test=20, seed=1, per_class=True)
    assert np.bincount(ds.y[sp.train], minlength=5).tolist() == [10] * 5
    assert len(np.intersect1d(sp.train, np.concatenate([sp.aux, sp.test]))) == 0


def test_split_too_small_names_the_size_and_the_max():
    ds = toy_dataset(100)
    cases = [
        (dict(n_train=101, n_aux=0, n_test=0, per_class=False), "n_train", "at most 100"),
        (dict(n_train=60, n_aux=41, n_test=0, per_class=False), "n_aux", "at most 40"),
        (dict(n_train=60, n_aux=30, n_test=11, per_class=False), "n_test", "at most 10"),
        (dict(n_train=104, n_aux=0, n_test=0, per_class=True), "n_train", "at most 100"),
        (dict(n_train=10, n_aux=0, n_test=0, per_class=True), "n_train", "multiple of classes = 4"),
        (dict(n_train=0, n_aux=0, n_test=0, per_class=False), "n_train", ">= 1"),
        (dict(n_train=4, n_aux=-1, n_test=0, per_class=False), "n_aux", ">= 0"),
    ]
    for kwargs, name, allowed in cases:
        with pytest.raises(ParameterError) as err:
            D.split(ds, seed=0, **kwargs)
        assert err.value.name == name and allowed in err.value.allowed, (kwargs, err.value)
    y = np.repeat(np.arange(3), [10, 3, 10])
    tiny = Dataset("tabular", np.zeros((23, 1), np.float32), y, 3)
    with pytest.raises(ParameterError, match="at most 9"):
        D.split(tiny, n_train=12, n_aux=0, n_test=0, seed=0, per_class=True)


# --------------------------------------------------------------------------------------
# save_split() / load_split()
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["tabular", "text"])
def test_save_and_load_split(tmp_path, family):
    ds = toy_dataset(40, family=family)
    sp = D.split(ds, n_train=8, n_aux=0, n_test=12, seed=5, per_class=True)
    path = tmp_path / "splits" / "toy.npz"
    old = os.umask(0o022)
    try:
        D.save_split(path, ds, sp)
    finally:
        os.umask(old)
    assert sorted(p.name for p in path.parent.iterdir()) == ["toy.npz"]  # atomic: no temporary left
    assert path.stat().st_mode & 0o777 == 0o644          # readable by others on a shared disk
    assert verify([path.parent]) == ([path], [], [])      # the artifact writer's digest
    with np.load(path, allow_pickle=False) as raw:  # loadable without pickles
        assert raw["train_x"].dtype.kind == ("U" if family == "text" else "f")
        np.testing.assert_array_equal(raw["test_idx"], sp.test)
    train, aux, test = D.load_split(path)
    for got, idx in ((train, sp.train), (aux, sp.aux), (test, sp.test)):
        assert got.family == family and got.classes == 4 and got.source == "toy"
        assert got.x.dtype == ds.x.dtype and got.y.dtype == np.int64
        assert got.x.tolist() == ds.x[idx].tolist() and got.y.tolist() == ds.y[idx].tolist()
    assert len(aux) == 0


def test_load_split_rejects_other_files(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.zeros(2))
    with pytest.raises(CorruptArtifact, match="no stored digest"):
        D.load_split(tmp_path / "plain.npz")
    write_npz(tmp_path / "other.npz", a=np.zeros(2))
    with pytest.raises(DataError, match="save_split"):
        D.load_split(tmp_path / "other.npz")
