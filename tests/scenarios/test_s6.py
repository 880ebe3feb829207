"""S6 crafting: the unrolled training is the engine's, its metagradient is the finite
difference's, the record stays in its domain, and optimising raises the audit's own
distinguishability on fresh runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from subaudit.engine import (
    MLP,
    DPConfig,
    InputCanary,
    LogitDifference,
    Records,
    RunStreams,
    init_params,
)
from subaudit.engine.dpsgd import CLIP_EPS
from subaudit.engine.unroll import unroll
from subaudit.scenarios.domain import Domain
from subaudit.scenarios.s6 import (
    craft_metagradient,
    fresh_objective,
    linearised_objective,
    objective,
    optimise_substitute,
    pair_scores,
    reference_trajectory,
)
from subaudit.seeding import derive_seed
from subaudit.validation import ParameterError

F64 = torch.float64


def _data(n: int, d: int = 6, k: int = 4, seed: int = 0) -> Records:
    g = torch.Generator().manual_seed(seed)
    return Records(torch.randn(n, d, generator=g, dtype=F64), torch.randint(0, k, (n,), generator=g))


@pytest.mark.parametrize(("sizes", "optimizer", "init"), [((6, 4), "sgd", "zero"), ((6, 5, 4), "adam", "random")])
def test_metagradient_agrees_with_finite_differences(sizes, optimizer, init):
    model, data = MLP(sizes), _data(20)
    x = torch.randn(6, dtype=F64, generator=torch.Generator().manual_seed(2))
    dp = DPConfig(steps=9, sampling_rate=0.4, noise_multiplier=0.8, clip=0.5, lr=0.05, optimizer=optimizer)

    def J(xp: torch.Tensor) -> torch.Tensor:
        a, b = pair_scores(model, data, x, 1, xp, 2, dp, seed=5, runs=range(4), init=init,
                           score=LogitDifference(), segment=4)
        return objective(a, b)

    xp = torch.randn(6, dtype=F64, generator=torch.Generator().manual_seed(3), requires_grad=True)
    J(xp).backward()
    grad = xp.grad
    h = 1e-6
    for i in range(3):
        e = torch.zeros(6, dtype=F64)
        e[i] = h
        with torch.no_grad():
            fd = float((J(xp + e) - J(xp - e)) / (2 * h))
        assert abs(float(grad[i]) - fd) <= 1e-6 * max(1.0, abs(fd)), (i, float(grad[i]), fd)
    assert float(grad.abs().max()) > 1e-3                    # a gradient that can be wrong


def test_objective_is_the_gap_over_the_pooled_deviation():
    a, b = torch.tensor([1.0, 2.0, 3.0], dtype=F64), torch.tensor([0.0, 0.0, 3.0], dtype=F64)
    pooled = np.sqrt(0.5 * (np.var([1, 2, 3], ddof=1) + np.var([0, 0, 3], ddof=1)))
    assert float(objective(a, b)) == pytest.approx((2.0 - 1.0) / pooled, rel=1e-12)
    assert float(objective(2 * a, 2 * b)) == pytest.approx(float(objective(a, b)), rel=1e-12)  # scale-free


def test_linearised_objective_gradient_and_scope():
    model, data = MLP((6, 4)), _data(30)
    dp = DPConfig(steps=5, sampling_rate=0.5, noise_multiplier=1.0, clip=0.5, lr=0.1)
    traj = reference_trajectory(model, data, dp, init="zero", seed=1)
    assert len(traj) == dp.steps + 1 and all(p.dtype == F64 for p in traj[-1])
    x = data.x[0]
    xp = torch.randn(6, dtype=F64, generator=torch.Generator().manual_seed(4), requires_grad=True)
    value = linearised_objective(model, traj, x, 1, xp, 2, dp, 31)
    value.backward()
    grad = xp.grad
    h = 1e-6
    for i in range(3):
        e = torch.zeros(6, dtype=F64)
        e[i] = h
        with torch.no_grad():
            fd = float((linearised_objective(model, traj, x, 1, xp + e, 2, dp, 31)
                        - linearised_objective(model, traj, x, 1, xp - e, 2, dp, 31)) / (2 * h))
        assert float(grad[i]) == pytest.approx(fd, rel=1e-6, abs=1e-9)
    # one step from the zero head, in closed form: softmax 1/K, g = (1/K - e_y)(x, 1), clipped
    xv, pv = x.numpy(), xp.detach().numpy()

    def clipped(row: np.ndarray, label: int) -> np.ndarray:
        g = np.outer(np.full(4, 0.25) - np.eye(4)[label], np.r_[row, 1.0])
        return g * min(1.0, 0.5 / (np.linalg.norm(g) + CLIP_EPS))   # the engine's clipping

    grad_s = np.outer(np.eye(4)[1], np.r_[xv, 1.0]) - np.outer(np.eye(4)[2], np.r_[pv, 1.0])
    b = 0.5 * 31
    want = (0.5 * 0.1 / b * (grad_s * (clipped(pv, 2) - clipped(xv, 1))).sum()
            / (0.1 * 1.0 * 0.5 * np.sqrt(5) / b * np.linalg.norm(grad_s)))
    one = linearised_objective(model, traj[:2], x, 1, xp.detach(), 2, dp, 31)
    assert float(one) == pytest.approx(want, rel=1e-12)
    with pytest.raises(ParameterError, match="a linear head"):
        linearised_objective(MLP((6, 5, 4)), traj, x, 1, xp, 2, dp, 31)





def _features(n: int = 40) -> dict:
    g = torch.Generator().manual_seed(7)
    centres = torch.randn(3, 5, generator=g, dtype=F64) * 2
    y = torch.arange(n) % 3
    x = centres[y] + torch.randn(n, 5, generator=g, dtype=F64)
    return {"train": Records(x, y), "aux": Records(x[:10] + 0.1, y[:10]), "test": Records(x[:10], y[:10])}


def test_a_metastep_ascends_the_objective_on_its_own_crafting_runs():
    """One Adam metastep moves x' by lr along the sign of the metagradient (in units of each
    feature's spread) and raises the objective on the runs it was computed on."""
    model, feats = MLP((5, 3)), _features()
    x, y = feats["train"].x[0], int(feats["train"].y[0])
    data = Records(feats["train"].x[1:], feats["train"].y[1:])
    dp = DPConfig(steps=10, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0, lr=0.5)
    domain = Domain.of(feats["train"].x)
    xp, history, kept = optimise_substitute(model, data, x, y, 1, dp, init="zero", seed=11,
                                            score=LogitDifference(), domain=domain, metasteps=1, runs=8, lr=0.01)
    runs = dict(seed=derive_seed(11, "S6", "metagradient"), runs=range(8), init="zero", score=LogitDifference())
    u = x.clone().requires_grad_(True)
    value = objective(*pair_scores(model, data, x, y, u, 1, dp, **runs))
    value.backward()
    grad = u.grad
    assert history == [pytest.approx(float(value.detach()), rel=1e-12)] and kept == 1
    step = 0.01 * domain.unit.numpy() * np.sign(grad.numpy())
    np.testing.assert_allclose((xp - x).numpy(), step, rtol=1e-4)        # up to Adam's eps
    with torch.no_grad():
        after = objective(*pair_scores(model, data, x, y, xp, 1, dp, **runs))
    assert float(after) > float(value.detach())


