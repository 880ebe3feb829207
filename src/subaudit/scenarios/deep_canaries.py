"""Canary kinds for one-run audits of deep networks (a registry, :data:`DEEP_KINDS`).

Every input kind makes ``m`` canary pairs ``(z_i, z'_i)`` from held-out images (never in
the training set otherwise), as ``x`` (m, 2, C, H, W) float32 in [0, 1] and ``y`` (m, 2)
int64; the games of :mod:`subaudit.integrations.audit` insert ``z_i``, or ``z'_i``, or
neither. The white-box kind has no records: the audit adds Dirac gradients inside the DP
optimiser's step.

``random``
    held-out images with their own labels (Steinke et al. 2023; Mahloujifar et al. 2024).
``mislabeled``
    held-out images, each with another label drawn uniformly (Nasr et al. 2023; Steinke et
    al. 2023): records the model can only fit by memorising them.
``metagradient``
    the mislabeled kind's records (fresh images) optimised as one set by metagradient
    descent through non-private SGD training of a proxy network (a small CNN or ResNet-9;
    :mod:`subaudit.scenarios.canary_optimisation`, the canary-optimisation paper's
    Algorithm 5), then transferred to the audited DP training.
``gradient``
    white-box Dirac canaries ``+-C e_j`` on ``m`` parameter coordinates, scored by the
    coordinate's total update (dpsgd-auditbench's white-box step).

Adding a kind is a function and a :class:`DeepKind` entry. Torch is imported inside the
functions, so the registry loads while the workflow parses. Which kinds share a training, per
case, is :mod:`subaudit.scenarios.deep_cases`; what the jobs cost, :mod:`subaudit.pipeline.costs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from subaudit.seeding import derive_seed
from subaudit.validation import ParameterError, check_choice, check_count

if TYPE_CHECKING:
    import torch

__all__ = ["DEEP_KINDS", "PROXY_RECORDS", "SCORES", "DeepKind", "Pairs", "make_pairs"]

#: Black-box scores of a canary record under the released model (higher: more likely
#: inserted): ``"loss"`` is minus its final cross-entropy; ``"loss-drop"`` its loss at
#: initialisation minus its final loss (as public one-run code scores). Gradient canaries
#: are scored by their coordinate's update instead.
SCORES: tuple[str, ...] = ("loss", "loss-drop")
#: What the metagradient kind's proxy may train on (params.yaml ``deep.metagradient.base_from``):
#: the public images, or the audited training's own non-canary records (the paper's choice).
PROXY_RECORDS: tuple[str, ...] = ("public", "train")


@dataclass(frozen=True)
class Pairs:
    """``m`` canary pairs: images ``x`` (m, 2, C, H, W) in [0, 1] and labels ``y`` (m, 2)."""

    x: torch.Tensor
    y: torch.Tensor

    @property
    def count(self) -> int:
        return int(self.x.shape[0])


def _pick(x: torch.Tensor, count: int, seed: int, what: str) -> np.ndarray:
    """2 ``count`` distinct pool rows (a seeded choice)."""
    need = 2 * check_count(count, "canaries")
    if need > x.shape[0]:
        raise ParameterError("canaries", count, f"at most {x.shape[0] // 2} pairs (the pool has {x.shape[0]} images)")
    return np.random.default_rng(derive_seed(seed, "deep-canaries", what)).choice(x.shape[0], size=need, replace=False)


def _wrong_labels(y: torch.Tensor, classes: int, seed: int) -> torch.Tensor:
    import torch

    rng = np.random.default_rng(derive_seed(seed, "deep-canaries", "wrong-labels"))
    shift = torch.from_numpy(rng.integers(1, classes, size=y.shape[0]))
    return (y + shift) % classes


def _as_pairs(x: torch.Tensor, y: torch.Tensor) -> Pairs:
    m = x.shape[0] // 2
    return Pairs(x.reshape(m, 2, *x.shape[1:]).contiguous(), y.reshape(m, 2).contiguous())


def random_pairs(pool_x: torch.Tensor, pool_y: torch.Tensor, count: int, *, classes: int, seed: int,
                 **_: Any) -> Pairs:
    """Held-out images with their own labels."""
    rows = _pick(pool_x, count, seed, "random")
    return _as_pairs(pool_x[rows], pool_y[rows])


def mislabeled_pairs(pool_x: torch.Tensor, pool_y: torch.Tensor, count: int, *, classes: int, seed: int,
                     **_: Any) -> Pairs:
    """Held-out images, each with another label drawn uniformly."""
    rows = _pick(pool_x, count, seed, "mislabeled")
    return _as_pairs(pool_x[rows], _wrong_labels(pool_y[rows], classes, seed))


def metagradient_pairs(pool_x: torch.Tensor, pool_y: torch.Tensor, count: int, *, classes: int, seed: int,
                       base: tuple[torch.Tensor, torch.Tensor], options: Mapping[str, Any],
                       progress: bool = False, device: str = "cpu", **_: Any) -> Pairs:
    """Mislabeled records optimised by metagradient descent through a proxy's non-private
    training on the non-canary records ``base`` (on ``device``); ``options``: ``metasteps``,
    ``canary_lr`` and the :class:`~subaudit.scenarios.canary_optimisation.Proxy` fields."""
    from subaudit.scenarios.canary_optimisation import Proxy, optimise_canaries

    rows = _pick(pool_x, count, seed, "metagradient")
    x0, y0 = pool_x[rows], _wrong_labels(pool_y[rows], classes, seed)
    proxy = Proxy(**{k: v for k, v in options.items() if k in Proxy.__dataclass_fields__})
    out = optimise_canaries(x0, y0, base[0], base[1], classes=classes, metasteps=int(options["metasteps"]),
                            canary_lr=float(options["canary_lr"]), proxy=proxy,
                            seed=derive_seed(seed, "metagradient"), progress=progress, device=device)
    return _as_pairs(out.x, out.y)


@dataclass(frozen=True)
class DeepKind:
    """A canary kind of the deep-network audits: how its pairs are made (None: white-box);
    ``optimised``: ``make`` also takes the non-canary records to optimise against, the
    optimisation's options, a progress switch and the device it optimises on (``base``,
    ``options``, ``progress``, ``device``)."""

    name: str
    label: str
    make: Callable[..., Pairs] | None
    description: str
    optimised: bool = False

    @property
    def white_box(self) -> bool:
        return self.make is None


#: Deep-network canary kinds by name (params.yaml ``deep.kinds`` takes names from here).
DEEP_KINDS: dict[str, DeepKind] = {k.name: k for k in (
    DeepKind("random", "random", random_pairs, "held-out images with their own labels"),
    DeepKind("mislabeled", "mislabeled", mislabeled_pairs, "held-out images with another label"),
    DeepKind("metagradient", "metagradient", metagradient_pairs,
             "mislabeled records optimised through a proxy network's non-private training", optimised=True),
    DeepKind("gradient", "gradient (white-box)", None, "Dirac canaries +-C e_j inside the DP step"),
)}


def make_pairs(kind: str, pool_x: torch.Tensor, pool_y: torch.Tensor, count: int, *, classes: int, seed: int,
               **extra: Any) -> Pairs:
    """The ``count`` canary pairs of an input ``kind`` from the held-out ``pool``."""
    entry = DEEP_KINDS[check_choice(kind, "kind", DEEP_KINDS)]
    if entry.make is None:
        raise ParameterError("kind", kind, "an input kind (" + ", ".join(k for k, e in DEEP_KINDS.items()
                                                                    if not e.white_box) + ")")
    return entry.make(pool_x, pool_y, count, classes=classes, seed=seed, **extra)
