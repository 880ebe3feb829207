"""Reference epsilons from dp-accounting's PLD accountant (independent of subaudit), for the
tests of the accountant, the privacy statement, the CLI and the Opacus integration."""

from __future__ import annotations

from dp_accounting import NeighboringRelation as NR
from dp_accounting.pld import privacy_loss_distribution as pld_mod

RELATION = {"add-remove": NR.ADD_OR_REMOVE_ONE, "substitute": NR.REPLACE_ONE}


def pld_epsilon(
    sigma: float, q: float, steps: int, delta: float, adjacency: str, interval: float = 1e-3
) -> float:
    """dp-accounting PLD (pessimistic, connect-the-dots) epsilon of the Poisson-sampled Gaussian."""
    pld = pld_mod.from_gaussian_mechanism(
        standard_deviation=sigma,
        sensitivity=1.0,
        sampling_prob=q,
        value_discretization_interval=interval,
        neighboring_relation=RELATION[adjacency],
        pessimistic_estimate=True,
    )
    return float(pld.self_compose(steps).get_epsilon_for_delta(delta))


def pld_history_epsilon(history, delta: float, adjacency: str) -> float:
    """dp-accounting's PLD of the composed segments (pessimistic, interval 1e-3)."""
    total = None
    for sigma, q, steps in history:
        pld = pld_mod.from_gaussian_mechanism(
            standard_deviation=sigma, sensitivity=1.0, sampling_prob=q,
            value_discretization_interval=1e-3, neighboring_relation=RELATION[adjacency],
            pessimistic_estimate=True).self_compose(steps)
        total = pld if total is None else total.compose(pld)
    return float(total.get_epsilon_for_delta(delta))
