"""The source catalogue (subaudit.data.sources): the registry of sources and families."""

from __future__ import annotations

from subaudit import data as D
from subaudit.data.loaders import LOADERS
from subaudit.data.standins import GENERATORS

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
        if src.kind == "deb":  # a Debian package: mirrors' pool URLs of one pinned .deb
            assert src.filename.endswith(".deb") and src.algorithm == "sha256" and src.checksum is not None
            assert all(u.startswith(("https://", "http://")) and u.endswith("/" + src.filename) for u in src.locations)
            assert "apt-get download" in src.how_to_fetch
        if src.kind == "synthetic":  # written by a generator of standins, verified like a download
            assert src.locations[0] in GENERATORS and src.checksum is not None
    # every pinned digest is a sha256 (CIFAR-10's md5 from its authors was the last md5 pin);
    # Keras pins this sha256 for the same URL (keras/datasets/cifar10.py)
    assert all(s.algorithm == "sha256" for s in D.SOURCES.values() if s.checksum is not None)
    assert D.SOURCES["cifar10"].checksum == "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
    assert D.SOURCES["purchase100"].checksum is None


def test_every_source_has_a_loader():
    assert list(LOADERS) == list(D.SOURCES)  # load() finds a source's reader in LOADERS


def test_fashion_mnist_is_a_pinned_debian_package():
    src = D.SOURCES["fashion-mnist"]
    assert (src.family, src.kind, src.classes) == ("image", "deb", 10)
    assert src.checksum == "39e172fe32dd318ebb3e512220c3beea2fa47d7e20bab348fb4e0922d6beefc0"
    assert src.filename == "dataset-fashion-mnist_0.0~git20200523.55506a9-1_all.deb"
    pool = "deb.debian.org/debian/pool/main/d/dataset-fashion-mnist/" + src.filename
    assert src.locations == (f"https://{pool}", f"http://{pool}")
    assert [m.rsplit("/", 1)[1] for m in src.members] == [
        "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
    ]  # fmt: skip
    assert all(m.startswith("usr/share/datasets/fashion-mnist/") for m in src.members)
    assert "MIT" in src.licence and "Expat" in src.licence and "Zalando" in src.licence
    assert "apt-get download dataset-fashion-mnist=0.0~git20200523.55506a9-1" in src.how_to_fetch
    assert "fashion-mnist" not in {*D.OFFLINE.values(), *D.PAPER.values()}  # existing results unchanged
