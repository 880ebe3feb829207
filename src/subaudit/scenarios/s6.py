"""S6, metagradient-optimised substitute: a record optimised by gradient through the audit's
own training.

After "Optimizing canaries for privacy auditing with metagradient descent" (shared
papers): the substitute ``z' = (x', y')`` is improved by gradient ascent on a
distinguishability objective of the audit's score, differentiated through the whole of
DP training as the engine defines it (:mod:`subaudit.engine`): Poisson masks (the target
or its substitute is record n), per-example clipping, Gaussian noise, division by the
expected batch size, SGD or Adam.  Both worlds (D with z, D' with z') are trained from the
same draws (common random numbers: the same initialisation, masks and noise), so the
objective's randomness is that of the audit and its gradient is low-variance.

* :func:`subaudit.engine.unroll.unroll` is one differentiable pass over T steps for a batch
  of runs, through the engine's own DP-SGD operations, each run drawing from its
  :class:`subaudit.engine.RunStreams` as the engine does (final parameters equal to the
  engine's to 1e-12 in float64).
* :func:`objective` is the mean score gap between the worlds over their pooled standard
  deviation: a gap alone rewards blowing up the record's norm (and the score's spread).
* :class:`subaudit.scenarios.domain.Domain` keeps x' where records live.
* :func:`linearised_objective` is the cheap first-order variant for a linear head: along
  one reference trajectory, the gap is the canary's expected clipped updates projected on
  the score's gradient and the spread is that of the noise; it ignores how the other
  records respond to the canary (and Adam's preconditioning).

Crafting draws its runs from a seed of its own (``derive_seed(seed, "S6", ...)``), so the
audit's runs stay independent of the canary; the optimised pair is checked against its start
on fresh runs of another seed with the engine itself (:func:`fresh_objective`), and the
better of the two is kept (:func:`craft_metagradient`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from subaudit.scenarios import CraftInputs, Scenario
from subaudit.validation import ParameterError, check_count, check_positive

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch

    from subaudit.engine import MLP, DPConfig, InputCanary, Records, RunStreams, Score
    from subaudit.scenarios.crafting import Crafted
    from subaudit.scenarios.domain import Domain

__all__ = ["OBJECTIVES", "SCENARIO", "craft_metagradient", "fresh_objective", "linearised_objective",
           "objective", "optimise_substitute", "pair_scores", "reference_trajectory"]


#: How S6 measures distinguishability while optimising (params.yaml natural.s6_objective).
OBJECTIVES = ("unrolled", "linearised")


def objective(in_scores: torch.Tensor, out_scores: torch.Tensor) -> torch.Tensor:
    """Mean score gap (D minus D') over the pooled standard deviation of the two worlds."""
    import torch

    gap = in_scores.mean() - out_scores.mean()
    pooled = 0.5 * (in_scores.var() + out_scores.var())
    return gap / (pooled + torch.finfo(pooled.dtype).tiny).sqrt()


def pair_scores(model: MLP, data: Records, x: torch.Tensor, y: int, xp: torch.Tensor, y_prime: int,
                dp: DPConfig, streams: Sequence[RunStreams], init: str | Sequence[torch.Tensor],
                score: Score, segment: int, dtype: torch.dtype | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Final scores of B runs in D and the same B runs (same draws) in D' (``dtype``: float64
    unless given)."""
    import torch

    from subaudit.engine import InputCanary, init_params
    from subaudit.engine.unroll import unroll

    B, dt = len(streams), torch.float64 if dtype is None else dtype
    start = init_params(model, streams, init, dt)
    xc = torch.cat([x.to(dt)[None].expand(B, -1), xp.to(dt)[None].expand(B, -1)])
    yc = torch.tensor([y] * B + [y_prime] * B)
    final = unroll(model, data, xc, yc, [p.repeat(2, *([1] * (p.ndim - 1))) for p in start], dp,
                   streams, segment=segment)
    canary = InputCanary(torch.stack([x.to(dt), xp.to(dt)]), torch.tensor([y, y_prime]), scored_by=score)
    s = score.bind(canary, [p.repeat(2, *([1] * (p.ndim - 1))) for p in start])(final)[:, 0]
    return s[:B], s[B:]


def optimise_substitute(model: MLP, data: Records, x: torch.Tensor, y: int, y_prime: int,
                        dp: DPConfig, *, init: str | Sequence[torch.Tensor], seed: int, score: Score,
                        domain: Domain, metasteps: int, runs: int, lr: float,
                        segment: int = 10, objective_kind: str = "unrolled",
                        progress: bool = True) -> tuple[torch.Tensor, list[float]]:
    """x' after ``metasteps`` Adam steps of gradient ascent on :func:`objective` (or its
    :func:`linearised_objective`), each on ``runs`` fresh crafting runs per world (run indices
    ``i * runs ..`` of a crafting seed derived from ``seed``); starts at x' = x.  Returns the
    rounded record and the objective of each metastep."""
    import torch
    from tqdm.auto import tqdm

    from subaudit.engine import RunStreams
    from subaudit.seeding import derive_seed

    check_count(metasteps, "s6_metasteps")
    check_count(runs, "s6_runs")
    check_positive(lr, "s6_lr")
    if objective_kind not in OBJECTIVES:
        raise ParameterError("s6_objective", objective_kind, "one of " + ", ".join(OBJECTIVES))
    craft_seed = derive_seed(seed, "S6", "metagradient")
    u = domain.free(x).requires_grad_(True)
    opt = torch.optim.Adam([u], lr=lr)
    history = []
    trajectory = None
    if objective_kind == "linearised":
        trajectory = reference_trajectory(model, data, dp, init=init, seed=craft_seed)
    bar = tqdm(range(metasteps), desc="S6 metasteps", unit="metastep", disable=not progress)
    for i in bar:
        xp = domain.value(u)
        if trajectory is None:
            streams = RunStreams.for_runs(craft_seed, range(i * runs, (i + 1) * runs))
            s_in, s_out = pair_scores(model, data, x, y, xp, y_prime, dp, streams, init, score, segment,
                                         dtype=data.x.dtype)
            value = objective(s_in, s_out)
        else:
            value = linearised_objective(model, trajectory, x, y, xp, y_prime, dp, data.x.shape[0] + 1)
        opt.zero_grad()
        (-value).backward()
        opt.step()
        domain.project(u)
        history.append(float(value.detach()))
        bar.set_postfix(objective=f"{history[-1]:.3f}")
    return domain.round(domain.value(u).detach()), history


def reference_trajectory(model: MLP, data: Records, dp: DPConfig, *, init: str | Sequence[torch.Tensor],
                seed: int) -> list[list[torch.Tensor]]:
    """Parameters before each step of one noisy run on the data alone (the reference
    trajectory of the linearised objective)."""
    import torch

    from subaudit.engine import RunStreams, init_params, train

    out = [[p[0].clone() for p in init_params(model, [RunStreams(seed, 0)], init, torch.float64)]]

    def observe(_t: int, params: list[torch.Tensor], _g: list[torch.Tensor]) -> None:
        out.append([p[0].detach().clone().double() for p in params])

    train(model, data, None, dp, seed=seed, runs=[0], bits=[0], score_every=dp.steps, init=init,
          observe=observe, progress=False, dtype=torch.float64)
    return out


def linearised_objective(model: MLP, trajectory: Sequence[Sequence[torch.Tensor]], x: torch.Tensor,
                         y: int, xp: torch.Tensor, y_prime: int, dp: DPConfig, n_records: int
                         ) -> torch.Tensor:
    """First-order distinguishability of a linear head's pair along one trajectory: the
    expected difference of the canary's clipped updates, q lr / b sum_t (clip g_z' - clip
    g_z)(theta_t), on the gradient of the score ``f_y(x) - f_y'(x')`` at the final
    parameters, over the noise's standard deviation on that gradient, lr sigma C sqrt(T) / b
    times its norm (b the expected batch size)."""
    import math

    import torch

    from subaudit.engine.dpsgd import CLIP_EPS

    if len(model.sizes) != 2:
        raise ParameterError("s6_objective", "linearised", "a linear head (the unrolled objective otherwise)")
    d, K = model.sizes
    dt = torch.float64
    xp, x = xp.to(dt), x.to(dt)
    q = dp.canary_rate
    b = dp.expected_batch(n_records)
    total = torch.zeros(K, d + 1, dtype=dt)
    for params in trajectory[:-1]:
        w, bias = params[0].to(dt), params[1].to(dt)
        for sign, row, label in ((1.0, xp, y_prime), (-1.0, x, y)):
            delta = torch.softmax(w @ row + bias, 0) - torch.nn.functional.one_hot(torch.tensor(label), K)
            g = torch.outer(delta, torch.cat([row, row.new_ones(1)]))
            total = total + sign * g * torch.clamp(dp.clip / (g.norm() + CLIP_EPS), max=1.0)
    # d score / d (W, b): e_y (x, 1) - e_y' (x', 1)
    grad_s = torch.zeros(K, d + 1, dtype=dt)
    grad_s = grad_s.index_put((torch.tensor(y),), torch.cat([x, x.new_ones(1)]), accumulate=True)
    grad_s = grad_s.index_put((torch.tensor(y_prime),), -torch.cat([xp, xp.new_ones(1)]), accumulate=True)
    gap = q * dp.lr / b * (grad_s * total).sum()
    spread = dp.lr * dp.noise_std * math.sqrt(dp.steps) / b * grad_s.norm()
    return gap / spread


def fresh_objective(model: MLP, data: Records, canary: InputCanary, dp: DPConfig, *,
                    init: str | Sequence[torch.Tensor], seed: int, runs: int = 64) -> dict[str, Any]:
    """:func:`objective` of a pair on ``runs`` fresh engine runs per world (the audit's own
    training and score, independent runs, no common draws), with its parts."""
    import numpy as np
    import torch

    from subaudit.engine import train
    from subaudit.seeding import derive_seed

    check_count(runs, "runs")
    check_seed = derive_seed(seed, "S6", "check")
    bits = np.tile([1, 0], runs)
    result = train(model, data, canary, dp, seed=check_seed, runs=np.arange(2 * runs), bits=bits,
                   score_every=dp.steps, init=init, progress=False)
    s = torch.from_numpy(result.scores[-1])
    s_in, s_out = s[bits == 1], s[bits == 0]
    return {"objective": float(objective(s_in, s_out)), "gap": float(s_in.mean() - s_out.mean()),
            "std_in": float(s_in.std()), "std_out": float(s_out.std()), "runs_per_world": runs}


def craft_metagradient(model: MLP, features: dict[str, Any], target: int, reference: Sequence[torch.Tensor],
                       dp: DPConfig, *, init: str, seed: int, score: Score, metasteps: int, runs: int,
                       lr: float, objective_kind: str = "unrolled", check_runs: int = 64,
                       dtype: torch.dtype | None = None) -> Crafted:
    """S6: ``z = (x, y)`` the target, ``z' = (x', y')`` with y' S4's label (the least gradient
    cosine at x on the reference model) and x' optimised from x by
    :func:`optimise_substitute` in the training data's :class:`Domain`, at the audit's q, C,
    lr, T, optimiser and calibrated noise (``dp``).

    The info holds the objective per metastep, and on ``check_runs`` fresh engine runs per
    world (a seed of their own: a validation set, disjoint from crafting and from the
    audit) the objective of the starting pair (x, y') and of the optimised one; the
    optimised pair is kept only if it is not worse there, else the start (S4's pair).  The
    optimisation trains in ``dtype`` (float32 unless given)."""
    import numpy as np
    import torch

    from subaudit.engine import InputCanary, Records
    from subaudit.scenarios.crafting import Crafted
    from subaudit.scenarios.domain import Domain
    from subaudit.scenarios.s4 import craft_mislabeled

    dtype = torch.float32 if dtype is None else dtype
    train_records = features["train"]
    x, y = train_records.x[target], int(train_records.y[target])
    keep = torch.ones(train_records.x.shape[0], dtype=torch.bool)
    keep[target] = False
    data = Records(train_records.x[keep], train_records.y[keep])
    y_prime = int(craft_mislabeled(model, reference, x, y).info["label_prime"])
    pool = [train_records.x] + ([features["aux"].x] if features.get("aux") is not None else [])
    domain = Domain.of(torch.cat(pool))
    xp, history = optimise_substitute(
        model, Records(data.x.to(dtype), data.y), x.to(dtype), y, y_prime, dp, init=init, seed=seed,
        score=score, domain=domain, metasteps=metasteps, runs=runs, lr=lr, objective_kind=objective_kind)
    xp = xp.to(x.dtype)
    canary = InputCanary(torch.stack([x, xp]), torch.tensor([y, y_prime]), scored_by=score)
    start = InputCanary(torch.stack([x, x]), torch.tensor([y, y_prime]), scored_by=score)
    before = fresh_objective(model, data, start, dp, init=init, seed=seed, runs=check_runs)
    after = fresh_objective(model, data, canary, dp, init=init, seed=seed, runs=check_runs)
    kept = "optimised" if after["objective"] >= before["objective"] else "start"
    if kept == "start":            # the check runs are a validation set: never worse than S4
        canary, xp = start, x.clone()
    moved = (xp.double() - x.double())
    info = {"label": y, "label_prime": y_prime, "domain": domain.kind, "objective": objective_kind,
            "metasteps": metasteps, "runs_per_world": runs, "lr": lr,
            "objective_per_metastep": np.round(history, 6).tolist(),
            "fresh_objective_start": before["objective"], "fresh_objective_optimised": after["objective"],
            "kept": kept, "fresh_gap_optimised": after["gap"], "fresh_std_in_optimised": after["std_in"],
            "fresh_std_out_optimised": after["std_out"], "fresh_runs_per_world": check_runs,
            "distance": float(moved.norm()), "norm_x": float(x.double().norm()),
            "norm_x_prime": float(xp.double().norm())}
    if domain.kind != "box":
        info["features_changed"] = int((moved != 0).sum())
    return Crafted("S6", canary, info)


def craft(inputs: CraftInputs) -> Crafted:
    from subaudit.engine import INPUT_SCORES

    assert inputs.dp is not None and inputs.target is not None, "S6 is crafted per q from the target"
    o = inputs.options
    return craft_metagradient(inputs.model, inputs.features, inputs.target, inputs.reference, inputs.dp,
                              init=inputs.init, seed=inputs.seed, score=INPUT_SCORES[o["input_score"]](),
                              metasteps=o["s6_metasteps"], runs=o["s6_runs"], lr=o["s6_lr"],
                              objective_kind=o["s6_objective"], check_runs=o["s6_check_runs"])


SCENARIO = Scenario(name="S6", label="metagradient substitute", color="#bcbd22", craft=craft,
                    needs_reference=True, per_q=True, removes_target=True, input_canary=True, noisy=True,
                    options=("s6_metasteps", "s6_runs", "s6_lr", "s6_objective", "s6_check_runs", "input_score"))
