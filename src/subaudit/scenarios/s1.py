"""S1: worst-case dataset canary in gradient space (paper Section 3.1).

Model of the visible-state adversary's observation.  One coordinate of the
summed clipped gradient is observed; every record except the canary contributes
0, the canary contributes ``+C`` (dataset ``D``, record ``z``) or ``-C``
(dataset ``D'``, record ``z'``, substitute adjacency) whenever Poisson sampling
(rate ``q``) picks it, and DP-SGD adds ``N(0, sigma^2 C^2)`` noise every step.
After ``t`` steps the cumulative gradient is

    K ~ Binomial(t, q),   g_t = s * K * C + N(0, t sigma^2 C^2),

with ``s = +1`` for ``D`` and ``s = -1`` for ``D'``.  Under add/remove
adjacency ``D`` is as above and ``D'`` lacks the canary: ``g_t = N(0, t
sigma^2 C^2)``.

The adversary's score is the exact log-likelihood ratio
``log Pr(g_t | D) - log Pr(g_t | D')`` of the binomial mixtures (eq. 3):

    Pr(g | D) = sum_k Binom(k; t, q) N(g; k C, t sigma^2 C^2).

With ``u = g / C`` and ``v = t sigma^2`` the common factor
``exp(-g^2 / (2 t sigma^2 C^2))`` and the normal constants cancel, leaving

    score = LSE_k[w_k - k^2/(2v) + u k / v] - LSE_k[w_k - k^2/(2v) - u k / v]

(substitute; the second term is 0 for add/remove), ``w_k`` the binomial log-pmf.
Terms with ``w_k = -inf`` (all ``k < t`` when ``q = 1``) are dropped, which is
exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special, stats

from subaudit.validation import (
    ParameterError,
    check_choice,
    check_count,
    check_memory,
    check_noise_multiplier,
    check_positive,
    check_sampling_rate,
)

__all__ = ["ADJACENCIES", "S1Audit", "s1_score", "simulate_s1"]

#: Adjacencies S1 supports.
ADJACENCIES: tuple[str, ...] = ("substitute", "add-remove")

# Elements of one (runs x k) block in the log-sum-exp; a few temporaries of this
# size live at once (2**21 float64 = 16 MiB each).
_BLOCK_ELEMENTS = 2**21


def _mixture_terms(t: int, q: float, sigma: float) -> tuple[np.ndarray, np.ndarray, float]:
    """k values with finite binomial weight, base terms w_k - k^2/(2v), and v."""
    k = np.arange(t + 1, dtype=np.float64)
    w = stats.binom.logpmf(np.arange(t + 1), t, q)
    keep = np.isfinite(w)
    k = k[keep]
    v = t * sigma * sigma
    base = w[keep] - k * k / (2.0 * v)
    return k, base, v


def _score_unchecked(
    u: np.ndarray, t: int, q: float, sigma: float, adjacency: str
) -> np.ndarray:
    """Score for normalised gradients ``u = g / C`` (1-D float64)."""
    k, base, v = _mixture_terms(t, q, sigma)
    kv = k / v
    out = np.empty(u.shape[0], dtype=np.float64)
    rows = max(1, _BLOCK_ELEMENTS // max(1, k.shape[0]))
    for start in range(0, u.shape[0], rows):
        uu = u[start : start + rows, None]
        lin = uu * kv[None, :]
        pos = special.logsumexp(base[None, :] + lin, axis=1)
        if adjacency == "substitute":
            neg = special.logsumexp(base[None, :] - lin, axis=1)
            out[start : start + rows] = pos - neg
        else:
            out[start : start + rows] = pos
    return out


def s1_score(
    g: Any,
    t: int,
    q: float,
    sigma: float,
    clip: float = 1.0,
    adjacency: str = "substitute",
) -> np.ndarray | float:
    """Log-likelihood ratio ``log Pr(g_t | D) - log Pr(g_t | D')`` of S1 (eq. 3).

    Parameters
    ----------
    g:
        Cumulative canary-coordinate gradient(s) after ``t`` steps (any shape).
    t:
        Number of steps, >= 1.
    q:
        Poisson sampling rate in (0, 1].
    sigma:
        Noise multiplier (> 0); the per-step noise std is ``sigma * clip``.
    clip:
        Clipping norm ``C`` (> 0).
    adjacency:
        ``"substitute"`` (``D'`` contributes ``-C``) or ``"add-remove"``
        (``D'`` contributes nothing).

    Returns an array of the shape of ``g`` (a float for scalar ``g``).  It is
    computed stably by ``scipy.special.logsumexp`` over ``k = 0..t`` with
    binomial log-pmf weights, in blocks of runs to bound memory.
    """
    t = check_count(t, "steps")
    q = check_sampling_rate(q, "q")
    sigma = check_noise_multiplier(sigma)
    clip = check_positive(clip, "clip")
    adjacency = check_choice(adjacency, "adjacency", ADJACENCIES)
    arr = np.asarray(g, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("s1_score: g must be finite")
    flat = (arr / clip).reshape(-1)
    out = _score_unchecked(flat, t, q, sigma, adjacency).reshape(arr.shape)
    if out.ndim == 0:
        return float(out)
    return out


@dataclass
class S1Audit:
    """Result of :func:`simulate_s1`.

    Attributes
    ----------
    labels:
        ``(2R,)`` int8: the first ``R`` runs are on ``D`` (label 1), the last
        ``R`` on ``D'`` (label 0).
    steps:
        ``(n_checkpoints,)`` int64 step counts ``t_1 < ... < t_m``.
    scores:
        ``(n_checkpoints, 2R)`` float64; ``scores[i, r]`` is the S1 score of run
        ``r`` after ``steps[i]`` steps (same run's path at every checkpoint).
    gradients:
        ``(n_checkpoints, 2R)`` float64 cumulative gradients ``g_t`` when
        ``keep_gradients=True`` was passed, else ``None``.
    sigma, q, clip, adjacency, seed:
        The simulation's parameters.
    """

    labels: np.ndarray
    steps: np.ndarray
    scores: np.ndarray
    sigma: float
    q: float
    clip: float
    adjacency: str
    seed: int
    gradients: np.ndarray | None = None

    @property
    def runs_per_world(self) -> int:
        return int(self.labels.shape[0] // 2)


def _checkpoints(checkpoints: Sequence[int] | None, steps: int) -> np.ndarray:
    if checkpoints is None:
        return np.array([steps], dtype=np.int64)
    cps = [check_count(c, "checkpoints") for c in checkpoints]
    if len(cps) == 0:
        raise ParameterError("checkpoints", checkpoints, "a non-empty increasing list of step counts <= steps")
    arr = np.array(cps, dtype=np.int64)
    if np.any(np.diff(arr) <= 0) or arr[-1] > steps:
        raise ParameterError(
            "checkpoints", checkpoints, f"strictly increasing step counts in [1, {steps}]"
        )
    return arr


def simulate_s1(
    sigma: float,
    q: float,
    steps: int,
    runs_per_world: int,
    adjacency: str = "substitute",
    seed: int = 0,
    checkpoints: Sequence[int] | None = None,
    clip: float = 1.0,
    keep_gradients: bool = False,
) -> S1Audit:
    """Simulate ``R = runs_per_world`` S1 runs on ``D`` and ``R`` on ``D'``.

    Each run's cumulative gradient path is generated exactly in distribution
    at the checkpoints ``t_1 < t_2 < ... <= steps`` (default ``[steps]``) by
    independent increments: between ``t_{i-1}`` and ``t_i`` (``t_0 = 0``) the
    canary is drawn ``Binomial(t_i - t_{i-1}, q)`` times and the noise grows by
    ``N(0, (t_i - t_{i-1}) sigma^2 C^2)``.  Every checkpoint's score therefore
    comes from the same run's path.

    Randomness: one ``numpy.random.Generator`` (PCG64) seeded with
    ``numpy.random.SeedSequence(seed)``.  For each checkpoint in order it draws
    the ``2R`` binomial increments and then the ``2R`` standard-normal
    increments (runs ordered ``D`` first, then ``D'``; binomials are drawn for
    ``D'`` runs under add/remove too and multiplied by 0, so the same seed
    gives the same noise under both adjacencies).  Same arguments -> same
    numbers.

    Memory: O(R) for the paths plus ``(n_checkpoints, 2R)`` for the scores;
    the log-sum-exp over ``k`` is evaluated in blocks of runs (about 16 MiB a
    temporary), so ``R = 25,000`` at ``steps = 500`` takes about a second.

    Labels: first ``R`` entries 1 (``D``), last ``R`` entries 0 (``D'``).
    """
    sigma = check_noise_multiplier(sigma)
    q = check_sampling_rate(q, "q")
    steps = check_count(steps, "steps")
    runs = check_count(runs_per_world, "runs")
    adjacency = check_choice(adjacency, "adjacency", ADJACENCIES)
    clip = check_positive(clip, "clip")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError("seed", seed, "an integer >= 0")
    cps = _checkpoints(checkpoints, steps)
    # the paths (labels, signs, counts, noise, each draw), the scores (and gradients) and the
    # score's mixture terms (t + 1 of them when q < 1), refused before any is allocated
    per_run = 41 + 8 * cps.shape[0] * (2 if keep_gradients else 1)
    check_memory(runs, "runs", 2 * runs * per_run + (32 * (steps + 1) if q < 1.0 else 0) + 3 * 8 * _BLOCK_ELEMENTS)

    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))
    n = 2 * runs
    labels = np.zeros(n, dtype=np.int8)
    labels[:runs] = 1
    sign = np.empty(n, dtype=np.float64)
    sign[:runs] = 1.0
    sign[runs:] = -1.0 if adjacency == "substitute" else 0.0

    count = np.zeros(n, dtype=np.int64)  # canary draws so far
    noise = np.zeros(n, dtype=np.float64)  # cumulative N(0, t sigma^2) in units of C
    scores = np.empty((cps.shape[0], n), dtype=np.float64)
    grads = np.empty((cps.shape[0], n), dtype=np.float64) if keep_gradients else None
    prev = 0
    for i, t in enumerate(cps):
        dt = int(t) - prev
        count += rng.binomial(dt, q, size=n)
        noise += rng.standard_normal(n) * (sigma * np.sqrt(dt))
        prev = int(t)
        u = sign * count + noise  # g_t / C
        scores[i] = _score_unchecked(u, int(t), q, sigma, adjacency)
        if grads is not None:
            grads[i] = u * clip
    return S1Audit(
        labels=labels,
        steps=cps,
        scores=scores,
        sigma=sigma,
        q=q,
        clip=clip,
        adjacency=adjacency,
        seed=int(seed),
        gradients=grads,
    )
