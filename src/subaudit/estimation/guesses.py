"""How a one-run auditor guesses from per-canary scores, and which guess counts it tries.

A one-run audit (:mod:`subaudit.estimation.one_run`) turns per-canary scores into guesses: on
``r`` of its ``m`` canaries it guesses (a membership bit, or one of ``k`` values) and abstains on
the rest, and its bound counts the correct guesses.  A :class:`GuessRule` says which canaries
and what (the registry :data:`GUESS_RULES`: Steinke et al.'s top-bottom rule and its one-sided
form, Mahloujifar et al.'s magnitude rule for pairs, the top value of k-ary canaries); a
:class:`GuessSearch` which guess counts are tried, each a test of its own, and at what level
(Bonferroni over the grid: the best count is chosen after seeing the data).  Adding a rule is a
class and an entry.

May import: the base modules (``subaudit.validation``) only: the workflow's Snakefile imports
the one-run estimators while Snakemake parses.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from subaudit.validation import ParameterError, check_count

__all__ = [
    "DEFAULT_SEARCH",
    "GUESS_RULES",
    "GuessRule",
    "GuessSearch",
    "Magnitude",
    "TopBottom",
    "TopValue",
    "default_guess_grid",
    "default_guess_rule",
    "describe",
    "guesses_from_scores",
    "kary_guesses_from_scores",
    "magnitude_guesses_from_scores",
]


def describe(a: np.ndarray) -> str:
    """An array in an error message: its shape and type, not its values."""
    return f"<{a.dtype} array of shape {a.shape}>"


def _check_scores_1d(scores, inserted) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or s.size == 0 or not np.all(np.isfinite(s)):
        raise ParameterError("scores", describe(s), "a non-empty 1-D array of finite numbers")
    b = np.asarray(inserted)
    if b.shape != s.shape or b.dtype != bool:
        raise ParameterError("inserted", describe(b), f"a boolean array of shape {s.shape}")
    return s, b


def guesses_from_scores(scores, inserted, guesses: int, *, one_sided: bool = False) -> tuple[int, int]:
    """(guesses, correct) of the papers' rule: "in" for the highest scores, "out" for the lowest.

    Symmetric (Steinke et al.): ``ceil(guesses / 2)`` "in" guesses on the highest scores and
    ``floor(guesses / 2)`` "out" guesses on the lowest, abstaining on the rest; with
    ``one_sided`` all ``guesses`` are "in" guesses on the highest scores.  A higher score
    means "more likely included".  Ties are broken by canary index (never by ``inserted``).
    """
    s, b = _check_scores_1d(scores, inserted)
    m = s.size
    r = check_count(guesses, "guesses", 0)
    if r > m:
        raise ParameterError("guesses", guesses, f"an integer in [0, {m}] (the number of canaries)")
    order = np.argsort(-s, kind="stable")  # highest first, ties by index
    k_plus = r if one_sided else r - r // 2
    k_minus = r - k_plus
    correct = int(np.count_nonzero(b[order[:k_plus]]))
    if k_minus:
        correct += int(np.count_nonzero(~b[order[m - k_minus:]]))
    return r, correct


def magnitude_guesses_from_scores(scores, inserted, guesses: int) -> tuple[int, int]:
    """(guesses, correct) of the pair rule of Mahloujifar et al.: guess where ``|score|`` is largest.

    ``scores`` are signed statistics centred on 0 under no signal, e.g. the score of a pair's
    first record minus its second's: the auditor guesses "inserted" (``score > 0``) or not
    (``score <= 0``) on the ``guesses`` canaries with the largest ``|score|`` and abstains on
    the rest (ties by canary index, never by ``inserted``).
    """
    s, b = _check_scores_1d(scores, inserted)
    m = s.size
    r = check_count(guesses, "guesses", 0)
    if r > m:
        raise ParameterError("guesses", guesses, f"an integer in [0, {m}] (the number of canaries)")
    order = np.argsort(-np.abs(s), kind="stable")[:r]
    return r, int(np.count_nonzero((s[order] > 0) == b[order]))


def kary_guesses_from_scores(scores, truth, guesses: int) -> tuple[int, int]:
    """(guesses, correct) for ``k``-ary canaries: guess the top-scoring value, keep the most confident.

    ``scores`` has shape (m, k) (score of value j for canary i), ``truth`` the true value
    index per canary; the auditor guesses ``argmax_j scores[i, j]`` on the ``guesses``
    canaries whose top score beats their runner-up by the most (the margin: a canary whose
    best two values score alike is a coin flip between them, however high both score) and
    abstains on the rest (ties by index).
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim != 2 or s.shape[0] == 0 or s.shape[1] < 2 or not np.all(np.isfinite(s)):
        raise ParameterError("scores", describe(s), "an (m, k) array of finite numbers, m >= 1, k >= 2")
    m, k = s.shape
    t = np.asarray(truth)
    if t.shape != (m,) or not np.issubdtype(t.dtype, np.integer) or np.any((t < 0) | (t >= k)):
        raise ParameterError("truth", describe(t), f"an integer array of shape ({m},) with values in [0, {k})")
    r = check_count(guesses, "guesses", 0)
    if r > m:
        raise ParameterError("guesses", guesses, f"an integer in [0, {m}] (the number of canaries)")
    guess = np.argmax(s, axis=1)
    top2 = np.sort(s, axis=1)[:, -2:]
    order = np.argsort(-(top2[:, 1] - top2[:, 0]), kind="stable")[:r]
    return r, int(np.count_nonzero(guess[order] == t[order]))


