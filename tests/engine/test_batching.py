"""subaudit.engine.batching: the registry of batching modes, the rules that choose one, and what
each mode holds in memory. (That every mode trains what Opacus trains: test_training.py.)"""

from __future__ import annotations

import pytest
import torch

from subaudit import engine
from subaudit.engine import kernels
from subaudit.engine.batching import BATCHINGS, Batching, Setup, bytes_per_run, gather_slots
from subaudit.engine.dpsgd import DPConfig
from subaudit.engine.model import MLP, Records
from subaudit.validation import ParameterError


def test_the_registry_names_each_mode_once_and_auto_besides():
    assert list(BATCHINGS) == ["dense", "gather", "sampled", "per-run"]
    assert all(isinstance(b, Batching) and b.name == name for name, b in BATCHINGS.items())
    assert [n for n, b in BATCHINGS.items() if b.linear_only] == ["sampled"]
    assert [n for n, b in BATCHINGS.items() if b.whole_runs] == ["per-run"]
    with pytest.raises(ParameterError, match="auto"):
        engine.choose_batching("sparse", MLP((20, 4)), 100, 0.1, torch.device("cpu"))
    with pytest.raises(ParameterError, match="'auto', 'dense', 'gather' or 'per-run' for an MLP"):
        engine.choose_batching("sampled", MLP((20, 8, 4)), 100, 0.1, torch.device("cpu"))


def test_batching_rules():
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    head, mlp = MLP((20, 4)), MLP((20, 8, 4))
    if kernels.available():
        assert engine.choose_batching("auto", mlp, 100, 1.0, cpu) == "per-run"
        assert engine.choose_batching("auto", head, 100, 0.1, cpu) == "per-run"
        assert engine.choose_batching("auto", head, 100, 0.25, cpu) == "dense"
    else:           # without the kernels the CPU follows the GPU's rules; per-run trains dense
        assert engine.choose_batching("auto", head, 100, 0.1, cpu) == "sampled"
        assert engine.choose_batching("per-run", mlp, 100, 0.1, cpu) == "dense"
    assert engine.choose_batching("auto", mlp, 100, 0.1, cpu, observed=True) != "per-run"
    assert engine.choose_batching("auto", head, 100, 0.1, gpu) == "sampled"
    assert engine.choose_batching("auto", MLP((20, 64, 4)), 1000, 0.05, gpu) == "gather"   # few slots, wide
    assert engine.choose_batching("auto", MLP((20, 16, 4)), 1000, 0.05, gpu) == "dense"    # too narrow to gather
    for device, observed in ((gpu, False), (cpu, True)):
        with pytest.raises(ParameterError, match="per-run"):
            engine.choose_batching("per-run", mlp, 100, 0.1, device, observed=observed)


@pytest.mark.parametrize("mode", list(BATCHINGS))
def test_each_mode_holds_its_own_rows(mode):
    """bytes_per_run, by hand: a run holds its rows (dense and sampled: the n records and z, z'
    of each of m canaries; gather: its slots and its canaries, each row with its own copy of the
    d inputs; per-run: none, the kernels hold a run's records outside the chunk, but it keeps
    the parameters at each checkpoint) or the test rows if more, with 5 values per activation
    and 4 more per row, and 6 values per parameter (8 with Adam's moments)."""
    model, n, m, q = MLP((30, 40, 5)), 200, 2, 0.1
    data = Records(torch.zeros(n, 30), torch.zeros(n, dtype=torch.long))
    dp = DPConfig(steps=3, sampling_rate=q, noise_multiplier=1.0, clip=1.0, lr=0.1, optimizer="adam")

    class TwoCanaries:     # what bytes_per_run reads of a canary: its count
        count = m

    slots = gather_slots(n, q, 1e-3)
    s = Setup(model, data, TwoCanaries(), dp, BATCHINGS[mode], slots, 0, torch.device("cpu"), torch.float64,
              model, None)
    rows = {"dense": n + 2 * m, "sampled": n + 2 * m, "gather": slots + m, "per-run": 0}[mode]
    per_row = 5 * (40 + 5) + 4 + (30 if mode == "gather" else 0)
    params = model.num_params * (8 + (7 if mode == "per-run" else 0))
    assert bytes_per_run(s, test_rows=10, snapshots=7) == 8 * (max(rows, 10) * per_row + params)
    assert bytes_per_run(s, test_rows=10_000, snapshots=7) == 8 * (10_000 * per_row + params)
