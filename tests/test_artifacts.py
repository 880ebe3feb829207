"""Artifact files: damaged ones (cut short, a changed byte) are refused by name, never used;
`subaudit verify` finds them and, with --remove, deletes them so the workflow recomputes them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import run_cli
from subaudit.devices import resolve_device
from subaudit.artifacts import (CorruptArtifact, read_csv, read_json, read_npz, verify, write_csv,
                         write_json, write_npz)
from subaudit.validation import ParameterError


@pytest.fixture
def shard(tmp_path):
    path = tmp_path / "runs0-16.npz"
    rng = np.random.default_rng(0)
    write_npz(path, runs=np.arange(16), bits=np.arange(16) % 2, steps=np.array([5, 10]),
              scores=rng.normal(size=(2, 16)), sigma=np.array(1.5))
    return path


def test_intact_files_round_trip(tmp_path, shard):
    assert read_npz(shard)["scores"].shape == (2, 16)
    write_json(tmp_path / "a.json", {"x": 1.5})
    assert read_json(tmp_path / "a.json") == {"x": 1.5}
    frame = pd.DataFrame({"q": [1.0, 0.25], "world": ["trained on D (z, no canary)", "D'"]})
    write_csv(tmp_path / "a.csv", frame)
    assert read_csv(tmp_path / "a.csv").equals(frame)


def test_every_truncation_of_a_score_file_is_refused(tmp_path, shard):
    raw = shard.read_bytes()
    cut = tmp_path / "cut.npz"
    for size in range(0, len(raw), 7):
        cut.write_bytes(raw[:size])
        with pytest.raises(CorruptArtifact, match="cut.npz is damaged"):
            read_npz(cut)


def test_every_changed_byte_of_a_score_file_is_refused_or_harmless(tmp_path, shard):
    """A flipped byte either is caught (CRC-32, zip structure) or lies in zip metadata that
    does not reach the arrays: what is returned is then exactly the original."""
    raw, original = shard.read_bytes(), read_npz(shard)
    bad = tmp_path / "bad.npz"
    refused = 0
    for pos in range(len(raw)):
        flipped = bytearray(raw)
        flipped[pos] ^= 0x5A
        bad.write_bytes(bytes(flipped))
        try:
            got = read_npz(bad)
        except CorruptArtifact:
            refused += 1
            continue
        assert got.keys() == original.keys()
        for key in original:
            assert np.array_equal(got[key], original[key]), (pos, key)
    assert refused > len(raw) // 2  # the rest: timestamps, names in the zip directory


def test_truncated_json_and_csv_are_refused(tmp_path):
    write_json(tmp_path / "a.json", {"target": 3, "confidence": 0.25})
    text = (tmp_path / "a.json").read_text()
    for size in range(len(text) - 2):  # the last two characters are "}\n"
        (tmp_path / "b.json").write_text(text[:size])
        with pytest.raises(CorruptArtifact, match="b.json"):
            read_json(tmp_path / "b.json")
    write_csv(tmp_path / "a.csv", pd.DataFrame({"step": [10, 20], "sigma": [1.25, 1.25]}))
    text = (tmp_path / "a.csv").read_text()
    (tmp_path / "b.csv").write_text(text[:-3])
    with pytest.raises(CorruptArtifact, match="last line is incomplete"):
        read_csv(tmp_path / "b.csv")


def test_a_missing_file_is_not_called_damaged(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_npz(tmp_path / "absent.npz")


def test_verify_finds_and_removes_damaged_artifacts(tmp_path, shard):
    (tmp_path / "sub").mkdir()
    write_json(tmp_path / "sub" / "ok.json", {"a": 1})
    cut = tmp_path / "sub" / "runs16-32.npz"
    cut.write_bytes(shard.read_bytes()[:-40])
    (tmp_path / "sub" / ".runs16-32.npz.x.tmp.npz").write_bytes(b"in progress")  # skipped
    files, bad = verify([tmp_path])
    assert len(files) == 3 and [e.path for e in bad] == [cut]

    proc = run_cli("verify", str(tmp_path), check=False)
    assert proc.returncode == 1 and str(cut) in proc.stdout
    out = json.loads(run_cli("verify", "--json", "--remove", str(tmp_path)).stdout)
    assert out["checked"] == 3 and [d["path"] for d in out["damaged"]] == [str(cut)]
    assert not cut.exists() and shard.exists()
    assert run_cli("verify", str(tmp_path)).returncode == 0


def test_resolve_device():
    import torch

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    for bad in ("tpu", "mps-ish", 3):
        with pytest.raises(ParameterError, match="device"):
            resolve_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(ParameterError, match="CUDA is not available"):
            resolve_device("cuda")
