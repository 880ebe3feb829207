"""One-run audit procedures: how a pair game's scores become guesses and a bound.

Both games of a one-run audit (:mod:`subaudit.integrations.audit`) give every canary slot
``i`` two records, ``z_i`` (member 0) and its twin ``z'_i`` (member 1), and a secret fair
bit ``b_i``: in the *membership* game ``z_i`` is inserted when ``b_i = 1`` and ``z'_i`` never
is (it is a held-out twin); in the *substitute* game ``z_i`` is inserted when ``b_i = 1``
and ``z'_i`` otherwise.  After training, each record gets a score (higher: more likely
inserted), so the scores form an ``(m, 2)`` array.  A procedure (:data:`PROCEDURES`, a
registry) turns that array into guesses of the bits and the guesses into a lower bound on
epsilon, valid at confidence ``1 - alpha`` for the adjacency the game changes (add/remove
in the membership game, substitute in the substitute game):

``"steinke"``
    Steinke, Nasr & Jagielski 2023 (their Algorithm 2, as the canary-optimisation paper
    runs it): in the membership game the statistic is ``z_i``'s score, in the substitute game
    the pair's score difference ``s(z_i) - s(z'_i)`` (both members are evidence there: one of
    them was trained on); "in" guesses on the highest, "out" guesses on the lowest; bound by
    their Theorem 5.2 (:func:`~subaudit.estimation.one_run.steinke_epsilon`).
``"mahloujifar"``
    Mahloujifar, Melis & Chaudhuri 2024 (the canary-optimisation paper's Algorithm 3): the
    statistic is the pair's score difference ``s(z_i) - s(z'_i)`` in both games; the pairs
    with the largest ``|difference|`` are guessed, the higher-scoring member taken as the
    inserted one; bound by their f-DP audit (:func:`~subaudit.estimation.one_run.fdp_epsilon`)
    of the trade-off curve of ``family``: by default f_{eps,delta}, valid for every mechanism;
    ``"gdp"`` is a test of "the mechanism is mu-GDP" (labelled so wherever printed) and
    ``"dpsgd"`` tests DP-SGD's own curve at the training's q and steps.

Either way the number of guesses is searched over
:func:`~subaudit.estimation.one_run.default_guess_grid` with a Bonferroni correction
(:func:`~subaudit.estimation.one_run.best_one_run_epsilon`), so the maximum is itself valid.
Adding a procedure is one :class:`Procedure` entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from subaudit.estimation.guesses import GUESS_RULES, GuessSearch
from subaudit.estimation.one_run import (
    FDP_FAMILIES,
    ONE_RUN_METHODS,
    DPSGDCurve,
    best_one_run_epsilon,
    one_run_falsifies,
)
from subaudit.validation import ParameterError, check_choice, check_count, check_probability

__all__ = ["ADJACENCY", "GAMES", "LEAST_CANARIES", "PROCEDURES", "Procedure", "ScoreSet", "bound_rows", "family_of",
           "least_canaries", "perfect_epsilon", "procedure_epsilon", "procedure_falsifies", "bound_label",
           "claim_prefix"]


#: The games of a one-run audit and the adjacency each one's bits change.
ADJACENCY: dict[str, str] = {"membership": "add-remove", "substitute": "substitute"}
GAMES: tuple[str, ...] = tuple(ADJACENCY)


@dataclass(frozen=True)
class Procedure:
    """A one-run procedure: the per-slot statistic of each game, the guess rule and the bound
    (``method``: a name of :data:`~subaudit.estimation.one_run.ONE_RUN_METHODS`, the same paper's)."""

    name: str
    label: str
    statistic: dict[str, Callable[[np.ndarray], np.ndarray]]
    rule: str
    method: str
    citation: str

    def __post_init__(self) -> None:
        check_choice(self.method, "method", ONE_RUN_METHODS)
        check_choice(self.rule, "rule", [n for n, g in GUESS_RULES.items() if not g.kary])   # of pair bits

    @property
    def kary(self) -> bool:
        """Whether it bounds k-ary slots (substitute slots hiding one of k values): the f-DP
        reconstruction bound does; Steinke et al.'s is for membership bits."""
        return self.method == "mahloujifar"


def _first(scores: np.ndarray) -> np.ndarray:
    return scores[:, 0]


def _difference(scores: np.ndarray) -> np.ndarray:
    return scores[:, 0] - scores[:, 1]


#: Procedures by name (params.yaml ``deep.procedures`` takes names from here).
PROCEDURES: dict[str, Procedure] = {p.name: p for p in (
    Procedure("steinke", "Steinke et al. 2023", {"membership": _first, "substitute": _difference}, "top-bottom",
              "steinke", "Steinke, Nasr & Jagielski 2023, arXiv 2305.08846"),
    Procedure("mahloujifar", "Mahloujifar et al. 2024", {"membership": _difference, "substitute": _difference},
              "magnitude", "mahloujifar", "Mahloujifar, Melis & Chaudhuri 2024, arXiv 2410.22235"),
)}

def bound_label(family: str, bonferroni: bool = True) -> str:
    """What a bound is, wherever it is printed: its family's label, and "uncorrected: not valid"
    for the papers' best guess count without the Bonferroni correction."""
    return FDP_FAMILIES[family].label + ("" if bonferroni else "; uncorrected guess count: not valid")


def claim_prefix(family: str) -> str:
    """How a bound is introduced wherever it is printed: a family that assumes the mechanism
    (a mu-GDP test, DP-SGD's own curve) says so."""
    return FDP_FAMILIES[family].prefix


def family_of(procedure: str, family: str) -> str:
    """The trade-off family ``procedure``'s bound tests: ``family`` for an f-DP procedure, ``"dp"``
    for the others."""
    p = PROCEDURES[check_choice(procedure, "procedure", PROCEDURES)]
    return check_choice(family, "family", FDP_FAMILIES) if p.method == "mahloujifar" else "dp"


def _check_pairs(scores, bits) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=float)
    if s.ndim != 2 or s.shape[1] != 2 or s.shape[0] == 0 or not np.all(np.isfinite(s)):
        raise ParameterError("scores", f"<array of shape {s.shape}>", "an (m, 2) array of finite scores")
    b = np.asarray(bits)
    if b.shape != (s.shape[0],) or not np.all((b == 0) | (b == 1)):
        raise ParameterError("bits", f"<array of shape {b.shape}>", f"an array of {s.shape[0]} zeros and ones")
    return s, b.astype(bool)


