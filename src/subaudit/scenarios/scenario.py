"""What a natural-data scenario is (:class:`Scenario`, the entry each module ``s2`` .. ``s7``
registers in :data:`subaudit.scenarios.SCENARIOS`) and what its crafting may use
(:class:`CraftInputs`); apart from the registry, so that the scenario modules import their
types without importing the package that imports them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from subaudit.engine import MLP, DPConfig
    from subaudit.scenarios.crafting import Crafted

__all__ = ["CraftInputs", "Scenario"]


@dataclass(frozen=True)
class CraftInputs:
    """What a scenario's crafting may use.

    ``dp`` carries the audit's q, C, lr, T and optimiser for scenarios crafted per q, at
    noise 0, or at the calibrated noise multiplier for ``noisy`` scenarios; ``reference``
    and ``target`` are the reference model's final parameters and the target record's
    index for scenarios that need them; ``options`` are the scenario's crafting options
    from params.yaml.
    """

    model: MLP
    features: Mapping[str, Any]
    init: str
    seed: int
    dp: DPConfig | None = None
    reference: Sequence[torch.Tensor] | None = None
    target: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def target_record(self) -> tuple[torch.Tensor, int]:
        """The target z = (x, y) from the training records."""
        assert self.target is not None, "this scenario needs the reference model"
        train = self.features["train"]
        return train.x[self.target], int(train.y[self.target])


@dataclass(frozen=True)
class Scenario:
    """One canary scenario (paper Table 1 and beyond)."""

    name: str
    label: str
    color: str
    craft: Callable[[CraftInputs], Crafted]
    needs_reference: bool
    per_q: bool
    removes_target: bool
    input_canary: bool
    in_utility: bool = False
    options: tuple[str, ...] = ()
    noisy: bool = False
    shares_target: bool = False
    #: Whether its canary lets a linear head train in the span of what it sees
    #: (:mod:`subaudit.engine.span`; a trap canary does not), for the training jobs' requests.
    span: bool = True
    #: What an experiment must be for this scenario to audit it: ``(key, experiment,
    #: natural)`` -> None, or the (key, value, allowed values) of the first setting it cannot
    #: audit (the configuration check names them); None: any experiment.
    experiment_check: Callable[[str, Mapping[str, Any], Mapping[str, Any]], tuple[str, Any, str] | None] | None = None
    #: What crafting trains, for the ``craft`` job's requests (:mod:`subaudit.pipeline.costs`):
    #: ``(options, steps, records, sizes)`` -> (model-steps over all ``records`` of the model of
    #: layer ``sizes``, bytes of autograd graph held at once); None: crafting takes seconds.
    crafting_work: Callable[[Mapping[str, Any], int, int, Sequence[int]], tuple[float, float]] | None = None

    def check_experiment(self, key: str, experiment: Mapping[str, Any],
                         natural: Mapping[str, Any]) -> tuple[str, Any, str] | None:
        """The (key, value, allowed values) of the first setting of ``experiment`` (at ``key``,
        under the ``natural`` phase's settings) this scenario cannot audit; None if it can."""
        return None if self.experiment_check is None else self.experiment_check(key, experiment, natural)

    def __post_init__(self) -> None:
        assert self.per_q or not self.noisy, "a scenario crafted against the noise is crafted per q"
        assert not self.shares_target or (self.removes_target and self.input_canary), \
            "a scenario sharing the target's world puts z in D as an input record"

    @property
    def title(self) -> str:
        """Name and label, as figures and tables show it ('S2 crafted gradient')."""
        return f"{self.name} {self.label}"
