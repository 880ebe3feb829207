"""One empirical lower bound on epsilon: :class:`AuditEstimate`, what every estimator returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AuditEstimate"]


@dataclass(frozen=True)
class AuditEstimate:
    """One empirical lower bound on epsilon: common fields and the estimator's details.

    Attributes
    ----------
    epsilon:
        Reported lower bound on epsilon at ``delta`` (>= 0).
    estimator, alpha, delta:
        How it was computed (registry name, significance, target delta).
    n_positive, n_negative:
        Number of ``D`` (label 1) and ``D'`` (label 0) runs supplied in total.
    details:
        What the estimator adds, readable as attributes too (``est.mu``).  Both
        estimators give ``mu`` (the GDP lower bound behind epsilon; may be <= 0 or ``-inf``,
        epsilon is then 0) and, at the threshold that gave it or the best tail threshold,
        ``threshold`` (``paper``: predict ``D`` when ``score >= threshold``; ``auc``: when
        ``score > threshold``), ``fpr_ub`` and ``fnr_ub`` (upper confidence bounds there) and
        ``false_positives`` and ``false_negatives`` (counts there).  ``auc`` adds
        ``component`` (``"auc"`` or ``"tail"``: which part gave ``mu``), ``auc_strict`` (the
        AUC with ties counted 0), ``mu_auc`` and ``mu_tail``.
    """

    epsilon: float
    estimator: str
    alpha: float
    delta: float
    n_positive: int
    n_negative: int
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        clash = set(self.details) & {f.name for f in dataclasses.fields(self)}
        if clash:
            raise ValueError(f"details may not repeat the common fields: {sorted(clash)}")

    def __getattr__(self, name: str) -> Any:
        details = self.__dict__.get("details", {})
        if name in details:
            return details[name]
        raise AttributeError(f"{type(self).__name__} of estimator "
                             f"{self.__dict__.get('estimator')!r} has no {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dict: the common fields, then the details (floats may be ``-inf``)."""
        common = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name != "details"}
        return {**common, **self.details}
