"""True epsilons of the S1 setting from dp-accounting's PLD accountant, independent of subaudit,
for the acceptance and validity tests of the estimators."""

from __future__ import annotations

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant

DELTA = 1e-5


def pld_epsilon(sigma: float, q: float, steps: int, delta: float = DELTA, substitute: bool = True) -> float:
    """True epsilon of the S1 setting from dp-accounting's PLD accountant (independent of subaudit)."""
    relation = (
        dp_accounting.NeighboringRelation.REPLACE_ONE
        if substitute
        else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    acc = pld_privacy_accountant.PLDAccountant(relation, value_discretization_interval=1e-4)
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
    )
    acc.compose(event)
    return float(acc.get_epsilon(delta))