@pytest.mark.parametrize(("sizes", "optimizer", "init"), [((6, 4), "sgd", "zero"), ((6, 5, 4), "adam", "random")])
def test_the_target_world_trained_by_the_engine_is_its_unrolled_training(sizes, optimizer, init):
    """D does not depend on x', so the engine trains it (no graph): its scores are those of the
    same runs unrolled with z as record n."""
    model, data = MLP(sizes), _data(20)
    x, xp = (torch.randn(6, dtype=F64, generator=torch.Generator().manual_seed(s)) for s in (2, 3))
    dp = DPConfig(steps=7, sampling_rate=0.4, noise_multiplier=0.8, clip=0.5, lr=0.05, optimizer=optimizer)
    s_in, _ = pair_scores(model, data, x, 1, xp, 2, dp, seed=5, runs=range(4), init=init, score=LogitDifference())
    streams = RunStreams.for_runs(5, range(4))
    start = init_params(model, streams, init, F64)
    final = unroll(model, data, x[None].expand(4, -1), torch.full((4,), 1), start, dp, streams)
    canary = InputCanary(torch.stack([x, xp]), torch.tensor([1, 2]))
    np.testing.assert_allclose(s_in.numpy(), LogitDifference().bind(canary, start)(final)[:, 0].numpy(),
                               rtol=0, atol=1e-12)
    assert float(s_in.std()) > 1e-3                                 # runs that differ


