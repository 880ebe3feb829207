"""The public accountant: epsilon of DP-SGD under one adjacency, as an :class:`Epsilon`
record.

:func:`epsilon` (fixed settings), :func:`epsilon_of_history` (changing settings, an
Opacus accountant's ``history``; equal segments are merged first, composition commutes,
so a history of one setting is :func:`epsilon` exactly) and :func:`epsilon_over_steps`
(one discretisation for many step counts). Adjacencies are named by
:data:`ADJACENCIES`, or by an alias of :data:`ADJACENCY_ALIASES`
(:func:`canonical_adjacency`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from subaudit.accounting.composition import EpsilonCurve, composed_curve, composed_curves, worst_bounds
from subaudit.accounting.error_budget import REL_DELTA_ERROR, choose_eps_error, fit_eps_error
from subaudit.accounting.group import group_setup, solve_group_delta
from subaudit.accounting.prv import Segment, prv_kinds, total_steps
from subaudit.validation import (
    AccountingRangeError,
    ParameterError,
    check_count,
    check_noise_multiplier,
    check_probability,
    check_sampling_rate,
)

__all__ = [
    "ADJACENCIES",
    "ADJACENCY_ALIASES",
    "Epsilon",
    "canonical_adjacency",
    "epsilon",
    "epsilon_of_history",
    "epsilon_of_segments",
    "epsilon_over_steps",
    "epsilon_profile",
]

ADJACENCIES = ("add-remove", "substitute", "group")


@dataclass(frozen=True)
class Epsilon:
    """An (epsilon, delta) guarantee of DP-SGD under one adjacency.

    ``epsilon`` is the conservative upper bound (PRV error bounds included),
    ``epsilon_estimate`` the point estimate and ``epsilon_lower`` the lower bound. For
    ``"group"``, ``delta_add_remove`` is the delta' at which the add/remove guarantee
    ``epsilon_add_remove`` is taken (Theorem 4.1); None otherwise. ``eps_error`` and
    ``delta_error`` are the error budgets of the computation. ``segments`` is the
    composed history of (sigma, q, steps); ``sigma`` and ``q`` are NaN where it has
    several, ``steps`` is its total."""

    epsilon: float
    delta: float
    adjacency: str
    epsilon_lower: float
    epsilon_estimate: float
    delta_add_remove: float | None
    sigma: float = math.nan
    q: float = math.nan
    steps: int = 0
    eps_error: float = math.nan
    delta_error: float = math.nan
    epsilon_add_remove: float | None = None
    segments: tuple[Segment, ...] = ()


def _record(segments: tuple[Segment, ...], delta: float, adjacency: str, lower: float, estimate: float,
            upper: float, eps_error: float, delta_error: float, *, delta_add_remove: float | None = None,
            epsilon_add_remove: float | None = None) -> Epsilon:
    sigma, q = (segments[0][0], segments[0][1]) if len(segments) == 1 else (math.nan, math.nan)
    return Epsilon(epsilon=upper, delta=delta, adjacency=adjacency, epsilon_lower=lower,
                   epsilon_estimate=estimate, delta_add_remove=delta_add_remove, sigma=sigma, q=q,
                   steps=total_steps(segments), eps_error=eps_error, delta_error=delta_error,
                   epsilon_add_remove=epsilon_add_remove, segments=segments)


#: Other spellings of the adjacency names: dp-accounting's ``NeighboringRelation`` and
#: Flower's (matched ignoring case, with ``_`` read as ``-``).
ADJACENCY_ALIASES = {"add-or-remove-one": "add-remove", "replace-one": "substitute"}


def canonical_adjacency(name: str) -> str:
    """The adjacency ``name`` stands for ("add-remove", "substitute" or "group"), also from
    the spellings ``add-or-remove-one`` / ``ADD_OR_REMOVE_ONE`` and ``replace-one`` /
    ``REPLACE_ONE``; ParameterError naming every accepted spelling otherwise."""
    key = name.strip().lower().replace("_", "-") if isinstance(name, str) else name
    key = ADJACENCY_ALIASES.get(key, key)
    if key not in ADJACENCIES:
        raise ParameterError("adjacency", name, ", ".join([*ADJACENCIES, *ADJACENCY_ALIASES]))
    return key


def _check(sigma: float, q: float, delta: float, adjacency: str) -> tuple[float, float, float, str]:
    return (
        check_noise_multiplier(sigma),
        check_sampling_rate(q, "q"),
        check_probability(delta, "delta"),
        canonical_adjacency(adjacency),
    )


def _check_segments(history: Sequence[Sequence[float]]) -> tuple[Segment, ...]:
    """Validated segments with equal (sigma, q) merged (composition commutes), in order
    of first appearance."""
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence) or len(history) == 0:
        raise ParameterError("history", history, "a non-empty sequence of (sigma, q, steps)")
    steps_of: dict[tuple[float, float], int] = {}
    for i, seg in enumerate(history):
        if isinstance(seg, (str, bytes)) or not isinstance(seg, Sequence) or len(seg) != 3:
            raise ParameterError(f"history[{i}]", seg, "a triple (sigma, q, steps)")
        where = "" if len(history) == 1 else f"history[{i}] "  # a segment's value, when several
        key = (check_noise_multiplier(seg[0], where + "sigma"), check_sampling_rate(seg[1], where + "q"))
        steps_of[key] = steps_of.get(key, 0) + check_count(seg[2], where + "steps")
    return tuple((float(s), float(q), int(t)) for (s, q), t in steps_of.items())


def epsilon_of_segments(
    segments: tuple[Segment, ...], delta: float, adjacency: str, eps_error: float | None = None
) -> Epsilon:
    """:func:`epsilon_of_history` on checked inputs; ``eps_error`` skips the first pass."""
    kinds = prv_kinds(adjacency, segments)
    if adjacency == "group":
        eps_err, d_err = group_setup(segments, delta, eps_error)
        return _group_from(composed_curves(kinds, segments, eps_err, d_err), segments, delta, d_err)
    d_err = REL_DELTA_ERROR * delta
    if eps_error is None:
        eps_error = choose_eps_error(kinds, segments, delta, d_err)
    else:
        eps_error = fit_eps_error(kinds, segments, eps_error, d_err)
    return _result(composed_curves(kinds, segments, eps_error, d_err), segments, delta, adjacency, d_err)


def _result(curves: list[EpsilonCurve], segments: tuple[Segment, ...], delta: float,
            adjacency: str, d_err: float) -> Epsilon:
    """The Epsilon record of composed curves (add-remove or substitute) at ``delta``."""
    low, est, up = worst_bounds(curves, delta)
    return _record(segments, delta, adjacency, low, est, up, curves[0].eps_error, d_err,
                   epsilon_add_remove=up if adjacency == "add-remove" else None)


def _group_from(curves: list[EpsilonCurve], segments: tuple[Segment, ...], delta, d_err) -> Epsilon:
    """The group record (Theorem 4.1): 2 eps_AR(delta') for each bound of the add/remove
    ``curves``, delta' solved per bound."""
    lo = 1.0001 * max(c.min_delta for c in curves)
    d_up = solve_group_delta(lambda d: worst_bounds(curves, d)[2], delta, lo)
    d_est = solve_group_delta(lambda d: worst_bounds(curves, d)[1], delta, lo)
    d_low = solve_group_delta(lambda d: worst_bounds(curves, d)[0], delta, lo)
    e_up = worst_bounds(curves, d_up)[2]
    return _record(segments, delta, "group", 2.0 * worst_bounds(curves, d_low)[0],
                   2.0 * worst_bounds(curves, d_est)[1], 2.0 * e_up, 2.0 * curves[0].eps_error, d_err,
                   delta_add_remove=d_up, epsilon_add_remove=e_up)


def epsilon(sigma: float, q: float, steps: int, delta: float, adjacency: str) -> Epsilon:
    """Epsilon of ``steps`` DP-SGD steps with noise multiplier ``sigma`` and Poisson rate
    ``q`` at ``delta`` under ``adjacency`` ("add-remove", "substitute" or "group", or an
    alias of :data:`ADJACENCY_ALIASES`)."""
    sigma, q, delta, adjacency = _check(sigma, q, delta, adjacency)
    return epsilon_of_segments(((sigma, q, check_count(steps, "steps")),), delta, adjacency)


def epsilon_of_history(history: Sequence[Sequence[float]], delta: float, adjacency: str) -> Epsilon:
    """Epsilon of a training whose settings changed: ``history`` holds (sigma, q, steps)
    segments, the format of an Opacus accountant's ``history``. The segments' PRVs are
    composed on one discretisation (order does not matter; equal settings are merged),
    so a one-segment history is :func:`epsilon`."""
    segments = _check_segments(history)
    delta = check_probability(delta, "delta")
    return epsilon_of_segments(segments, delta, canonical_adjacency(adjacency))


def epsilon_over_steps(
    sigma: float, q: float, steps: Sequence[int], delta: float, adjacency: str
) -> list[Epsilon]:
    """Epsilon after each step count in ``steps`` (for step-wise figures), from one
    discretisation sized for max(steps). The mesh's eps error bound scales with
    sqrt(step count) (Gopi et al. Thm 5.5), so shorter runs get tighter bounds."""
    sigma, q, delta, adjacency = _check(sigma, q, delta, adjacency)
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence) or len(steps) == 0:
        raise ParameterError("steps", steps, "a non-empty sequence of integers >= 1")
    counts = [check_count(s, "steps") for s in steps]
    t_max = max(counts)
    longest = ((sigma, q, t_max),)
    kinds = prv_kinds(adjacency, longest)

    def curves(t: int, eps_err: float, d_err: float) -> list[EpsilonCurve]:
        return [composed_curve(k, sigma, q, t_max, eps_err, d_err, t) for k in kinds]

    if adjacency == "group":
        eps_err, d_err = group_setup(longest, delta)  # t_max has the smallest delta'
        return [_group_from(curves(t, eps_err, d_err), ((sigma, q, t),), delta, d_err) for t in counts]
    d_err = REL_DELTA_ERROR * delta
    eps_err = choose_eps_error(kinds, longest, delta, d_err)
    return [_result(curves(t, eps_err, d_err), ((sigma, q, t),), delta, adjacency, d_err) for t in counts]


