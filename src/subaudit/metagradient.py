"""S6: a substitute record optimised by gradient through the audit's own training.

After "Optimizing canaries for privacy auditing with metagradient descent" (shared
papers): the substitute ``z' = (x', y')`` is improved by gradient ascent on a
distinguishability objective of the audit's score, differentiated through the whole of
DP training as the engine defines it (:mod:`subaudit.engine`): Poisson masks (the target
or its substitute is record n), per-example clipping, Gaussian noise, division by the
expected batch size, SGD or Adam.  Both worlds (D with z, D' with z') are trained from the
same draws (common random numbers: the same initialisation, masks and noise), so the
objective's randomness is that of the audit and its gradient is low-variance.

* :func:`unroll` is one differentiable pass over T steps for a batch of runs, in segments
  recomputed in the backward pass (``torch.utils.checkpoint``): memory is one segment's
  activations plus the parameters at each segment boundary, not T steps'.  Each run's
  draws come from its :class:`subaudit.engine.RunStreams`, exactly as the engine draws
  them, so the unrolled parameters are the engine's (tested to 1e-12 in float64).
* :func:`objective` is the mean score gap between the worlds over their pooled standard
  deviation: a gap alone rewards blowing up the record's norm (and the score's spread).
* :class:`Domain` keeps x' where records live: within the training features' range per
  coordinate (steps in units of its standard deviation) for a head on features; for one-hot
  tabular data a softmax per attribute (or a sigmoid per binary feature), rounded back to
  a record at the end.
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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.checkpoint import checkpoint
from tqdm.auto import tqdm

from subaudit.canaries import Crafted, craft_mislabeled
from subaudit.engine import (
    _CLIP_EPS,
    _GATHER_MIN_WIDTH,
    MLP,
    DPConfig,
    InputCanary,
    Records,
    RunStreams,
    Score,
    draw_step,
    init_params,
    train,
)
from subaudit.seeding import derive_seed
from subaudit.validation import ParameterError, check_count, check_positive

__all__ = ["OBJECTIVES", "Domain", "craft_metagradient", "fresh_objective", "linearised_objective",
           "objective", "optimise_substitute", "unroll"]

#: How S6 measures distinguishability while optimising (params.yaml natural.s6_objective).
OBJECTIVES = ("unrolled", "linearised")


# --------------------------------------------------------------------------- the unrolled training


def _group_sum(params: Sequence[torch.Tensor], x: torch.Tensor, onehot: torch.Tensor,
               weight: torch.Tensor, clip: float, shared: bool) -> list[torch.Tensor]:
    """Sum of clipped per-example gradients of rows ``x`` (shared (N, d) or per run (R, N, d))
    weighted by ``weight`` (R, N): the engine's ``_clipped_sum``, differentiable in the
    parameters and in ``x``."""
    L = len(params) // 2
    acts, a = [x], x
    for layer in range(L):
        w, b = params[2 * layer], params[2 * layer + 1]
        if layer == 0 and shared:      # one product for all runs, as the engine's
            R, o, d = w.shape
            z = (a @ w.reshape(R * o, d).T).view(a.shape[0], R, o).transpose(0, 1) + b[:, None, :]
        else:
            z = torch.baddbmm(b[:, None, :], a, w.transpose(1, 2))
        if layer < L - 1:
            a = torch.tanh(z)
            acts.append(a)
    delta = torch.softmax(z, dim=-1) - onehot
    deltas = [delta]
    for layer in range(L - 1, 0, -1):
        delta = torch.bmm(delta, params[2 * layer]) * (1 - acts[layer] ** 2)
        deltas.append(delta)
    deltas.reverse()
    sq = (deltas[0] ** 2).sum(-1) * ((x ** 2).sum(-1) + 1)
    for layer in range(1, L):
        sq = sq + (deltas[layer] ** 2).sum(-1) * ((acts[layer] ** 2).sum(-1) + 1)
    factor = (clip / (sq.sqrt() + _CLIP_EPS)).clamp(max=1.0) * weight
    out = []
    for layer in range(L):
        wd = deltas[layer] * factor[..., None]
        if layer == 0 and shared:
            R, rows, o = wd.shape
            out.append((wd.transpose(0, 1).reshape(rows, R * o).T @ x).view(R, o, x.shape[1]))
        else:
            out.append(torch.bmm(wd.transpose(1, 2), acts[layer]))
        out.append(wd.sum(1))
    return out


def _step(params: list[torch.Tensor], moments: list[torch.Tensor], t: int, data: Records,
          onehot: torch.Tensor, xc: torch.Tensor, onehot_c: torch.Tensor, masks: torch.Tensor,
          noise: torch.Tensor, dp: DPConfig, scale: float) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """One DP step of every run (pure): ``masks`` (R, n + 1), the canary row ``xc`` (R, d) of
    each run as record n; returns the new parameters and optimiser moments (Adam: first
    moments then second moments)."""
    n, dt = data.x.shape[0], params[0].dtype
    base = masks[:, :n]
    counts = base.sum(1)
    width = int(counts.max())
    if width > n // (8 if params[0].shape[1] < _GATHER_MIN_WIDTH else 2):
        # One shared product over all records: for a wide first layer once most are sampled;
        # for a narrow one (a linear head) already from an eighth, where copying each run's
        # rows costs more than the extra rows (measured on the default image head, n = 500,
        # one thread: q = 0.25 crafts in 53 s shared against 84 s gathered; q = 0.0625 in
        # 31 s gathered against 51 s shared; the Tanh MLP at q = 0.25: 127 s gathered, 225 s
        # shared).
        g = _group_sum(params, data.x, onehot, base.to(dt), dp.clip, True)
    else:                         # each run's sampled records only, padded to the largest batch
        order = torch.argsort((~base).to(torch.int8), dim=1, stable=True)[:, :max(width, 1)]
        weight = (torch.arange(order.shape[1])[None, :] < counts[:, None]).to(dt)
        g = _group_sum(params, data.x[order], onehot[order], weight, dp.clip, False)
    gc = _group_sum(params, xc[:, None, :], onehot_c[:, None, :], masks[:, n:].to(dt), dp.clip, False)
    std = dp.noise_multiplier * dp.clip
    sizes = [math.prod(p.shape[1:]) for p in params]
    parts = torch.split(noise, sizes, dim=1)
    grads = [(a + b + std * e.reshape(a.shape)) * scale for a, b, e in zip(g, gc, parts)]
    if dp.optimizer == "sgd":
        return [p - dp.lr * gr for p, gr in zip(params, grads)], moments
    b1, b2 = dp.betas
    k = len(params)
    m = [b1 * mo + (1 - b1) * gr for mo, gr in zip(moments[:k], grads)]
    v = [b2 * mo + (1 - b2) * gr * gr for mo, gr in zip(moments[k:], grads)]
    c1, c2 = 1 - b1 ** (t + 1), math.sqrt(1 - b2 ** (t + 1))
    tiny = torch.finfo(dt).tiny        # sqrt'(0) is infinite: a coordinate no gradient reached
    new = [p - (dp.lr / c1) * mi / ((vi + tiny).sqrt() / c2 + dp.eps)
           for p, mi, vi in zip(params, m, v)]
    return new, m + v


def _rates(dp: DPConfig, n_records: int) -> float | torch.Tensor:
    """Poisson rate of each record (the canary, record n, at its own rate when it has one)."""
    q_canary = dp.sampling_rate if dp.canary_sampling_rate is None else dp.canary_sampling_rate
    if q_canary == dp.sampling_rate:
        return dp.sampling_rate
    rates = torch.full((n_records,), dp.sampling_rate)
    rates[n_records - 1:] = q_canary
    return rates


def unroll(model: MLP, data: Records, xc: torch.Tensor, yc: torch.Tensor, start: Sequence[torch.Tensor],
           dp: DPConfig, streams: Sequence[RunStreams], *, segment: int = 10) -> list[torch.Tensor]:
    """Final parameters (R, *shape) of R runs trained by DP-SGD/DP-Adam on ``data`` plus one
    canary record per run (``xc`` (R, d), ``yc`` (R,)), from ``start``; differentiable in
    ``start`` and ``xc``.

    ``streams`` holds B runs' random streams with R a multiple of B: run r draws from
    ``streams[r % B]``, so runs r, r + B, ... share their masks and noise (the two worlds of
    one crafting run).  The draws are the engine's (``rand(n + 1)`` then ``normal_`` of P
    per step, in the training dtype).  Steps run in checkpointed segments of ``segment``.
    """
    check_count(segment, "segment")
    B, R = len(streams), xc.shape[0]
    if R % B:
        raise ParameterError("canary rows", R, f"a multiple of the {B} streams")
    dt = start[0].dtype
    n_records = data.x.shape[0] + 1
    onehot = torch.nn.functional.one_hot(data.y.long(), model.num_classes).to(dt)
    onehot_c = torch.nn.functional.one_hot(yc.long(), model.num_classes).to(dt)
    data = Records(data.x.to(dt), data.y)
    scale = 1.0 / (dp.expected_batch_size or dp.sampling_rate * n_records)
    rates = _rates(dp, n_records)
    all_in = dp.sampling_rate == 1.0 and (dp.canary_sampling_rate in (None, 1.0))
    uniforms = None if all_in else torch.empty(B, n_records)
    noise = torch.empty(B, model.num_params, dtype=dt)
    k = len(start)

    def run_segment(t0: int, t1: int, states: list[tuple[torch.Tensor, torch.Tensor]],
                    xc: torch.Tensor, *flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        for st, (ms, ns) in zip(streams, states):    # the same draws when recomputed
            st.mask.set_state(ms)
            st.noise.set_state(ns)
        params, moments = list(flat[:k]), list(flat[k:])
        for t in range(t0, t1):
            draw_step(streams, uniforms, noise)
            masks = (torch.ones(B, n_records, dtype=torch.bool) if uniforms is None
                     else uniforms < rates).repeat(R // B, 1)
            params, moments = _step(params, moments, t, data, onehot, xc, onehot_c, masks,
                                    noise.repeat(R // B, 1), dp, scale)
        return (*params, *moments)

    moments = [torch.zeros_like(p) for p in start] * 2 if dp.optimizer == "adam" else []
    state: tuple[torch.Tensor, ...] = (*start, *moments)
    for t0 in range(0, dp.steps, segment):
        t1 = min(t0 + segment, dp.steps)
        states = [(st.mask.get_state(), st.noise.get_state()) for st in streams]
        if torch.is_grad_enabled() and (xc.requires_grad or any(t.requires_grad for t in state)):
            # Re-entrant: the non-re-entrant variant kept memory growing with T (measured on
            # the tabular MLP, 64 runs: 2.9 GB at T = 10, 5.8 GB at T = 40, 8.3 GB at T = 80,
            # whatever the segment; re-entrant 1.9 GB and 2.2 GB).  It needs .backward(),
            # not torch.autograd.grad.
            state = checkpoint(run_segment, t0, t1, states, xc, *state, use_reentrant=True)
        else:
            state = run_segment(t0, t1, states, xc, *state)
    return list(state[:k])


def objective(in_scores: torch.Tensor, out_scores: torch.Tensor) -> torch.Tensor:
    """Mean score gap (D minus D') over the pooled standard deviation of the two worlds."""
    gap = in_scores.mean() - out_scores.mean()
    pooled = 0.5 * (in_scores.var() + out_scores.var())
    return gap / (pooled + torch.finfo(pooled.dtype).tiny).sqrt()


# --------------------------------------------------------------------------- the record's domain


@dataclass(frozen=True)
class Domain:
    """Where x' may go, and its free parametrisation u: ``box`` (x' = u times each
    coordinate's standard deviation ``unit``, kept in [lo, hi]), ``one-hot`` (x' = softmax
    of u within each attribute's columns, rounded to the arg max) or ``binary``
    (x' = sigmoid(u), rounded at 1/2)."""

    kind: str
    lo: torch.Tensor | None = None
    hi: torch.Tensor | None = None
    unit: torch.Tensor | None = None
    groups: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, x: torch.Tensor) -> Domain:
        """The domain of records ``x`` (N, d): one-hot attributes when every record has exactly
        one 1 in each block of w columns (the smallest such w > 1; values never observed keep
        their column), binary when all values are 0/1, else the box of the features' range."""
        x = x.double()
        if not bool(((x == 0) | (x == 1)).all()):
            unit = x.std(0).clamp(min=torch.finfo(torch.float64).eps) if len(x) > 1 else torch.ones(x.shape[1])
            return cls("box", x.amin(0), x.amax(0), unit.double())
        n, d = x.shape
        for w in range(2, d + 1):
            if d % w == 0 and bool((x.reshape(n, d // w, w).sum(-1) == 1).all()):
                return cls("one-hot", groups=tuple((lo, lo + w) for lo in range(0, d, w)))
        return cls("binary")

    def free(self, x: torch.Tensor, logit: float = 2.0) -> torch.Tensor:
        """u with value about x (a record of the domain; relaxed at ``logit`` for 0/1 data).
        In the box u is x in units of each coordinate's standard deviation in the data, so
        a metastep's size is relative to the data's spread."""
        x = x.double()
        if self.kind == "box":
            return x / self.unit
        return logit * (2 * x - 1)

    def value(self, u: torch.Tensor) -> torch.Tensor:
        """The (relaxed) record of u."""
        if self.kind == "box":
            return u * self.unit
        if self.kind == "binary":
            return torch.sigmoid(u)
        return torch.cat([torch.softmax(u[lo:hi], 0) for lo, hi in self.groups])

    def project(self, u: torch.Tensor) -> None:
        """Keep u in the domain (in place): the box; nothing for the relaxations."""
        if self.kind == "box":
            with torch.no_grad():
                u.copy_(torch.maximum(torch.minimum(u, self.hi / self.unit), self.lo / self.unit))

    def round(self, x: torch.Tensor) -> torch.Tensor:
        """A record of the domain from a relaxed one."""
        if self.kind == "box":
            return x.clone()
        if self.kind == "binary":
            return (x > 0.5).to(x.dtype)
        out = torch.zeros_like(x)
        for lo, hi in self.groups:
            out[lo + int(torch.argmax(x[lo:hi]))] = 1.0
        return out


# --------------------------------------------------------------------------- optimisation


def _pair_scores(model: MLP, data: Records, x: torch.Tensor, y: int, xp: torch.Tensor, y_prime: int,
                 dp: DPConfig, streams: Sequence[RunStreams], init: str | Sequence[torch.Tensor],
                 score: Score, segment: int, dtype: torch.dtype = torch.float64
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Final scores of B runs in D and the same B runs (same draws) in D'."""
    B, dt = len(streams), dtype
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
        trajectory = _trajectory(model, data, dp, init=init, seed=craft_seed)
    bar = tqdm(range(metasteps), desc="S6 metasteps", unit="metastep", disable=not progress)
    for i in bar:
        xp = domain.value(u)
        if trajectory is None:
            streams = RunStreams.for_runs(craft_seed, range(i * runs, (i + 1) * runs))
            s_in, s_out = _pair_scores(model, data, x, y, xp, y_prime, dp, streams, init, score, segment,
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


# --------------------------------------------------------------------------- linearised objective


def _trajectory(model: MLP, data: Records, dp: DPConfig, *, init: str | Sequence[torch.Tensor],
                seed: int) -> list[list[torch.Tensor]]:
    """Parameters before each step of one noisy run on the data alone (the reference
    trajectory of the linearised objective)."""
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
    if len(model.sizes) != 2:
        raise ParameterError("s6_objective", "linearised", "a linear head (the unrolled objective otherwise)")
    d, K = model.sizes
    dt = torch.float64
    xp, x = xp.to(dt), x.to(dt)
    q = dp.sampling_rate if dp.canary_sampling_rate is None else dp.canary_sampling_rate
    b = dp.expected_batch_size or dp.sampling_rate * n_records
    total = torch.zeros(K, d + 1, dtype=dt)
    for params in trajectory[:-1]:
        w, bias = params[0].to(dt), params[1].to(dt)
        for sign, row, label in ((1.0, xp, y_prime), (-1.0, x, y)):
            delta = torch.softmax(w @ row + bias, 0) - torch.nn.functional.one_hot(torch.tensor(label), K)
            g = torch.outer(delta, torch.cat([row, row.new_ones(1)]))
            total = total + sign * g * torch.clamp(dp.clip / (g.norm() + _CLIP_EPS), max=1.0)
    # d score / d (W, b): e_y (x, 1) - e_y' (x', 1)
    grad_s = torch.zeros(K, d + 1, dtype=dt)
    grad_s = grad_s.index_put((torch.tensor(y),), torch.cat([x, x.new_ones(1)]), accumulate=True)
    grad_s = grad_s.index_put((torch.tensor(y_prime),), -torch.cat([xp, xp.new_ones(1)]), accumulate=True)
    gap = q * dp.lr / b * (grad_s * total).sum()
    spread = dp.lr * dp.noise_multiplier * dp.clip * math.sqrt(dp.steps) / b * grad_s.norm()
    return gap / spread


# --------------------------------------------------------------------------- checking


def fresh_objective(model: MLP, data: Records, canary: InputCanary, dp: DPConfig, *,
                    init: str | Sequence[torch.Tensor], seed: int, runs: int = 64) -> dict[str, Any]:
    """:func:`objective` of a pair on ``runs`` fresh engine runs per world (the audit's own
    training and score, independent runs, no common draws), with its parts."""
    check_count(runs, "runs")
    check_seed = derive_seed(seed, "S6", "check")
    bits = np.tile([1, 0], runs)
    result = train(model, data, canary, dp, seed=check_seed, runs=np.arange(2 * runs), bits=bits,
                   score_every=dp.steps, init=init, progress=False)
    s = torch.from_numpy(result.scores[-1])
    s_in, s_out = s[bits == 1], s[bits == 0]
    return {"objective": float(objective(s_in, s_out)), "gap": float(s_in.mean() - s_out.mean()),
            "std_in": float(s_in.std()), "std_out": float(s_out.std()), "runs_per_world": runs}


# --------------------------------------------------------------------------- S6


def craft_metagradient(model: MLP, features: dict[str, Any], target: int, reference: Sequence[torch.Tensor],
                       dp: DPConfig, *, init: str, seed: int, score: Score, metasteps: int, runs: int,
                       lr: float, objective_kind: str = "unrolled", check_runs: int = 64,
                       dtype: torch.dtype = torch.float32) -> Crafted:
    """S6: ``z = (x, y)`` the target, ``z' = (x', y')`` with y' S4's label (the least gradient
    cosine at x on the reference model) and x' optimised from x by
    :func:`optimise_substitute` in the training data's :class:`Domain`, at the audit's q, C,
    lr, T, optimiser and calibrated noise (``dp``).

    The info holds the objective per metastep, and on ``check_runs`` fresh engine runs per
    world (a seed of their own: a validation set, disjoint from crafting and from the
    audit) the objective of the starting pair (x, y') and of the optimised one; the
    optimised pair is kept only if it is not worse there, else the start (S4's pair)."""
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
