"""The source catalogue (subaudit.data.sources): the registry of sources and families."""

from __future__ import annotations

from subaudit import data as D
from subaudit.data.loaders import LOADERS

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


def test_every_source_has_a_loader():
    assert list(LOADERS) == list(D.SOURCES)  # load() finds a source's reader in LOADERS
