"""``subaudit bench``: its FLOP model against torch's counter, and the command itself."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from subaudit.bench import WORKLOADS, useful_flops
from subaudit.engine import MLP

from conftest import cli_json


@pytest.mark.parametrize("sizes", [w.sizes for w in WORKLOADS] + [(5, 7, 3, 2)])
def test_useful_flops_match_torch_flop_counter(sizes):
    module = MLP(sizes).torch_module()
    batch = 37
    x = torch.randn(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(module(x), y).backward()
    assert useful_flops(sizes, batch) == counter.get_total_flops()


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
    # The batched engine must beat one-model-at-a-time Opacus on every workload.
    assert all(row["speedup_vs_opacus"] > 1 for row in out["workloads"])
