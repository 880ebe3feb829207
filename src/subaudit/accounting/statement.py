"""A privacy statement for a DP-SGD training: epsilon under add/remove, substitute and
group privacy side by side, with the assumptions they rest on, in words a paper can quote.

Add/remove adjacency protects membership; substitute adjacency (replace one record) is
what protects a record's attributes and label when its presence is known. A training
that reports only eps_AR is, for attribute or label privacy, protected at eps_S, which
is up to twice as large (more at a fixed delta), and group privacy from the add/remove
guarantee (Theorem 4.1 of the paper) gives a looser bound on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from subaudit.accounting.accountant import Epsilon, epsilon_of_history
from subaudit.validation import AccountingRangeError

__all__ = ["ASSUMPTIONS", "Statement", "privacy_statement"]

#: What every epsilon of the statement assumes, in words.
ASSUMPTIONS = (
    "Poisson sampling: every record enters each step's batch independently with probability q "
    "(Opacus: poisson_sampling=True, the default of make_private); shuffled fixed-size batches "
    "are a different mechanism",
    "per-example gradients clipped to L2 norm C, summed, Gaussian noise of standard deviation "
    "sigma * C added (sigma is the noise multiplier, relative to C)",
    "add/remove: datasets differing by one record present or absent (sensitivity C)",
    "substitute: datasets of the same size differing in one record's value "
    "(sensitivity 2C: the replaced record's clipped gradient -C, the new one's +C)",
    "only the final noisy gradients (or what is computed from them) are released; "
    "the initialisation and every hyper-parameter are independent of the data",
)


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


@dataclass(frozen=True)
class Statement:
    """Epsilons of one training under the three adjacencies at one delta.

    ``group`` is None where group privacy needs an add/remove delta' the accountant cannot
    resolve (its epsilon is then very large); ``group_error`` says why."""

    delta: float
    add_remove: Epsilon
    substitute: Epsilon
    group: Epsilon | None
    group_error: str | None = None

    @property
    def segments(self) -> tuple[tuple[float, float, int], ...]:
        return self.substitute.segments

    @property
    def ratio(self) -> float:
        """eps_S / eps_AR at the same delta (upper bounds of both)."""
        return self.substitute.epsilon / self.add_remove.epsilon if self.add_remove.epsilon > 0 else math.inf

    def _setting(self) -> str:
        segs = self.segments
        if len(segs) == 1:
            s, q, t = segs[0]
            return f"noise multiplier sigma = {_fmt(s, 4)}, Poisson sampling rate q = {_fmt(q, 4)}, {t} steps"
        parts = "; ".join(f"sigma = {_fmt(s, 4)}, q = {_fmt(q, 4)} for {t} steps" for s, q, t in segs)
        return f"{len(segs)} stretches of changing settings ({parts}), {self.substitute.steps} steps in all"

    def sentence(self) -> str:
        """The statement as a paragraph to quote."""
        d = f"{self.delta:g}"
        text = (
            f"We train with DP-SGD using {self._setting()}, with per-example gradients clipped "
            f"to norm C and Gaussian noise of standard deviation sigma * C. Under add/remove "
            f"adjacency (one record added or removed) the training is "
            f"({_fmt(self.add_remove.epsilon)}, {d})-DP; under substitute adjacency (one record "
            f"replaced, sensitivity 2C), which protects the attributes and label of a record known "
            f"to be in the data, it is ({_fmt(self.substitute.epsilon)}, {d})-DP, "
            f"{_fmt(self.ratio)} times the add/remove epsilon."
        )
        if self.group is not None:
            text += (
                f" Group privacy from the add/remove guarantee would only give "
                f"({_fmt(self.group.epsilon)}, {d})-DP (2 eps_AR at delta' = "
                f"{_fmt(self.group.delta_add_remove)})."
            )
        text += (
            " Epsilons are upper bounds of the privacy-loss-distribution accountant "
            "(Gopi et al. 2021) under Poisson sampling, computed with subaudit."
        )
        return text

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python fields (the CLI's ``--json``)."""

        def bounds(e: Epsilon | None) -> dict[str, float] | None:
            if e is None:
                return None
            return {"lower": e.epsilon_lower, "estimate": e.epsilon_estimate, "upper": e.epsilon,
                    "eps_error": e.eps_error, "delta_error": e.delta_error}

        segs = self.segments
        single = len(segs) == 1
        return {
            "sigma": segs[0][0] if single else None,
            "q": segs[0][1] if single else None,
            "steps": self.substitute.steps,
            "segments": [list(s) for s in segs],
            "delta": self.delta,
            "epsilon_add_remove": self.add_remove.epsilon,
            "epsilon_substitute": self.substitute.epsilon,
            "epsilon_group": None if self.group is None else self.group.epsilon,
            "group_delta_prime": None if self.group is None else self.group.delta_add_remove,
            "group_epsilon_add_remove": None if self.group is None else self.group.epsilon_add_remove,
            "group_error": self.group_error,
            "ratio_substitute_to_add_remove": self.ratio,
            "bounds": {"add-remove": bounds(self.add_remove), "substitute": bounds(self.substitute),
                       "group": bounds(self.group)},
            "assumptions": list(ASSUMPTIONS),
            "statement": self.sentence(),
        }


def privacy_statement(history: Sequence[Sequence[float]], delta: float) -> Statement:
    """The statement for a training of (sigma, q, steps) segments (one for fixed settings)."""
    add_remove = epsilon_of_history(history, delta, "add-remove")
    substitute = epsilon_of_history(history, delta, "substitute")
    try:
        group, why = epsilon_of_history(history, delta, "group"), None
    except AccountingRangeError as err:
        group, why = None, str(err)
    return Statement(delta=add_remove.delta, add_remove=add_remove, substitute=substitute,
                     group=group, group_error=why)
