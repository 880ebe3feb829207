"""benchmarks/paper_time.py: the paper preset's hours from a bench's own rows on its device."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def paper_time():
    spec = importlib.util.spec_from_file_location("paper_time", ROOT / "benchmarks" / "paper_time.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench(head_16k: float) -> dict:
    """Rows in `subaudit bench --json`'s shape on a GPU: three numbers of runs per workload."""
    def row(name, q, n, runs, rate):
        return {"name": name, "q": q, "n": n, "runs": runs, "role": "goal", "engine_model_steps_per_s": rate}
    return {"machine": {"device": "cuda"}, "workloads": [
        row("image head", 1.0, 500, 256, 1.0), row("image head", 1.0, 500, 16_384, head_16k),
        row("image head", 1.0, 500, 1_024, 3.0), row("image head", 0.0625, 500, 256, 7.0),
        row("tabular MLP", 0.25, 5000, 32, 1.0), row("tabular MLP", 0.25, 5000, 4_096, 1e4)]}


def test_the_hours_come_from_the_rows_with_most_runs(paper_time):
    once, twice = paper_time.paper_hours(_bench(2e5)), paper_time.paper_hours(_bench(4e5))
    assert once["device"] == "cuda"
    for exp in ("image", "text"):          # dense heads: the 16,384-run row's rate, nothing else
        assert twice["natural"][exp]["hours"] == pytest.approx(once["natural"][exp]["hours"] / 2)
    params = _params(paper_time)
    n = params["natural"]["experiments"]["tabular"]["n_train"]
    flops = paper_time.useful_flops
    want = sum(s.runs * s.steps * flops((600, 128, 100), s.q * n) / flops((600, 128, 100), 0.25 * 5_000) / 1e4
               for s in paper_time.audits(params) if s.experiment == "tabular") / 3600
    assert once["natural"]["tabular"]["hours"] == pytest.approx(want) and want > 0
    assert once["natural_hours"] == pytest.approx(sum(v["hours"] for v in once["natural"].values()))


def _params(paper_time) -> dict:
    import yaml
    return paper_time.merged(yaml.safe_load((ROOT / "params.yaml").read_text()),
                             yaml.safe_load((ROOT / "presets/paper.yaml").read_text()))


def test_the_deep_phase_is_its_examples_at_the_measured_rate_on_the_same_device(paper_time, tmp_path):
    bench, deep = tmp_path / "bench.json", tmp_path / "deep.json"
    bench.write_text(json.dumps(_bench(2e5)))
    deep.write_text(json.dumps({"device": "cuda", "total_examples": 2_000_000, "examples_per_second": 500.0}))
    out = json.loads(subprocess.run([sys.executable, str(ROOT / "benchmarks" / "paper_time.py"), "--bench",
                                     str(bench), "--deep", str(deep), "--json"], capture_output=True, text=True,
                                    check=True).stdout)
    assert out["deep"]["hours"] == pytest.approx(2_000_000 / 500 / 3600)
    deep.write_text(json.dumps({"device": "cpu", "total_examples": 1, "examples_per_second": 1.0}))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "paper_time.py"), "--bench", str(bench),
                           "--deep", str(deep)], capture_output=True, text=True)
    assert done.returncode != 0 and "measured on cpu" in done.stderr
