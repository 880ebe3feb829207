"""One-run substitute audits: m canary pairs in a single training run.

Each of ``m`` canaries is a pair ``(z_i, z'_i)``; a run holds exactly one member of each,
chosen by a fair coin (bit 1: ``z_i``), which is the substitute relation canary by canary.
Every canary is its own record with its own Poisson draw (:class:`subaudit.engine.Canary`
with ``count = m``).  After training, canary i's score (larger under ``z_i``) is a guess of
its bit, and the one-run estimators of :mod:`subaudit.estimation.one_run` turn the correct guesses
into a lower bound on epsilon: one training instead of the R of an R-run audit, at the
price of a weaker bound (the canaries share one run's noise and compete for its evidence).

Canary kinds (:data:`CANARY_KINDS`, a registry: a kind is a function and an entry):

``gradient``
    S2's pair on ``m`` distinct coordinates, the ``m`` least-updated parameters in
    noiseless training with the audit's own settings (Algorithm 2, extended to ``m``).
``label``
    ``m`` auxiliary records, each with its own label (``z``) or another label drawn
    uniformly (``z'``): label inference, the privacy substitute adjacency protects.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from subaudit.estimation.one_run import FDP_FAMILIES, ONE_RUN_METHODS, DPSGDCurve, best_one_run_epsilon
from subaudit.seeding import derive_seed
from subaudit.validation import ParameterError, check_choice, check_count

if TYPE_CHECKING:  # torch is imported when training, not while the workflow parses
    import torch

    from subaudit.engine import MLP, Canary, DPConfig, InputCanaries, OneHotCanaries, Records

__all__ = ["CANARY_KINDS", "CanaryKind", "OneRunScores", "gradient_canaries", "label_canaries",
           "one_run_audit", "one_run_estimates"]


def gradient_canaries(model: MLP, train_data: Records, aux: Records, dp: DPConfig, count: int, *,
                      init: str = "zero", seed: int = 0) -> OneHotCanaries:
    """``count`` one-hot gradient canaries on the least-updated coordinates (S2, Algorithm 2)."""
    import torch

    from subaudit.scenarios.s2 import least_updated_coordinates
    from subaudit.engine import OneHotCanaries

    index, _ = least_updated_coordinates(model, train_data, dp, count, init=init, seed=seed)
    return OneHotCanaries(torch.from_numpy(index.astype(np.int64)), dp.clip, model.num_params)


def label_canaries(model: MLP, train_data: Records, aux: Records, dp: DPConfig, count: int, *,
                   init: str = "zero", seed: int = 0) -> InputCanaries:
    """``count`` auxiliary records (a seeded choice) with their label or another one drawn
    uniformly among the other classes."""
    import torch

    from subaudit.engine import InputCanaries

    m = check_count(count, "canaries")
    if m > aux.x.shape[0]:
        raise ParameterError("canaries", count, f"at most the {aux.x.shape[0]} auxiliary records")
    rng = np.random.default_rng(derive_seed(seed, "label-canaries"))
    pick = np.sort(rng.choice(aux.x.shape[0], size=m, replace=False))
    y = aux.y[pick].numpy().astype(np.int64)
    other = (y + 1 + rng.integers(0, model.num_classes - 1, size=m)) % model.num_classes
    x = aux.x[pick]
    return InputCanaries(torch.stack([x, x], dim=1), torch.from_numpy(np.stack([y, other], axis=1)))


@dataclass(frozen=True)
class CanaryKind:
    """A kind of one-run canary: how ``count`` pairs are made for a setting, and the R-run
    scenario of the same canary family it is shown beside."""

    name: str
    make: Callable[..., Canary]
    compare_with: str
    description: str


#: One-run canary kinds by name (params.yaml ``one_run.kinds`` takes names from here).
CANARY_KINDS: dict[str, CanaryKind] = {k.name: k for k in (
    CanaryKind("gradient", gradient_canaries, "S2", "S2's +-C e_j pair on m least-updated coordinates"),
    CanaryKind("label", label_canaries, "S4", "m auxiliary records with their label or another one"),
)}


@dataclass(frozen=True)
class OneRunScores:
    """Final scores (R, m) and bits (R, m) of R independent one-run audits, and the
    training's wall time in seconds (all R runs)."""

    scores: np.ndarray
    bits: np.ndarray
    seconds: float


def one_run_audit(model: MLP, train_data: Records, canary: Canary, dp: DPConfig, *, seed: int,
                  repeats: int, init: str = "zero", device: str | torch.device = "cpu",
                  dtype: torch.dtype | None = None) -> OneRunScores:
    """Train ``repeats`` independent runs, each holding one member of every canary pair
    (bits from ``seed``: a fair coin per run and canary), and score every canary at the end
    (``dtype``: the engine's default, float32, unless given)."""
    import torch

    from subaudit.engine import train

    r = check_count(repeats, "repeats")
    m = canary.count
    bits = np.random.default_rng(derive_seed(seed, "one-run-bits")).integers(0, 2, size=(r, m))
    start = time.perf_counter()
    res = train(model, train_data, canary, dp, seed=seed, runs=np.arange(r), bits=bits,
                score_every=dp.steps, init=init, device=device, dtype=dtype or torch.float32,
                progress=False)
    seconds = time.perf_counter() - start
    return OneRunScores(scores=res.scores[-1].reshape(r, m), bits=bits, seconds=seconds)


def one_run_estimates(audit: OneRunScores, delta: float, alpha: float, methods: Sequence[str], *,
                      family: str = "dp", dp: DPConfig | None = None) -> list[dict[str, Any]]:
    """One record per (repeat, method): the one-run epsilon (Bonferroni over the guess
    grid, :func:`subaudit.estimation.one_run.best_one_run_epsilon`; ``"mahloujifar"`` tests the curve of
    ``family``, ``"dpsgd"`` that of the training ``dp`` under substitution), the family, the
    canaries and the share whose score sign guessed the bit."""
    check_choice(family, "one_run.family", FDP_FAMILIES)
    mechanism = None
    if family == "dpsgd":
        if dp is None:
            raise ParameterError("dp", None, "the training's DPConfig for family 'dpsgd'")
        mechanism = DPSGDCurve(dp.sampling_rate, dp.steps, "substitute")
    out = []
    for rep, (scores, bits) in enumerate(zip(audit.scores, audit.bits)):
        inserted = bits.astype(bool)
        accuracy = float(np.mean((scores > 0) == inserted))
        for method in methods:
            check_choice(method, "one_run.methods", ONE_RUN_METHODS)
            fam = family if method == "mahloujifar" else "dp"
            eps = best_one_run_epsilon(scores, inserted, delta, alpha, method, family=fam,
                                       mechanism=mechanism if fam == "dpsgd" else None)
            out.append({"repeat": rep, "method": method, "family": fam, "epsilon": eps, "canaries": int(bits.size),
                        "sign_accuracy": accuracy, "delta": delta, "alpha": alpha})
    return out
