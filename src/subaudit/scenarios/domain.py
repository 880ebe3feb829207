"""Where a crafted record may live, and a free parametrisation to optimise it in.

:class:`Domain` keeps x' where records live: within the training features' range per
coordinate (steps in units of its standard deviation) for a head on features; for one-hot
tabular data a softmax per attribute (or a sigmoid per binary feature), rounded back to a
record at the end.  Used by S6 (:mod:`subaudit.scenarios.s6`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Domain"]


@dataclass(frozen=True)
class Domain:
    """Where x' may go, and its free parametrisation u: ``box`` (x' = u times each
    coordinate's standard deviation ``unit``, kept in [lo, hi]), ``one-hot`` (x' = softmax
    of u within each attribute's columns, rounded to the arg max) or ``binary``
    (x' = sigmoid(u), rounded at 1/2)."""

    kind: str
    lo: torch.Tensor | None = None
    hi: torch.Tensor | None = None
    unit: torch.Tensor | None = None
    groups: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, x: torch.Tensor) -> Domain:
        """The domain of records ``x`` (N, d): one-hot attributes when every record has exactly
        one 1 in each block of w columns (the smallest such w > 1; values never observed keep
        their column), binary when all values are 0/1, else the box of the features' range."""
        x = x.double()
        if not bool(((x == 0) | (x == 1)).all()):
            unit = x.std(0).clamp(min=torch.finfo(torch.float64).eps) if len(x) > 1 else torch.ones(x.shape[1])
            return cls("box", x.amin(0), x.amax(0), unit.double())
        n, d = x.shape
        for w in range(2, d + 1):
            if d % w == 0 and bool((x.reshape(n, d // w, w).sum(-1) == 1).all()):
                return cls("one-hot", groups=tuple((lo, lo + w) for lo in range(0, d, w)))
        return cls("binary")

    def free(self, x: torch.Tensor, logit: float = 2.0) -> torch.Tensor:
        """u with value about x (a record of the domain; relaxed at ``logit`` for 0/1 data).
        In the box u is x in units of each coordinate's standard deviation in the data, so
        a metastep's size is relative to the data's spread."""
        x = x.double()
        if self.kind == "box":
            return x / self.unit
        return logit * (2 * x - 1)

    def value(self, u: torch.Tensor) -> torch.Tensor:
        """The (relaxed) record of u."""
        if self.kind == "box":
            return u * self.unit
        if self.kind == "binary":
            return torch.sigmoid(u)
        return torch.cat([torch.softmax(u[lo:hi], 0) for lo, hi in self.groups])

    def project(self, u: torch.Tensor) -> None:
        """Keep u in the domain (in place): the box; nothing for the relaxations."""
        if self.kind == "box":
            with torch.no_grad():
                u.copy_(torch.maximum(torch.minimum(u, self.hi / self.unit), self.lo / self.unit))

    def round(self, x: torch.Tensor) -> torch.Tensor:
        """A record of the domain from a relaxed one."""
        if self.kind == "box":
            return x.clone()
        if self.kind == "binary":
            return (x > 0.5).to(x.dtype)
        out = torch.zeros_like(x)
        for lo, hi in self.groups:
            out[lo + int(torch.argmax(x[lo:hi]))] = 1.0
        return out