def _test_input(p: Procedure, game: str, scores, bits) -> tuple[np.ndarray, np.ndarray, int, str]:
    """What the procedure's estimator reads: (statistic, truth, k, guess rule). Pair scores (m, 2)
    give the procedure's statistic of ``game`` and the bits; value scores (m, k), k > 2, of
    k-ary substitute slots give themselves and the values (0 .. k - 1), guessed by the top
    value (``"top-value"``; f-DP procedures only)."""
    s = np.asarray(scores, dtype=float)
    if s.ndim == 2 and s.shape[1] > 2:
        if not p.kary:
            raise ParameterError("scores", f"<array of shape {s.shape}>", f"(m, 2) pair scores for {p.name} "
                                 "(k-ary value scores: " + ", ".join(q for q, e in PROCEDURES.items() if e.kary) + ")")
        if game != "substitute":
            raise ParameterError("scores", f"<array of shape {s.shape}>", "(m, 2) pair scores in the membership game")
        k = s.shape[1]
        b = np.asarray(bits)
        if b.shape != (s.shape[0],) or not np.issubdtype(b.dtype, np.integer) or np.any((b < 0) | (b >= k)):
            raise ParameterError("bits", f"<array of shape {b.shape}>", f"{s.shape[0]} values in [0, {k})")
        return s, b, k, "top-value"
    s, b = _check_pairs(scores, bits)
    return p.statistic[game](s), b, 2, p.rule


def _mechanism(family: str, game: str, history: Sequence[Sequence[float]] | None) -> DPSGDCurve | None:
    """The DP-SGD curve the ``"dpsgd"`` family tests: the training's one (sigma, q, steps) setting."""
    if family != "dpsgd":
        return None
    if history is None or len(history) != 1:
        raise ParameterError("history", history, "one (sigma, q, steps) setting for family 'dpsgd'")
    _, q, steps = history[0]
    return DPSGDCurve(float(q), int(steps), ADJACENCY[game])


