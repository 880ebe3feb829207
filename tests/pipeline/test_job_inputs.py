"""Experiment files: the records a run shares, canary files."""

from __future__ import annotations

import torch

from subaudit.pipeline.job_inputs import audit_data, load_canary, save_canary
from subaudit.engine import MLP, GradientCanary, InputCanary, Records


def test_audit_data_drops_the_target_for_input_canaries():
    data = Records(torch.arange(12.0).view(6, 2), torch.arange(6) % 2)
    assert audit_data(data, 2, "S2") is data
    assert audit_data(data, None, "S2") is data          # S2 needs no target
    for scenario in ("S3", "S4", "S5"):
        kept = audit_data(data, 2, scenario)
        assert kept.x.shape == (5, 2) and not (kept.x == data.x[2]).all(1).any()


def test_canary_files_round_trip(tmp_path):
    g = GradientCanary.one_hot(MLP((4, 3)), 5, 2.0)
    i = InputCanary(torch.randn(2, 4), torch.tensor([1, 2]))
    for c, name in ((g, "g.npz"), (i, "i.npz")):
        save_canary(tmp_path / name, c)
        back = load_canary(tmp_path / name)
        assert type(back) is type(c)
        for field in ("g",) if isinstance(c, GradientCanary) else ("x", "y"):
            assert torch.equal(getattr(back, field), getattr(c, field))


def test_backdoor_canary_file_keeps_its_trap_and_projection(tmp_path):
    from subaudit.scenarios.s7 import backdoor_trap

    x = torch.zeros(6)
    x[[0, 3]] = 1.0
    data = Records(torch.eye(6)[[1, 2, 4, 5]], torch.tensor([0, 1, 2, 0]))
    c, _ = backdoor_trap(MLP((6, 4, 3)), data, x, 1, 2)
    save_canary(tmp_path / "t.npz", c)
    back = load_canary(tmp_path / "t.npz")
    assert torch.equal(back.x, c.x) and torch.equal(back.y, c.y)
    assert torch.equal(back.score.direction, c.score.direction)
    assert len(back.trap) == len(c.trap) == 3
    for (l1, i1, v1), (l2, i2, v2) in zip(back.trap, c.trap):
        assert l1 == l2 and torch.equal(i1, i2) and torch.equal(v1, v2)