def _ascent(lr: float, objective_kind: str = "unrolled"):
    model, feats = MLP((5, 3)), _features()
    x, y = feats["train"].x[0], int(feats["train"].y[0])
    data = Records(feats["train"].x[1:], feats["train"].y[1:])
    dp = DPConfig(steps=10, sampling_rate=0.5, noise_multiplier=0.5, clip=1.0, lr=0.5)
    kw = dict(init="zero", seed=11, score=LogitDifference(), domain=Domain.of(feats["train"].x), runs=8, lr=lr,
              objective_kind=objective_kind)
    return model, data, x, y, dp, lambda m: optimise_substitute(model, data, x, y, 1, dp, metasteps=m, **kw)


@pytest.mark.parametrize(("lr", "stops"), [(3.0, True), (0.02, False)])
def test_a_step_is_kept_only_where_the_next_metasteps_runs_confirm_it(lr, stops):
    """Metastep i compares its record with the one before the last step on its own fresh runs
    (recomputed here, both unrolled); the first step that did not raise the objective there is
    undone and ends the ascent (an overshooting lr), else every step is taken."""
    model, data, x, y, dp, ascend = _ascent(lr)
    xp, history, kept = ascend(4)
    runs = lambda i: dict(seed=derive_seed(11, "S6", "metagradient"), runs=range(8 * i, 8 * i + 8),  # noqa: E731
                          init="zero", score=LogitDifference())
    records = [x] + [ascend(j)[0] for j in range(1, max(len(history), kept + 1))]
    for i in range(1, len(history)):
        with torch.no_grad():
            now, before = (float(objective(*pair_scores(model, data, x, y, r, 1, dp, **runs(i))))
                           for r in (records[i], records[i - 1]))
        assert history[i] == pytest.approx(now, rel=1e-9)
        assert (now <= before) == (i == len(history) - 1 and kept < 4), (i, now, before)
    assert (kept < 4) == stops and len(history) == (kept + 2 if stops else 4)
    assert torch.equal(xp, records[kept]) and not torch.equal(records[1], x)    # steps that move x'


def test_the_linearised_ascent_stops_where_its_objective_stops_rising():
    _, _, x, _, _, ascend = _ascent(3.0, objective_kind="linearised")
    xp, history, kept = ascend(4)
    assert kept < 4 and len(history) == kept + 2 and history[-1] <= history[-2]
    assert all(b > a for a, b in zip(history[:-2], history[1:-1]))
    assert torch.equal(xp, ascend(kept)[0] if kept else x)                # x itself, not a rounding of it


def test_a_record_that_did_not_move_is_the_start_checked_once(monkeypatch):
    """With no step kept x' is x: S4's pair, whose check is not run a second time."""
    import subaudit.scenarios.s6 as s6

    model, feats = MLP((5, 3)), _features()
    dp = DPConfig(steps=10, sampling_rate=0.5, noise_multiplier=0.5, clip=1.0, lr=0.5)
    reference = [torch.zeros(3, 5, dtype=F64), torch.zeros(3, dtype=F64)]
    checked = []
    monkeypatch.setattr(s6, "fresh_objective", lambda *a, **k: checked.append(a[2]) or fresh_objective(*a, **k))
    info = craft_metagradient(model, feats, 0, reference, dp, init="zero", seed=11, score=LogitDifference(),
                              metasteps=4, runs=8, lr=3.0, objective_kind="linearised", check_runs=20,
                              dtype=F64).info
    assert info["metasteps_kept"] == 0 and info["kept"] == "start" and info["distance"] == 0.0
    assert len(checked) == 1 and torch.equal(checked[0].x[1], checked[0].x[0])
    assert info["fresh_objective_optimised"] == info["fresh_objective_start"]


