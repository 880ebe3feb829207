"""subaudit prefetch (subaudit.pipeline.prefetch): every archive and weight a configuration needs,
fetched once and verified, so that the workflow's acquire jobs find them and do nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import workflow_copy
from subaudit.data import SOURCES
from subaudit.data.sources import DataError
from subaudit.pipeline.config import load_params, validate_params
from subaudit.pipeline.prefetch import Weights, downloads, prefetch

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _paper() -> dict:
    from snakemake.utils import update_config

    params = load_params(ROOT / "params.yaml")
    for preset in ("paper.yaml", "gpu.yaml"):
        update_config(params, yaml.safe_load((ROOT / "presets" / preset).read_text()))
    validate_params(params)
    return params


def test_what_a_configuration_downloads():
    params = load_params(ROOT / "params.yaml")
    archives, weights = downloads(params)
    want = {e["source"] for e in params["natural"]["experiments"].values()} | {params["deep"]["source"]}
    assert {a.source for a in archives} == want and weights == []   # the default's weights ship in packages
    archives, weights = downloads(_paper())
    assert {a.source for a in archives} == {"cifar10", "sst2", "purchase100"}
    assert weights == [Weights("vit-b16-in21k", None, "natural.experiments.image.weights_checksum")]
    assert next(a for a in archives if a.source == "purchase100").key == "natural.experiments.tabular.checksum"


def test_a_source_without_a_digest_stops_before_any_download_naming_the_key(tmp_path):
    with pytest.raises(DataError) as err:
        prefetch(_paper(), tmp_path, say=lambda _m: None)
    text = str(err.value)
    assert "purchase100 has no pinned digest" in text and "natural.experiments.tabular.checksum" in text
    assert f"sha256sum {tmp_path}/data/raw/purchase100/dataset_purchase.tgz" in text
    assert not (tmp_path / "data").exists()
    cli = subprocess.run([BIN / "subaudit", "prefetch", "--configfile", "presets/paper.yaml", "--root", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True)
    assert cli.returncode == 1 and "natural.experiments.tabular.checksum" in cli.stderr
    # with Purchase100's digest recorded, the ViT-B/16 weights (no pinned sha256) stop it next,
    # still before any download
    paper = _paper()
    paper["natural"]["experiments"]["tabular"]["checksum"] = "0" * 64
    with pytest.raises(DataError) as err:
        prefetch(paper, tmp_path, say=lambda _m: None)
    assert ("vit-b16-in21k: its weights (timm/vit_base_patch16_224.augreg_in21k, file model.safetensors) "
            "have no pinned sha256" in str(err.value))
    assert "set `natural.experiments.image.weights_checksum: <that sha256>` in your configuration" in str(err.value)
    assert not (tmp_path / "data").exists()
    # a key that gives no digest (the deep phase's source) is not offered as the place for one
    with pytest.raises(DataError, match=r"^deep.source: purchase100 has no pinned digest; choose"):
        prefetch({"natural": {"experiments": {}}, "deep": {"source": "purchase100"}}, tmp_path,
                 say=lambda _m: None)


def test_the_defaults_sources_prefetched_leave_the_workflow_nothing_to_acquire(tmp_path):
    """A real download of the default's four archives, then a dry run of the workflow in that
    directory lists no acquire job; a second prefetch reuses what is there."""
    params = load_params(ROOT / "params.yaml")
    work = workflow_copy(tmp_path / "work", params)
    said: list[str] = []
    done = prefetch(params, work, say=said.append)
    for source, path in done.items():
        assert path == work / "data" / "raw" / source / SOURCES[source].filename and path.is_file()
    assert said[-1].startswith("no weights to fetch")
    stamp = {p: p.stat().st_mtime_ns for p in done.values()}
    prefetch(params, work, say=lambda _m: None)
    assert {p: p.stat().st_mtime_ns for p in done.values()} == stamp
    dry = subprocess.run([BIN / "snakemake", "-n", "--cores", "1"], cwd=work, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "rule split" in dry.stdout and "rule acquire" not in dry.stdout
