"""``subaudit bench``: its FLOP model against torch's counter, and the command itself."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from subaudit.engine.bench import GOALS, WORKFLOW_JOB, WORKLOADS, useful_flops
from subaudit.engine import MLP

from conftest import ROOT, cli_json


@pytest.mark.parametrize("sizes", [w.sizes for w in WORKLOADS] + [(5, 7, 3, 2)])
def test_useful_flops_match_torch_flop_counter(sizes):
    module = MLP(sizes).torch_module()
    batch = 37
    x = torch.randn(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(module(x), y).backward()
    assert useful_flops(sizes, batch) == counter.get_total_flops()


def test_bench_covers_what_the_default_run_trains():
    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    names = {"image": "image head", "text": "text head", "tabular": "tabular MLP"}
    for exp, cfg in params["natural"]["experiments"].items():
        rows = [w for w in WORKLOADS if w.role == "default" and w.name == names[exp]]
        assert sorted(w.q for w in rows) == sorted(cfg["sampling_rates"]), exp
        assert all(w.n == cfg["n_train"] and w.sizes[1:-1] == tuple(cfg["hidden"])
                   and w.optimizer == cfg["optimizer"] and w.init == cfg["init"] for w in rows)
    # the one-thread rows run as train_shard does: its threads, a shard, its memory budget
    nat = params["natural"]
    assert WORKFLOW_JOB == {"threads": 1, "runs": nat["shard_size"], "memory_mb": nat["memory_mb"]}
    rule = (ROOT / "workflow/rules/natural.smk").read_text().split("rule train_shard:")[1].split("\nrule ")[0]
    assert "threads: 1" in rule


@pytest.mark.slow
def test_bench_quick_json():
    out = cli_json("bench", "--quick")
    assert out["quick"] is True
    head = out["workloads"][0]
    assert (head["name"], head["q"]) == ("image head", 1.0)
    assert out["speedup_vs_opacus"] == head["speedup_vs_opacus"]
    assert out["fraction_of_matmul"] == head["fraction_of_matmul"]
    for row in out["workloads"]:
        assert row["speedup_vs_opacus"] == pytest.approx(
            row["engine_model_steps_per_s"] / row["opacus_model_steps_per_s"])
        assert 0 < row["fraction_of_matmul"] < 1.5
        assert 0 <= row["randomness_share"] <= 1
        assert row["basis"] == "full" if row["role"] == "goal" else row["basis"] in ("full", "span")
    # The batched engine must beat one-model-at-a-time Opacus on every workload.
    assert all(row["speedup_vs_opacus"] > 1 for row in out["workloads"])
    rows = out["workloads"]
    assert [g["goal"] for g in out["goals"]] == [text for text, _ in GOALS]
    assert out["goals"][0]["measured"] == rows[0]["fraction_of_matmul"]
    assert out["goals"][1]["measured"] == pytest.approx(
        rows[1]["engine_model_steps_per_s"] / rows[0]["engine_model_steps_per_s"])
    assert out["goals"][2]["measured"] == rows[2]["fraction_of_matmul"]
    assert all(g["met"] == (g["measured"] >= g["target"]) for g in out["goals"])
    # beside them, the default run's workloads as its training jobs run them: one thread,
    # a shard of 1,000 runs, against Opacus and the matmul rate on one thread
    today, job = rows[:len(WORKLOADS)], rows[len(WORKLOADS):]
    assert [(r["runs"], r["threads"]) for r in today] == [
        (w.runs, out["machine"]["torch_threads"]) for w in WORKLOADS]
    assert all(r["matmul_gflops"] == out["matmul_gflops"] for r in today)
    assert [(r["name"], r["q"], r["runs"], r["threads"]) for r in job] == [
        (w.name, w.q, WORKFLOW_JOB["runs"], WORKFLOW_JOB["threads"]) for w in WORKLOADS
        if w.role == "default"]
    assert len({r["matmul_gflops"] for r in job}) == 1      # one-thread matmul, measured once
    for row in job:
        assert row["fraction_of_matmul"] == pytest.approx(row["engine_gflops"] / row["matmul_gflops"])