def test_crafting_is_deterministic_and_never_worse_than_its_start_on_the_check_runs():
    model, feats = MLP((5, 3)), _features()
    dp = DPConfig(steps=20, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0, lr=0.5)
    reference = [torch.zeros(3, 5, dtype=F64), torch.zeros(3, dtype=F64)]
    kw = dict(init="zero", seed=11, score=LogitDifference(), metasteps=6, runs=4, lr=0.3, check_runs=50,
              dtype=F64)
    crafted = craft_metagradient(model, feats, 0, reference, dp, **kw)
    canary, info = crafted.canary, crafted.info
    assert crafted.scenario == "S6" and info["domain"] == "box"
    steps = info["metasteps_kept"]
    assert len(info["objective_per_metastep"]) == (6 if steps == 6 else steps + 2)
    assert torch.equal(canary.x[0], feats["train"].x[0]) and int(canary.y[0]) == int(feats["train"].y[0])
    assert int(canary.y[1]) == info["label_prime"] != info["label"]
    lo, hi = feats["train"].x.amin(0), feats["train"].x.amax(0) + 0.1    # the aux records reach + 0.1
    assert bool(((canary.x[1] >= lo - 1e-12) & (canary.x[1] <= hi + 1e-12)).all())
    # the check runs are the audit's engine on a seed of their own, recomputed here
    data = Records(feats["train"].x[1:], feats["train"].y[1:])
    start = InputCanary(torch.stack([canary.x[0]] * 2), canary.y, scored_by=LogitDifference())
    s4 = fresh_objective(model, data, start, dp, init="zero", seed=11, runs=50)["objective"]
    assert info["fresh_objective_start"] == s4
    kept = fresh_objective(model, data, canary, dp, init="zero", seed=11, runs=50)["objective"]
    assert kept == max(s4, info["fresh_objective_optimised"])
    assert (info["kept"] == "start") == torch.equal(canary.x[1], canary.x[0])
    assert torch.equal(craft_metagradient(model, feats, 0, reference, dp, **kw).canary.x, canary.x)


def test_crafting_options_are_checked():
    model, feats = MLP((5, 3)), _features()
    dp = DPConfig(steps=2, sampling_rate=0.5, noise_multiplier=1.0, clip=1.0, lr=0.5)
    reference = [torch.zeros(3, 5, dtype=F64), torch.zeros(3, dtype=F64)]
    for bad, key in [({"metasteps": 0}, "s6_metasteps"), ({"runs": 0}, "s6_runs"), ({"lr": -1.0}, "s6_lr"),
                     ({"objective_kind": "closed-form"}, "s6_objective")]:
        kw = {**dict(init="zero", seed=1, score=LogitDifference(), metasteps=1, runs=2, lr=0.1), **bad}
        with pytest.raises(ParameterError) as err:
            craft_metagradient(model, feats, 0, reference, dp, **kw)
        assert err.value.name == key


_PEAK_MEMORY = """
import resource, sys, torch
from subaudit.engine import MLP, DPConfig, LogitDifference, Records
from subaudit.scenarios.s6 import objective, pair_scores
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
data = Records(torch.rand(200, 256, generator=g), torch.randint(0, 26, (200,), generator=g))
dp = DPConfig(steps=int(sys.argv[1]), sampling_rate=0.25, noise_multiplier=1.0, clip=1.0, lr=0.01,
              optimizer="adam")
xp = data.x[1].clone().requires_grad_(True)
a, b = pair_scores(MLP((256, 128, 26)), data, data.x[0], 1, xp, 2, dp, seed=0, runs=range(16), init="random",
                   score=LogitDifference())
objective(a, b).backward()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_unrolled_memory_does_not_grow_with_the_steps():
    """Checkpointed segments bound memory by one segment plus the segment boundaries
    (measured from T = 10 to T = 50: 0.12 GB more; 1.9 GB more with non-re-entrant
    checkpoints, which kept every step)."""
    import subprocess
    import sys

    def peak_mb(steps: int) -> float:
        out = subprocess.run([sys.executable, "-c", _PEAK_MEMORY, str(steps)], check=True,
                             capture_output=True, text=True).stdout
        return int(out.split()[-1]) / 1024

    assert peak_mb(50) - peak_mb(10) < 500
