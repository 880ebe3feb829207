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


def test_verify_removes_damaged_outputs_of_the_workflow_and_nothing_else(tmp_path, shard):
    """--remove deletes a damaged file only below the workflow's output folders of --workdir
    and only if subaudit wrote it; a user's files (an np.savez .npz, a CSV without a final
    newline, a JSON list), in data/ or anywhere, are reported and kept; the command that
    rebuilds what was removed is printed."""
    sub = tmp_path / "results" / "natural" / "sub"
    sub.mkdir(parents=True)
    write_json(sub / "ok.json", {"a": 1})
    cut = sub / "runs16-32.npz"
    cut.write_bytes(shard.read_bytes()[:-40])
    (sub / ".runs16-32.npz.vm-1.abcd1234.tmp.npz").write_bytes(b"in progress")  # skipped (young, other host)
    mine = tmp_path / "data" / "mine.npz"
    mine.parent.mkdir()
    np.savez(mine, x=np.arange(3))                              # a user's features file
    (tmp_path / "data" / "notes.csv").write_text("a,b\n1,2")     # no final newline
    (tmp_path / "data" / "list.json").write_text("[1, 2]")
    foreign = sub / "theirs.npz"
    np.savez(foreign, x=np.arange(3))                           # not subaudit's, in results/
    files, bad, stale = verify([tmp_path / "results", tmp_path / "data"])
    assert len(files) == 6 and stale == []
    assert sorted(e.path.name for e in bad) == ["list.json", "mine.npz", "notes.csv", "runs16-32.npz", "theirs.npz"]

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        proc = run_cli("verify", "results", "data", check=False)
        assert proc.returncode == 1 and "damaged: results/natural/sub/runs16-32.npz" in proc.stdout
        assert "damaged, kept: data/mine.npz" in proc.stdout
        proc = run_cli("verify", "--json", "--remove", "results", "data", check=False)
    out = json.loads(proc.stdout)
    assert proc.returncode == 1                                 # user files are still damaged
    assert out["removed"] == [str("results/natural/sub/runs16-32.npz")]
    assert out["rebuild"] == "snakemake --cores all results/natural/sub/runs16-32.npz"
    assert not cut.exists() and shard.exists()
    assert mine.exists() and foreign.exists() and (tmp_path / "data" / "notes.csv").exists()
    assert (tmp_path / "data" / "list.json").exists()
    assert {d["path"]: d["workflow_output"] for d in out["damaged"]} == {
        "data/list.json": False, "data/mine.npz": False, "data/notes.csv": False,
        "results/natural/sub/runs16-32.npz": True, "results/natural/sub/theirs.npz": False}
    # outside --workdir's output folders nothing is removed, whatever the file
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.npz").write_bytes(shard.read_bytes()[:-40])
    proc = run_cli("verify", "--remove", str(elsewhere), "--workdir", str(tmp_path), check=False)
    assert proc.returncode == 1 and (elsewhere / "x.npz").exists() and "damaged, kept" in proc.stdout
    text = run_cli("verify", "--remove", str(tmp_path / "results"), "--workdir", str(tmp_path), check=False).stdout
    assert "theirs.npz (no stored digest (not written by subaudit); not written by subaudit" in text


def test_a_killed_writers_temporary_file_goes_at_the_next_write_and_is_never_versioned(tmp_path, repo_root):
    """A temporary file of a writer that is gone (this host, a dead process id; or older than
    an hour) is removed by the next write of its destination and reported by verify; a live
    writer's is left alone; .dvcignore keeps every temporary file out of DVC."""
    import os
    import socket
    import subprocess
    import time

    gone = subprocess.Popen(["true"])
    gone.wait()
    host = socket.gethostname()
    dead = tmp_path / f".a.npz.{host}-{gone.pid}.abcd1234.tmp.npz"
    live = tmp_path / f".a.npz.{host}-{os.getpid()}.abcd1235.tmp.npz"
    elsewhere = tmp_path / ".a.npz.node7-1.abcd1236.tmp.npz"
    old = tmp_path / ".a.npz.node7-2.abcd1237.tmp.npz"
    for f in (dead, live, elsewhere, old):
        f.write_bytes(b"")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert verify([tmp_path])[2] == sorted([dead, old])
    write_npz(tmp_path / "a.npz", x=np.arange(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.npz", live.name, elsewhere.name])
    import pathspec

    spec = pathspec.PathSpec.from_lines("gitignore", (repo_root / ".dvcignore").read_text().splitlines())
    for name in (dead.name, live.name, ".x.csv.vm-3.abcdefgh.tmp.csv", ".x.png.h-1.abcdefgh.tmp.png"):
        assert spec.match_file(f"results/deep/{name}"), name
    assert not spec.match_file("results/deep/a.npz")


def test_npz_writes_are_synced_to_disk(tmp_path, monkeypatch):
    """write_npz fsyncs its temporary file before the rename, as the text writers do."""
    import os

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    write_npz(tmp_path / "a.npz", x=np.arange(2))
    write_json(tmp_path / "a.json", {"a": 1})
    assert [os.path.basename(p).endswith((".tmp.npz", ".tmp.json")) for p in synced] == [True, True]


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


def test_verify_refuses_a_path_that_is_not_there(tmp_path):
    """A mistyped path, or a symlink loop, fails in one line naming it (was: exit 0, "0
    artifacts checked, 0 damaged")."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for path in (tmp_path / "nonexistent", loop):
        proc = run_cli("verify", str(path), check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert f"error: PATH = {str(path)!r} is invalid; allowed: an existing file or folder to verify" in proc.stderr