def epsilon_profile(sigma: float, q: float, steps: int, deltas: Sequence[float], adjacency: str
                    ) -> list[tuple[float, float]]:
    """(epsilon, delta) pairs that DP-SGD satisfies, one per delta of ``deltas`` that one
    composition resolves: its privacy profile, from one discretisation sized for the smallest
    delta (epsilon is the conservative upper bound). A mechanism (eps_j, delta_j)-DP for every
    j has the trade-off curve ``max_j f_{eps_j, delta_j}``: what a one-run f-DP audit tests
    against DP-SGD's own curve. Deltas below what the composition resolves are left out."""
    sigma, q, _, adjacency = _check(sigma, q, min(deltas), adjacency)
    if adjacency == "group":
        raise ParameterError("adjacency", adjacency, "add-remove or substitute (a profile of one composition)")
    segments = ((sigma, q, check_count(steps, "steps")),)
    kinds = prv_kinds(adjacency, segments)
    wanted = sorted(check_probability(x, "deltas") for x in deltas)
    while wanted:  # sized for the smallest delta; one the composition cannot resolve is dropped
        d_err = REL_DELTA_ERROR * wanted[0]
        try:
            curves = composed_curves(kinds, segments, choose_eps_error(kinds, segments, wanted[0], d_err), d_err)
            break
        except AccountingRangeError:
            wanted.pop(0)
    pairs = []
    for d in wanted:
        try:
            pairs.append((worst_bounds(curves, d)[2], d))
        except AccountingRangeError:
            continue
    return pairs