def procedure_epsilon(procedure: str, scores, bits, delta: float, alpha: float = 0.05, *, game: str,
                      family: str = "dp", history: Sequence[Sequence[float]] | None = None,
                      bonferroni: bool = True) -> float:
    """Lower bound on epsilon at confidence ``1 - alpha`` from the pair scores ``(m, 2)`` of
    ``game`` and the secret bits ``(m,)`` (1: ``z_i`` was inserted), or from the value scores
    ``(m, k)`` of k-ary substitute slots and their values, by ``procedure``; an f-DP
    procedure tests the curve of ``family`` (``"dpsgd"``: the training's ``history`` of one
    (sigma, q, steps)).  ``bonferroni=False`` is the papers' uncorrected best guess count:
    not valid, for reproduction only."""
    p = PROCEDURES[check_choice(procedure, "procedure", PROCEDURES)]
    g = check_choice(game, "game", GAMES)
    fam = family_of(procedure, family)
    stat, truth, k, rule = _test_input(p, g, scores, bits)
    return best_one_run_epsilon(stat, truth, delta, alpha, p.method, k, rule=rule, family=fam,
                                mechanism=_mechanism(fam, g, history), search=GuessSearch(bonferroni=bonferroni))


def procedure_falsifies(procedure: str, scores, bits, epsilon: float, delta: float, alpha: float = 0.05, *,
                        game: str, family: str = "dp", bonferroni: bool = True) -> bool:
    """Whether :func:`procedure_epsilon` of the same arguments exceeds ``epsilon``: whether the
    audit falsifies "(``epsilon``, ``delta``)-DP" at confidence ``1 - alpha`` (one test per
    guess count, no root search: what a simulation of thousands of audits checks against a
    mechanism's true epsilon)."""
    p = PROCEDURES[check_choice(procedure, "procedure", PROCEDURES)]
    g = check_choice(game, "game", GAMES)
    fam = family_of(procedure, family)
    stat, truth, k, rule = _test_input(p, g, scores, bits)
    return one_run_falsifies(stat, truth, epsilon, delta, alpha, p.method, k, rule=rule, family=fam,
                             search=GuessSearch(bonferroni=bonferroni))


@lru_cache(maxsize=256)
def perfect_epsilon(procedure: str, canaries: int, delta: float, alpha: float = 0.05, *,
                    family: str = "dp", game: str = "substitute",
                    history: tuple[tuple[float, float, int], ...] | None = None, k: int = 2) -> float:
    """The bound that guessing every bit right gives with ``canaries`` slots: the most an
    audit of that size can ever report at confidence ``1 - alpha`` by ``procedure`` testing
    ``family``'s curve (for ``"dpsgd"``, DP-SGD's own curve at the q and steps of the training's
    ``history``, under ``game``'s adjacency: a cap of its own, larger than the (eps, delta)
    family's where DP-SGD's tail is thin); ``k > 2``: k-ary substitute slots."""
    m = check_count(canaries, "canaries")
    fam = family_of(procedure, family)
    kk = check_count(k, "k", 2)
    if kk > 2:
        values = np.arange(m) % kk
        return procedure_epsilon(procedure, np.eye(kk)[values], values, delta, alpha, game=game, family=fam,
                                 history=history)
    bits = np.arange(m) % 2
    perfect = np.stack([np.where(bits == 1, 1.0, -1.0), np.where(bits == 1, -1.0, 1.0)], axis=1)
    return procedure_epsilon(procedure, perfect, bits, delta, alpha, game=game, family=fam, history=history)


#: :func:`least_canaries` at the settings the shipped configurations check, (procedure, family,
#: k, alpha, delta) -> count. Every Snakemake run with a deep phase checks its configuration
#: first and asks for these; computing one imports SciPy's distributions, 0.7 s of the 1 s
#: such a check took (the searches themselves take milliseconds). A table, not a cache:
#: tests/estimation/test_procedures.py derives every entry again from :func:`perfect_epsilon`,
#: so a change to a bound that moves one fails there; other settings are searched.
LEAST_CANARIES: dict[tuple[str, str, int, float, float], int] = {
    ("steinke", "dp", 2, 0.05, 1e-5): 8,
    ("mahloujifar", "dp", 2, 0.05, 1e-5): 7,
    ("mahloujifar", "gdp", 2, 0.05, 1e-5): 7,
}


