"""Opacus accountants computed by subaudit: substitute (replace-one) and add/remove.

Importing this module registers them in Opacus' accountant registry, so that

    import subaudit.opacus
    engine = PrivacyEngine(accountant="substitute")

accounts a training under substitute adjacency, and ``accountant="add-remove"`` under
add/remove with subaudit's PRV accountant (both directions composed, the domain sized
for the left tail too; see :mod:`subaudit.accounting`). They behave like Opacus' own
accountants: ``history`` of (noise multiplier, sample rate, steps), ``step()``,
``get_epsilon(delta)``, ``mechanism()``, ``len()`` (entries of ``history``, as Opacus'
accountants count), ``state_dict()`` / ``load_state_dict()`` with Opacus' keys, and
``opacus.accountants.utils.get_noise_multiplier`` (hence ``make_private_with_epsilon``)
calibrates through them. A history whose sigma or q changed is composed exactly.

The guarantee assumes Poisson sampling; attaching to an optimiser whose data loader is
not Poisson-sampled (``make_private(poisson_sampling=False)``) warns.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, ClassVar

from opacus.accountants import IAccountant
from opacus.accountants.registry import create_accountant, register_accountant
from opacus.utils.uniform_sampler import (
    DistributedUniformWithReplacementSampler,
    UniformWithReplacementSampler,
)

from subaudit.accounting import Epsilon, epsilon_of_history
from subaudit.accounting.statement import Statement, privacy_statement

__all__ = ["AddRemoveAccountant", "NotPoissonWarning", "SubstituteAccountant", "is_poisson",
           "register"]


class NotPoissonWarning(UserWarning):
    """The data loader does not sample batches by Poisson sampling."""


def is_poisson(data_loader: Any) -> bool:
    """Whether ``data_loader`` draws Poisson-sampled batches (Opacus' ``DPDataLoader``)."""
    sampler = getattr(data_loader, "batch_sampler", None)
    return isinstance(sampler, (UniformWithReplacementSampler, DistributedUniformWithReplacementSampler))


def _caller_data_loader() -> Any:
    """The ``data_loader`` of the ``PrivacyEngine.make_private`` call that attaches the
    accountant (Opacus asks for the hook there, after preparing the loader); None when
    the hook is requested from elsewhere."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == "make_private" and "data_loader" in frame.f_locals:
                return frame.f_locals["data_loader"]
            frame = frame.f_back
        return None
    finally:
        del frame


class _SubauditAccountant(IAccountant):
    """Shared parts; a subclass names its adjacency and its Opacus mechanism name."""

    adjacency: ClassVar[str]
    name: ClassVar[str]

    def __init__(self) -> None:
        self.history: list[tuple[float, float, int]] = []

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """One optimiser step (extends the last history entry when the settings repeat)."""
        if self.history and self.history[-1][:2] == (noise_multiplier, sample_rate):
            sigma, q, steps = self.history[-1]
            self.history[-1] = (sigma, q, steps + 1)
        else:
            self.history.append((noise_multiplier, sample_rate, 1))

    def privacy(self, delta: float) -> Epsilon:
        """The full record (bounds, error budgets, segments) behind :meth:`get_epsilon`."""
        return epsilon_of_history(self.history, delta, self.adjacency)

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """Epsilon spent so far at ``delta``: the accountant's upper bound (0 before any
        step). Extra arguments of other accountants (``eps_error``, ...) are ignored: the
        accuracy is chosen relative to epsilon (:mod:`subaudit.accounting`)."""
        return 0.0 if not self.history else self.privacy(delta).epsilon

    def statement(self, delta: float) -> Statement:
        """Add/remove, substitute and group epsilons of the history, side by side."""
        return privacy_statement(self.history, delta)

    @property
    def steps(self) -> int:
        """Optimiser steps accounted so far."""
        return sum(int(t) for _, _, t in self.history)

    def __len__(self) -> int:
        return len(self.history)

    @classmethod
    def mechanism(cls) -> str:
        return cls.name

    def get_optimizer_hook_fn(self, sample_rate: float):
        loader = _caller_data_loader()
        if loader is not None and not is_poisson(loader):
            warnings.warn(
                f"the {self.name!r} accountant assumes Poisson sampling, but the data loader draws "
                f"{type(getattr(loader, 'batch_sampler', None)).__name__} batches "
                "(make_private(poisson_sampling=False)); the epsilon it reports does not hold "
                "for this training",
                NotPoissonWarning, stacklevel=3)
        return super().get_optimizer_hook_fn(sample_rate)


class SubstituteAccountant(_SubauditAccountant):
    """Substitute (replace-one) adjacency: protects a known member's attributes and label."""

    adjacency = "substitute"
    name = "substitute"


class AddRemoveAccountant(_SubauditAccountant):
    """Add/remove adjacency by subaudit's PRV accountant (both directions)."""

    adjacency = "add-remove"
    name = "add-remove"


ACCOUNTANTS = (SubstituteAccountant, AddRemoveAccountant)


def register() -> None:
    """Register both accountants with Opacus (done on import; calling again is harmless).
    A different accountant already registered under one of the names is an error."""
    for cls in ACCOUNTANTS:
        try:
            existing = create_accountant(cls.name)
        except ValueError:
            register_accountant(cls.name, cls)
            continue
        if (type(existing).__module__, type(existing).__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"Opacus already has an accountant {cls.name!r} "
                             f"({type(existing).__name__}); not replacing it")


register()