def default_guess_grid(canaries: int) -> list[int]:
    """Guess counts searched by :func:`best_one_run_epsilon`: 1%, 2%, 5%, 10%, 20%, ..., 100% of m."""
    m = check_count(canaries, "canaries", 1)
    fractions = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
    return sorted({max(1, min(m, round(f * m))) for f in fractions})


# ---------------------------------------------------------------------------
# guess rules and the guess-count search: what an audit's tests are
# ---------------------------------------------------------------------------

class GuessRule(abc.ABC):
    """How an auditor guesses from per-canary scores: on which ``r`` canaries, and what.

    :meth:`counter` checks the scores and the truth once and returns ``m`` and the count of
    correct guesses as a function of ``r``, which the guess-count search (:class:`GuessSearch`)
    calls once per guess count."""

    #: Whether it reads value scores (m, k) of k-ary canaries and their true values (k > 2);
    #: otherwise scores (m,) and membership bits (k = 2).
    kary: ClassVar[bool] = False

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """What it guesses, in a sentence (the command line's help)."""

    @abc.abstractmethod
    def counter(self, scores, truth) -> tuple[int, Callable[[int], int]]:
        """``(m, r -> correct guesses)`` of ``scores`` against ``truth``, both validated once."""


@dataclass(frozen=True)
class TopBottom(GuessRule):
    """Steinke et al.'s rule (:func:`guesses_from_scores`): "in" on the highest scores, "out" on
    the lowest, half each; ``one_sided``: every guess "in" on the highest."""

    one_sided: bool = False

    @property
    def description(self) -> str:
        return ("'in' on the highest scores" if self.one_sided else
                "Steinke et al.: 'in' on the highest scores, 'out' on the lowest")

    def counter(self, scores, truth) -> tuple[int, Callable[[int], int]]:
        s, b = _check_scores_1d(scores, truth)
        return s.size, lambda r: guesses_from_scores(s, b, r, one_sided=self.one_sided)[1]


@dataclass(frozen=True)
class Magnitude(GuessRule):
    """Mahloujifar et al.'s rule for pairs (:func:`magnitude_guesses_from_scores`): the largest
    ``|score|``, guessed by sign (scores: pair differences)."""

    @property
    def description(self) -> str:
        return "Mahloujifar et al.'s pairs: the largest |score| guessed by sign, for pair score differences"

    def counter(self, scores, truth) -> tuple[int, Callable[[int], int]]:
        s, b = _check_scores_1d(scores, truth)
        return s.size, lambda r: magnitude_guesses_from_scores(s, b, r)[1]


@dataclass(frozen=True)
class TopValue(GuessRule):
    """The k-ary rule (:func:`kary_guesses_from_scores`): each canary's top-scoring value, on the
    canaries whose top value leads its runner-up the most."""

    kary: ClassVar[bool] = True

    @property
    def description(self) -> str:
        return "k-ary canaries: the top-scoring value where it leads the runner-up the most"

    def counter(self, scores, truth) -> tuple[int, Callable[[int], int]]:
        s = np.asarray(scores, dtype=float)
        try:
            kary_guesses_from_scores(s, truth, 0)  # validate once
        except ParameterError as err:
            raise ParameterError("inserted" if err.name == "truth" else err.name, err.value, err.allowed) from None
        return s.shape[0], lambda r: kary_guesses_from_scores(s, truth, r)[1]


#: Guess rules by name (``--rule``, a procedure's rule): ``"top-bottom"`` and ``"top"`` (one-sided)
#: by Steinke et al., ``"magnitude"`` by Mahloujifar et al. for pairs, ``"top-value"`` for k-ary
#: canaries.
GUESS_RULES: dict[str, GuessRule] = {
    "top-bottom": TopBottom(),
    "top": TopBottom(one_sided=True),
    "magnitude": Magnitude(),
    "top-value": TopValue(),
}


def default_guess_rule(k: int) -> str:
    """The rule of a game of ``k``-ary canaries when none is named: ``"top-bottom"`` (k = 2),
    ``"top-value"`` (k > 2)."""
    return "top-value" if check_count(k, "k", 2) > 2 else "top-bottom"


@dataclass(frozen=True)
class GuessSearch:
    """The guess counts an audit tries, each a test of its own, and the level of each.

    ``grid`` (None: :func:`default_guess_grid` of m) is searched after seeing the data, so the
    best count is a choice among ``len(grid)`` tests: each runs at ``alpha / len(grid)``
    (Bonferroni) and the best bound holds at confidence ``1 - alpha``. ``bonferroni=False``
    runs each at ``alpha``, as the papers' own experiments do: not corrected for the search, it
    can overstate epsilon (reproduction only)."""

    grid: Sequence[int] | None = None
    bonferroni: bool = True

    def counts(self, m: int) -> list[int]:
        """The guess counts tried with ``m`` canaries."""
        if self.grid is None:
            return default_guess_grid(m)
        rs = sorted({check_count(r, "grid", 1) for r in self.grid})
        if not rs or rs[-1] > m:
            raise ParameterError("grid", self.grid, f"a non-empty set of integers in [1, {m}]")
        return rs

    def level(self, alpha: float, tests: int) -> float:
        """Each test's significance level when ``tests`` guess counts are tried at ``alpha``."""
        return alpha / tests if self.bonferroni else alpha


#: The default search: :func:`default_guess_grid`, Bonferroni-corrected (valid).
DEFAULT_SEARCH = GuessSearch()
