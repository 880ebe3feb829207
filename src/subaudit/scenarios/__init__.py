"""Canary scenarios: how the audits' canaries are made, one module per scenario.

Natural-data scenarios are a registry (:data:`SCENARIOS`): each module ``s2`` .. ``s7`` holds
its algorithm and its :class:`Scenario` entry (:mod:`~subaudit.scenarios.scenario`), which says
how its canary pair is crafted and what the workflow must know about it: its label and colour
in figures, whether it needs the reference model (and so the target record), whether it is
crafted per q (S2 replays the audit's own sampling), whether the target z is removed from the
shared records D (an input canary stands in for it), whether its canary is a record in input
space (sampled like a record, at the experiment's ``canary_sampling_rate`` when set) rather
than a gradient, whether it is crafted against the audit's calibrated noise (``noisy``: per q,
and its canary depends on the calibration's knobs too), whether its world D is the target z as
an input record and nothing else (``shares_target``: the z-world runs of such scenarios of one
setting are trained once and scored for each of their substitutes), whether Fig A1's utility
runs include it, and which crafting options of params.yaml it reads (from its experiment, else
from ``natural``; absent: None). Adding a scenario is a module here with a ``SCENARIO`` entry,
its line in :func:`_registry` and its tests.

Beside the registry:

* :mod:`~subaudit.scenarios.s1`: S1, the worst-case dataset canary in gradient space,
  simulated (no training);
* :mod:`~subaudit.scenarios.crafting`: what crafting shares (the reference model, per-example
  gradients, :class:`~subaudit.scenarios.crafting.Crafted`);
  :mod:`~subaudit.scenarios.domain`: where a crafted record may live (S6);
* :mod:`~subaudit.scenarios.one_run_canaries`: the one-run canary kinds (a registry of their own) and
  one-run audits of m canaries in one training;
* :mod:`~subaudit.scenarios.deep_canaries`: the canary kinds of one-run audits of deep networks (a
  registry of their own: random, mislabeled, metagradient, gradient);
  :mod:`~subaudit.scenarios.deep_cases`: the deep phase's cases and how the kinds share their
  trainings; and
  :mod:`~subaudit.scenarios.canary_optimisation`: metagradient canary optimisation through a
  proxy network's training;
* :mod:`~subaudit.scenarios.reconstruction`: the data-trap reconstruction.

Nothing here imports torch at import time: the workflow checks names against the registries
while it parses, and crafting imports what it needs when it runs.

May import: :mod:`subaudit.engine`, :mod:`subaudit.estimation`, :mod:`subaudit.accounting`,
:mod:`subaudit.data` and the base modules; not :mod:`subaudit.pipeline` or
:mod:`subaudit.reporting`.
"""

from __future__ import annotations

from subaudit.scenarios.scenario import CraftInputs, Scenario
from subaudit.validation import check_choice

__all__ = ["SCENARIOS", "CraftInputs", "Scenario", "get"]


def _registry() -> dict[str, Scenario]:
    from subaudit.scenarios import s2, s3, s4, s5, s6, s7

    return {m.SCENARIO.name: m.SCENARIO for m in (s2, s3, s4, s5, s6, s7)}


#: Registered scenarios by name.
SCENARIOS: dict[str, Scenario] = _registry()


def get(name: str) -> Scenario:
    """The registered scenario ``name`` (ParameterError naming the allowed ones)."""
    return SCENARIOS[check_choice(name, "scenario", SCENARIOS)]
