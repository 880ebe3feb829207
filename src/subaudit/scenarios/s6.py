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
  engine's to 1e-12 in float64).  Only D' is unrolled (:func:`pair_scores`): D's training
  does not depend on x', only its score does, so the engine trains it without a graph
  (:func:`world_params`), which halves the backward pass.
* :func:`objective` is the mean score gap between the worlds over their pooled standard
  deviation: a gap alone rewards blowing up the record's norm (and the score's spread).
* :class:`subaudit.scenarios.domain.Domain` keeps x' where records live.
* :func:`linearised_objective` is the cheap first-order variant for a linear head: along
  one reference trajectory, the gap is the canary's expected clipped updates projected on
  the score's gradient and the spread is that of the noise; it ignores how the other
  records respond to the canary (and Adam's preconditioning).

Crafting draws its runs from a seed of its own (``derive_seed(seed, "S6", ...)``), so the
audit's runs stay independent of the canary.  Each metastep's fresh runs first judge the last
step: the record before it is scored on the same draws (:func:`engine_objective`), and a step
that did not raise the objective there is undone and ends the ascent
(:func:`optimise_substitute`).  The optimised pair is checked against its start on fresh runs
of another seed with the engine itself (:func:`fresh_objective`), and the better of the two is
kept (:func:`craft_metagradient`; a record that did not move is the start, checked once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from subaudit.scenarios.scenario import CraftInputs, Scenario
from subaudit.validation import ParameterError, check_count, check_positive

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import torch

    from subaudit.engine import MLP, DPConfig, InputCanary, Records, Score
    from subaudit.scenarios.crafting import Crafted
    from subaudit.scenarios.domain import Domain

__all__ = ["METASTEP_MODEL_STEPS", "OBJECTIVES", "SCENARIO", "craft_metagradient", "crafting_work",
           "engine_objective", "experiment_check", "fresh_objective", "linearised_objective", "objective",
           "optimise_substitute", "pair_scores", "reference_trajectory", "world_params"]


#: How S6 measures distinguishability while optimising (params.yaml natural.s6_objective).
OBJECTIVES = ("unrolled", "linearised")


def objective(in_scores: torch.Tensor, out_scores: torch.Tensor) -> torch.Tensor:
    """Mean score gap (D minus D') over the pooled standard deviation of the two worlds."""
    import torch

    gap = in_scores.mean() - out_scores.mean()
    pooled = 0.5 * (in_scores.var() + out_scores.var())
    return gap / (pooled + torch.finfo(pooled.dtype).tiny).sqrt()


def world_params(model: MLP, data: Records, x: torch.Tensor, y: int, dp: DPConfig, *, seed: int,
                 runs: Sequence[int], init: str | Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Final parameters (R, *shape) of runs ``runs`` of ``seed`` trained by the engine on
    ``data`` plus (x, y) as record n, in the data's dtype, without a graph: D's training does
    not depend on x' (only its score does), so the engine trains it and the backward pass
    covers D' alone (its numbers are the unrolled training's, :mod:`subaudit.engine.unroll`)."""
    import numpy as np
    import torch

    from subaudit.engine import InputCanary, train

    record = InputCanary(torch.stack([x, x]).to(data.x.dtype), torch.tensor([y, y]))
    result = train(model, data, record, dp, seed=seed, runs=np.asarray(runs), bits=np.ones(len(runs), np.int8),
                   score_every=dp.steps, init=init, dtype=data.x.dtype, keep_params=True, progress=False)
    assert result.params is not None
    return [torch.from_numpy(p) for p in result.params]


def pair_scores(model: MLP, data: Records, x: torch.Tensor, y: int, xp: torch.Tensor, y_prime: int,
                dp: DPConfig, *, seed: int, runs: Sequence[int], init: str | Sequence[torch.Tensor],
                score: Score, segment: int = 10, final_in: Sequence[torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Final scores of runs ``runs`` of ``seed`` in D and the same runs (same draws) in D',
    in the data's dtype: D' unrolled (:func:`subaudit.engine.unroll.unroll`), differentiable
    in x'; D trained by :func:`world_params` (``final_in`` where already trained)."""
    import torch

    from subaudit.engine import InputCanary, RunStreams, init_params
    from subaudit.engine.unroll import unroll

    B, dt = len(runs), data.x.dtype
    streams = RunStreams.for_runs(seed, runs)
    start = init_params(model, streams, init, dt)
    if final_in is None:
        final_in = world_params(model, data, x, y, dp, seed=seed, runs=runs, init=init)
    final_out = unroll(model, data, xp.to(dt)[None].expand(B, -1), torch.full((B,), y_prime), start, dp,
                       streams, segment=segment)
    canary = InputCanary(torch.stack([x.to(dt), xp.to(dt)]), torch.tensor([y, y_prime]), scored_by=score)
    scorer = score.bind(canary, start)
    return scorer(final_in)[:, 0], scorer(final_out)[:, 0]


def engine_objective(model: MLP, data: Records, x: torch.Tensor, y: int, xp: torch.Tensor, y_prime: int,
                     dp: DPConfig, *, seed: int, runs: Sequence[int], init: str | Sequence[torch.Tensor],
                     score: Score, final_in: Sequence[torch.Tensor]) -> float:
    """:func:`objective` of the pair (x, x') on the runs of :func:`pair_scores`, D' trained
    by the engine (no graph): to compare a record with another on the same draws."""
    import numpy as np
    import torch

    from subaudit.engine import InputCanary, RunStreams, init_params, train

    dt = data.x.dtype
    canary = InputCanary(torch.stack([x.to(dt), xp.to(dt)]), torch.tensor([y, y_prime]), scored_by=score)
    s_in = score.bind(canary, init_params(model, RunStreams.for_runs(seed, runs), init, dt))(final_in)[:, 0]
    result = train(model, data, canary, dp, seed=seed, runs=np.asarray(runs), bits=np.zeros(len(runs), np.int8),
                   score_every=dp.steps, init=init, dtype=dt, progress=False)
    return float(objective(s_in, torch.from_numpy(result.scores[-1])))


def optimise_substitute(model: MLP, data: Records, x: torch.Tensor, y: int, y_prime: int,
                        dp: DPConfig, *, init: str | Sequence[torch.Tensor], seed: int, score: Score,
                        domain: Domain, metasteps: int, runs: int, lr: float,
                        segment: int = 10, objective_kind: str = "unrolled",
                        progress: bool = True) -> tuple[torch.Tensor, list[float], int]:
    """x' after up to ``metasteps`` Adam steps of gradient ascent on :func:`objective` (or its
    :func:`linearised_objective`), each on ``runs`` fresh crafting runs per world (run indices
    ``i * runs ..`` of a crafting seed derived from ``seed``); starts at x' = x.

    Each metastep first compares its record with the one before the last step on its own
    fresh runs (the same draws, D' trained by the engine: :func:`engine_objective`; the
    linearised objective is the same on any runs); where the step did not raise the objective
    it is undone and the ascent ends: a step that fresh runs do not confirm is noise or an
    overshoot, and further steps from it would cost a whole unrolled pass each (the last
    step is judged by :func:`craft_metagradient`'s check alone).  Returns the rounded record
    (x itself where no step is kept), the objective of each metastep's record and the number
    of steps kept."""
    import torch
    from tqdm.auto import tqdm

    from subaudit.seeding import derive_seed

    check_count(metasteps, "s6_metasteps")
    check_count(runs, "s6_runs")
    check_positive(lr, "s6_lr")
    if objective_kind not in OBJECTIVES:
        raise ParameterError("s6_objective", objective_kind, "one of " + ", ".join(OBJECTIVES))
    craft_seed = derive_seed(seed, "S6", "metagradient")
    u = domain.free(x).requires_grad_(True)
    opt = torch.optim.Adam([u], lr=lr)
    history: list[float] = []
    previous = u.detach().clone()          # u before the last step
    kept = metasteps
    trajectory = None
    if objective_kind == "linearised":
        trajectory = reference_trajectory(model, data, dp, init=init, seed=craft_seed)
    bar = tqdm(range(metasteps), desc="S6 metasteps", unit="metastep", disable=not progress)
    for i in bar:
        xp = domain.value(u)
        before = None                      # the record before the last step, on these runs
        if trajectory is None:
            kw: dict[str, Any] = dict(seed=craft_seed, runs=range(i * runs, (i + 1) * runs), init=init)
            final_in = world_params(model, data, x, y, dp, **kw)
            value = objective(*pair_scores(model, data, x, y, xp, y_prime, dp, score=score, segment=segment,
                                           final_in=final_in, **kw))
            if i:
                before = engine_objective(model, data, x, y, domain.value(previous), y_prime, dp, score=score,
                                          final_in=final_in, **kw)
        else:
            value = linearised_objective(model, trajectory, x, y, xp, y_prime, dp, data.x.shape[0] + 1)
            before = history[-1] if history else None
        history.append(float(value.detach()))
        bar.set_postfix(objective=f"{history[-1]:.3f}")
        if before is not None and history[-1] <= before:
            u, kept = previous, i - 1
            break
        previous = u.detach().clone()
        opt.zero_grad()
        (-value).backward()
        opt.step()
        domain.project(u)
    return (domain.round(domain.value(u).detach()) if kept else x.clone()), history, kept


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

    The info holds the objective per metastep, the steps kept, and on ``check_runs`` fresh
    engine runs per world (a seed of their own: a validation set, disjoint from crafting and
    from the audit) the objective of the starting pair (x, y') and of the optimised one; the
    optimised pair is kept only if it is not worse there, else the start (S4's pair).  A
    record that rounds back to x is the start (its check is not run twice).  The
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
    xp, history, steps = optimise_substitute(
        model, Records(data.x.to(dtype), data.y), x.to(dtype), y, y_prime, dp, init=init, seed=seed,
        score=score, domain=domain, metasteps=metasteps, runs=runs, lr=lr, objective_kind=objective_kind)
    xp = xp.to(x.dtype)
    canary = InputCanary(torch.stack([x, xp]), torch.tensor([y, y_prime]), scored_by=score)
    start = InputCanary(torch.stack([x, x]), torch.tensor([y, y_prime]), scored_by=score)
    before = fresh_objective(model, data, start, dp, init=init, seed=seed, runs=check_runs)
    # A record that rounds back to x is the start: the same pair on the same check runs.
    changed = not torch.equal(xp, x)
    after = fresh_objective(model, data, canary, dp, init=init, seed=seed, runs=check_runs) if changed else before
    kept = "optimised" if changed and after["objective"] >= before["objective"] else "start"
    if kept == "start":            # the check runs are a validation set: never worse than S4
        canary, xp = start, x.clone()
    moved = (xp.double() - x.double())
    info = {"label": y, "label_prime": y_prime, "domain": domain.kind, "objective": objective_kind,
            "metasteps": metasteps, "metasteps_kept": steps, "runs_per_world": runs, "lr": lr,
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


#: Model-steps of one crafting run's step in a metastep: D' unrolled (forward, and backward
#: at about twice the forward), D by the engine, and the last step's check on the same draws
#: (D' and D): 6. Measured against the default run's seven S6 jobs (one thread of a 2-core
#: Intel Xeon VM, 2026-11-29: 3-61 CPU-s), the model with the engine's per-unit costs lies
#: 1.5-6.6x above their CPU time (most at small q: it counts every record of every step).
METASTEP_MODEL_STEPS = 6


def crafting_work(options: Mapping[str, Any], steps: int, records: int,
                  sizes: Sequence[int]) -> tuple[float, float]:
    """What S6's crafting trains (:attr:`Scenario.crafting_work`): ``s6_metasteps`` metasteps of
    ``s6_runs`` runs per world (:data:`METASTEP_MODEL_STEPS` each), or one reference trajectory
    (linearised), then two pairs checked on ``s6_check_runs`` fresh runs per world; the unrolled
    graph keeps every step's activations of every record and the parameters of each run."""
    runs, checks, metasteps = (int(options[k]) for k in ("s6_runs", "s6_check_runs", "s6_metasteps"))
    check = 4 * checks * steps
    parameters = sum((a + 1) * b for a, b in zip(sizes, sizes[1:]))
    if options["s6_objective"] == "linearised":
        return steps + check, 4.0 * steps * parameters
    graph = 4.0 * steps * runs * (records * sum(sizes[1:]) + parameters)
    return metasteps * METASTEP_MODEL_STEPS * runs * steps + check, graph


def experiment_check(key: str, experiment: Mapping[str, Any],
                     natural: Mapping[str, Any]) -> tuple[str, Any, str] | None:
    """The linearised objective is for linear heads (:attr:`Scenario.experiment_check`)."""
    if natural["s6_objective"] == "linearised" and experiment["hidden"]:
        return ("natural.s6_objective", natural["s6_objective"],
                f"unrolled while {key} audits S6 and has hidden layers (the linearised objective is for linear heads)")
    return None


SCENARIO = Scenario(name="S6", label="metagradient substitute", color="#bcbd22", craft=craft,
                    needs_reference=True, per_q=True, removes_target=True, input_canary=True, noisy=True,
                    shares_target=True,
                    options=("s6_metasteps", "s6_runs", "s6_lr", "s6_objective", "s6_check_runs", "input_score"),
                    crafting_work=crafting_work, experiment_check=experiment_check)