def least_canaries(procedure: str, delta: float, alpha: float = 0.05, *, family: str = "dp", k: int = 2,
                   limit: int = 4096) -> int:
    """The fewest canaries (up to ``limit``) whose perfect guesses give a positive bound.

    With fewer an audit reports 0 at confidence ``1 - alpha`` whatever the training. For
    ``"dpsgd"``, whose curve depends on the training, the (eps, delta) family's count: before
    training there is no q and T to test. ``k > 2``: k-ary substitute slots."""
    check_choice(procedure, "procedure", PROCEDURES)
    a = check_probability(alpha, "alpha")
    fam = "dp" if family == "dpsgd" else family
    known = LEAST_CANARIES.get((procedure, fam, k, a, delta))
    if known is not None and known <= limit:
        return known
    for m in range(1, limit + 1):
        if perfect_epsilon(procedure, m, delta, a, family=fam, k=k) > 0.0:
            return m
    raise ParameterError("alpha", alpha, f"a level that {limit} canaries can reach")


@dataclass(frozen=True)
class ScoreSet:
    """One set of canaries of an audit: its name (a kind), the score read, the scores (m, 2),
    the secret bits (m,), and whether it is white-box gradient canaries (whose final-iterate
    ceiling applies)."""

    canaries: str
    score: str
    scores: np.ndarray
    bits: np.ndarray
    white_box: bool = False


@lru_cache(maxsize=64)
def _accountant(segments: tuple[tuple[float, float, int], ...], delta: float) -> dict[str, float]:
    """epsilon of a training under both adjacencies; memoised: a figure's audits of one case
    share their history, and a PRV accounting takes a second."""
    from subaudit.accounting import epsilon_of_history

    return {adj: epsilon_of_history(list(segments), delta, adj).epsilon for adj in ADJACENCY.values()}


def bound_rows(sets: Sequence[ScoreSet], *, game: str, history: Sequence[Sequence[float]], delta: float,
               alpha: float, procedures: Sequence[str] = tuple(PROCEDURES), family: str = "dp",
               white_box_families: Sequence[str] = (), bonferroni: bool = True) -> list[dict[str, Any]]:
    """Rows of one audit: per (score set, procedure) the lower bound at confidence ``1 - alpha``
    (f-DP procedures: of ``family``'s curve, named in the row), the most its m canaries can
    show, the accountant's epsilon of the training (``history`` of (sigma, q, steps), Opacus'
    format) under both adjacencies and the game's (``reference``), and the final-iterate
    ceiling for white-box canaries of a one-setting training. The white-box sets' f-DP bounds
    are also tested against each curve of ``white_box_families`` (``"dpsgd"``: the training's
    own), a row each. ``bonferroni=False`` takes the papers' uncorrected best guess count
    (column ``bonferroni``): not valid, for reproduction."""
    from subaudit.estimation.ceilings import final_iterate_epsilon

    adjacency = ADJACENCY[check_choice(game, "game", GAMES)]
    segments = tuple((float(s), float(q), int(t)) for s, q, t in history)
    accountant = _accountant(segments, float(delta))
    ceiling = None
    if any(s.white_box for s in sets) and len(segments) == 1:
        sigma, q, steps = segments[0]
        ceiling = final_iterate_epsilon(sigma, q, int(steps), delta, adjacency)
    rows = []
    for s in sets:
        m = int(np.size(s.bits))
        k = int(np.shape(s.scores)[1])
        for p in procedures:
            if k > 2 and not PROCEDURES[p].kary:
                continue  # k-ary slots: the f-DP procedures only
            families = (family, *white_box_families) if s.white_box else (family,)
            for fam in dict.fromkeys(family_of(p, f) for f in families):
                rows.append({"canaries": s.canaries, "score": s.score, "procedure": p, "family": fam,
                             "bonferroni": bool(bonferroni), "m": m,
                             "epsilon": procedure_epsilon(p, s.scores, s.bits, delta, alpha, game=game, family=fam,
                                                          history=segments, bonferroni=bonferroni),
                             "perfect": perfect_epsilon(p, m, delta, alpha, family=fam, game=game,
                                                        history=segments if fam == "dpsgd" else None, k=k),
                             "adjacency": adjacency, "reference": accountant[adjacency],
                             "eps_add_remove": accountant["add-remove"], "eps_substitute": accountant["substitute"],
                             "ceiling": ceiling if s.white_box else None})
    return rows
