"""A user's own features file: checks that name the key, the split, and an audit of it end to end
through the workflow (features, reference, canaries, shards, estimates, figure)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import base_ablations, job_counts, lean, setting_path, snakemake, tiny, workflow_copy

from subaudit.data import own_features
from subaudit.pipeline.config import ConfigError, validate_params
from subaudit.validation import ParameterError


def make_file(path: Path, n: int = 120, d: int = 12, k: int = 3, parts: bool = True,
              **override: np.ndarray) -> str:
    """A features file of k Gaussian clusters; returns its sha256."""
    rng = np.random.default_rng(5)
    centres = rng.normal(0, 2, (k, d))

    def draw(m: int) -> tuple[np.ndarray, np.ndarray]:
        y = np.arange(m) % k
        return (centres[y] + rng.normal(0, 1, (m, d))).astype(np.float32), y.astype(np.int64)

    arrays = dict(zip(("x", "y"), draw(n)))
    if parts:
        arrays.update(zip(("aux_x", "aux_y"), draw(30)))
        arrays.update(zip(("test_x", "test_y"), draw(30)))
    arrays.update(override)
    np.savez(path, **arrays)
    return hashlib.sha256(path.read_bytes()).hexdigest()


SIZES = dict(n_train=60, n_aux=10, n_test=10, per_class=True)


def test_features_split_and_take_the_files_own_parts(tmp_path):
    digest = make_file(tmp_path / "f.npz")
    a = own_features.features(tmp_path / "f.npz", digest, seed=1, **SIZES)
    assert a["train_x"].shape == (60, 12) and np.bincount(a["train_y"]).tolist() == [20, 20, 20]
    assert a["aux_x"].shape == (30, 12) and a["test_x"].shape == (30, 12)   # the file's
    assert int(a["classes"]) == 3 and str(a["backbone"]) == "none"
    with np.load(tmp_path / "f.npz") as f:
        assert np.array_equal(a["test_x"], f["test_x"])
        rows = {r.tobytes() for r in f["x"]}
    assert all(r.tobytes() in rows for r in a["train_x"])
    b = own_features.features(tmp_path / "f.npz", digest, seed=1, **SIZES)
    assert all(np.array_equal(a[k], b[k]) for k in a)                          # deterministic
    digest = make_file(tmp_path / "g.npz", parts=False)
    c = own_features.features(tmp_path / "g.npz", digest, seed=1, **SIZES)
    assert (c["aux_x"].shape, c["test_x"].shape) == ((10, 12), (10, 12))       # from x, y
    train = {r.tobytes() for r in c["train_x"]}
    assert not train & {r.tobytes() for r in np.r_[c["aux_x"], c["test_x"]]}


@pytest.mark.parametrize(
    ("override", "key", "says"),
    [
        ({"y": np.zeros(120)}, "features_file", "y integer labels"),
        ({"x": np.full((120, 12), np.nan)}, "features_file", "x a 2-D array of finite numbers"),
        ({"test_x": np.zeros((30, 5))}, "features_file", "test_x with the 12 columns of x"),
        ({"w": np.zeros(3)}, "features_file", "not w"),
        ({"aux_y": np.zeros(29, dtype=np.int64)}, "features_file", "aux_y integer labels"),
    ],
)
def test_malformed_files_name_the_key(tmp_path, override, key, says):
    digest = make_file(tmp_path / "f.npz", **override)
    with pytest.raises(ParameterError, match=says) as err:
        own_features.check(tmp_path / "f.npz", digest, **SIZES)
    assert err.value.name == key


def test_missing_mismatched_and_unreadable_files(tmp_path):
    digest = make_file(tmp_path / "f.npz")
    with pytest.raises(ParameterError, match="an existing .npz file") as err:
        own_features.check(tmp_path / "none.npz", digest, **SIZES)
    assert err.value.name == "features_file"
    with pytest.raises(ParameterError, match=f"which is {digest}") as err:
        own_features.check(tmp_path / "f.npz", "0" * 64, **SIZES)
    assert err.value.name == "checksum"
    (tmp_path / "bad.npz").write_bytes(b"not a zip file")
    bad = hashlib.sha256(b"not a zip file").hexdigest()
    with pytest.raises(ParameterError, match="numpy can read") as err:
        own_features.check(tmp_path / "bad.npz", bad, **SIZES)
    with pytest.raises(ParameterError) as err:
        own_features.check(tmp_path / "f.npz", digest, **{**SIZES, "n_train": 600})
    assert err.value.name == "n_train"


# --------------------------------------------------------------------------- workflow


def own_config(workdir: Path, **experiment) -> dict:
    """The tiny config with one experiment, "mine", on a features file in the workdir."""
    params = lean(tiny())
    digest = make_file(workdir / "mine.npz") if (workdir / "mine.npz").exists() is False else (
        hashlib.sha256((workdir / "mine.npz").read_bytes()).hexdigest())
    params["natural"]["experiments"] = {"mine": {
        "source": "own-features", "features_file": "mine.npz", "checksum": digest,
        "backbone": "none", "hidden": [], "optimizer": "sgd", "init": "zero", "clip": 1.0,
        "lr": 0.1, "steps": 4, "every": 2, "sampling_rates": [0.5], **SIZES, **experiment}}
    params["one_run"]["experiment"] = "mine"
    params["reconstruction"]["experiment"] = None      # no image experiment: no reconstruction
    base_ablations(params, "mine")
    return params


@pytest.mark.slow
def test_a_users_features_file_is_audited_end_to_end(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    params = own_config(tmp_path)
    # a canary without a reference model, one with it and its shared runs, one crafted by
    # gradient descent
    params["natural"]["scenarios"] = ["S2", "S4", "S7"]
    params["ablations"]["scenarios"] = ["S2", "S4"]
    workflow_copy(tmp_path, params)
    proc = snakemake(tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "rule own_features" in proc.stderr
    for ext in ("png", "pdf", "csv"):
        assert (tmp_path / f"results/figures/audit-mine.{ext}").stat().st_size > 0
    table = pd.read_csv(tmp_path / "results/figures/audit-mine.csv")
    assert set(table["experiment"]) == {"mine"} and set(table["q"]) == {0.5}
    audits = table[table["scenario"].notna()]
    assert set(audits["scenario"]) == set(params["natural"]["scenarios"]) >= {"S2", "S7"}
    assert set(audits["estimator"]) == {"auc", "paper"} and set(audits["step"]) == {2, 4}
    feats = np.load(tmp_path / "data/features/mine.npz")
    assert feats["train_x"].shape == (60, 12) and feats["aux_x"].shape == (30, 12)
    scores = np.load(tmp_path / setting_path("scores", params, "mine", "S4", q=0.5))
    assert scores["scores"].shape == (2, 32)
    assert job_counts(tmp_path) == {}
    # the file changes: its checksum no longer matches, and the run stops before any job
    make_file(tmp_path / "mine.npz", n=150)
    proc = snakemake(tmp_path)
    assert proc.returncode != 0
    assert "natural.experiments.mine.checksum = " in proc.stderr
    assert "Select jobs to execute" not in proc.stderr


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"features_file": "absent.npz"},
         "natural.experiments.mine.features_file = 'absent.npz' is invalid; allowed: an existing"),
        ({"checksum": "ab" * 32}, "natural.experiments.mine.checksum = '" + "ab" * 32),
        ({"n_train": 61}, "natural.experiments.mine.n_train = 61 is invalid"),
        ({"backbone": "minilm-l6-v2"}, "natural.experiments.mine.backbone = 'minilm-l6-v2'"),
        ({"features_file": None}, "missing key natural.experiments.mine.features_file"),
    ],
)
def test_bad_features_files_are_refused_naming_the_key(tmp_path, monkeypatch, change, says):
    """By the Snakefile's first statement, ``validate_params``, run where the workflow runs
    (in process; the end-to-end test above shows Snakemake stopping on it before any job)."""
    params = own_config(tmp_path)
    mine = params["natural"]["experiments"]["mine"]
    mine.update({k: v for k, v in change.items() if v is not None})
    for k in [k for k, v in change.items() if v is None]:
        del mine[k]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(says)):
        validate_params(params, source="params.yaml")


def test_malformed_file_is_refused_naming_the_key(tmp_path, monkeypatch):
    make_file(tmp_path / "mine.npz", y=np.linspace(0, 2, 120))
    params = own_config(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(
            "natural.experiments.mine.features_file = 'mine.npz' is invalid; allowed: y integer")):
        validate_params(params, source="params.yaml")
