"""How audit runs are scored from their parameters (larger under D, bit 1).

A :class:`Score` binds to a canary and a chunk's initial parameters and gives each run's
score per canary, (R, m), float64:

* :class:`LogitDifference` and :class:`LogOddsDifference`: a statistic of z's record minus
  the same statistic of z''s (:class:`RecordDifference`), for input canaries;
* :class:`Projection`: ``<u, theta_t - theta_0>`` along a direction, for gradient canaries
  (``g_z' - g_z``) and backdoor canaries;
* :class:`Coordinates`: one parameter coordinate per canary (m one-hot gradient canaries).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from subaudit.engine.dpsgd import forward
from subaudit.engine.model import flat_params
from subaudit.validation import ParameterError

__all__ = ["INPUT_SCORES", "Coordinates", "LogOddsDifference", "LogitDifference", "Projection",
           "RecordDifference", "Score", "Scored", "log_odds_at", "logits_at"]


class Scored(Protocol):
    """What a score reads of the canaries it scores (:class:`subaudit.engine.canaries.Canary`
    has it): their records z and z', or None for canaries that are not records."""

    def input_rows(self) -> tuple[torch.Tensor, torch.Tensor] | None: ...


class Score(ABC):
    """How runs are scored from their parameters: larger under D (bit 1)."""

    @abstractmethod
    def bind(self, canary: Scored, start: Sequence[torch.Tensor]
             ) -> Callable[[Sequence[torch.Tensor]], torch.Tensor]:
        """A function of a chunk's parameters giving its scores (R, m), float64;
        ``start`` are the chunk's initial parameters."""


class RecordDifference(Score):
    """A statistic of z's record minus the same statistic of z''s, per canary (larger under
    D); subclasses give the statistic of a few rows for every run, (R, rows)."""

    #: What the score is called in errors.
    name: ClassVar[str] = ""

    @staticmethod
    @abstractmethod
    def statistic(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The statistic of rows (x, y) for every run, (R, rows)."""

    def bind(self, canary: Scored, start: Sequence[torch.Tensor]):
        rows = canary.input_rows()
        if rows is None:
            raise ParameterError("canary score", self.name, "a canary with input records")
        x, y = rows[0].reshape(-1, rows[0].shape[-1]), rows[1].reshape(-1)

        def score(params: Sequence[torch.Tensor]) -> torch.Tensor:
            value = self.statistic(params, x, y)                               # (R, 2m)
            return (value[:, 0::2] - value[:, 1::2]).double()

        return score


@dataclass(frozen=True)
class LogitDifference(RecordDifference):
    """``f_{y_z}(x_z) - f_{y_z'}(x_z')``: each record's raw logit at its own label."""

    name = "logit difference"

    @staticmethod
    def statistic(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return logits_at(params, x, y)


@dataclass(frozen=True)
class LogOddsDifference(RecordDifference):
    """``l_{y_z}(x_z) - l_{y_z'}(x_z')`` with ``l_y(x) = log p_y(x) - log(1 - p_y(x))`` the
    log-odds of the softmax probability of the record's label: the paper's code's S3/S5
    score (its text writes the raw logit difference, :class:`LogitDifference`)."""

    name = "log-odds difference"

    @staticmethod
    def statistic(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return log_odds_at(params, x, y)


#: The input-record scores by name (params.yaml natural.input_score, S3/S5/S6): the paper's
#: text's raw logit difference and its code's log-odds.
INPUT_SCORES: dict[str, type[Score]] = {"logit-difference": LogitDifference, "log-odds": LogOddsDifference}


@dataclass(frozen=True)
class Projection(Score):
    """``<u, theta_t - theta_0>`` along the unit vector of ``direction`` (P,), or one
    direction per canary (m, P): a parameter coordinate (``direction = e_j``) or the
    difference ``g_z' - g_z`` of a gradient canary."""

    direction: torch.Tensor

    def bind(self, canary: Scored, start: Sequence[torch.Tensor]):
        u = torch.atleast_2d(self.direction.double())
        u = (u / torch.linalg.vector_norm(u, dim=1, keepdim=True)).to(start[0].device,
                                                                     start[0].dtype)

        def project(params: Sequence[torch.Tensor]) -> torch.Tensor:
            flat = flat_params(params)
            return torch.stack([flat @ ui for ui in u], dim=1)   # one product per canary

        at_start = project(start)
        return lambda params: (project(params) - at_start).double()


@dataclass(frozen=True)
class Coordinates(Score):
    """``sign * (theta_t - theta_0)[index[i]]`` for canary i: one parameter coordinate per
    canary, without an (m, P) direction matrix (m one-hot gradient canaries)."""

    index: torch.Tensor
    sign: float = -1.0

    def bind(self, canary: Scored, start: Sequence[torch.Tensor]):
        idx = self.index.to(start[0].device, torch.long)
        at_start = flat_params(start)[:, idx]
        return lambda params: (self.sign * (flat_params(params)[:, idx] - at_start)).double()


def logits_at(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Raw logits ``f_{y_i}(x_i)`` of a few rows for every run, (R, rows).

    Per-run products (not one shared product): with so few rows the BLAS picks
    kernels by the number of runs, and the scores must not depend on it.
    """
    R = params[0].shape[0]
    _, z = forward(params, x.expand(R, *x.shape), shared=False)
    return z.gather(2, y.view(1, -1, 1).expand(R, -1, 1)).squeeze(2)


def log_odds_at(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Log-odds ``log p_{y_i}(x_i) - log(1 - p_{y_i}(x_i))`` of a few rows for every run,
    (R, rows), float64: the label's logit minus the log-sum-exp of the other logits."""
    R = params[0].shape[0]
    _, z = forward(params, x.expand(R, *x.shape), shared=False)
    z = z.double()
    at = z.gather(2, y.view(1, -1, 1).expand(R, -1, 1)).squeeze(2)
    others = z.scatter(2, y.view(1, -1, 1).expand(R, -1, 1), float("-inf"))
    return at - torch.logsumexp(others, dim=2)
