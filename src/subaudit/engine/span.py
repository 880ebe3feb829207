"""Training a linear head in the span of what it sees.

A linear head trained by DP-SGD on fixed features moves, apart from noise, only along the
records it sees: each clipped gradient is delta (x) x_i.  Split the noise of the weight
matrix into its part in V = span(records, canary rows, score directions) and the rest:
the rest never changes a logit of a record, a clipping norm or a score, and SGD is linear,
so training the coordinates in an orthonormal basis of V, with standard normal noise
there, gives every score exactly the distribution of full training (and exactly the
scores of full training whose noise has that V part: tested against Opacus).  With
d = 1280 features and 500 records this is 2.5x less work and noise.  Adam is not
rotation-invariant, and test accuracy or final parameters need the rest: those train
in full.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subaudit.engine.canaries import Canary, GradientCanary, InputCanary
from subaudit.engine.dpsgd import DPConfig
from subaudit.engine.model import MLP, Records
from subaudit.engine.scores import LogitDifference, LogOddsDifference, Projection
from subaudit.validation import ParameterError, check_choice

__all__ = ["BASES", "SPAN_BELOW", "canary_in_span", "choose_basis", "span_basis"]

BASES: tuple[str, ...] = ("auto", "full", "span")
#: ``auto`` basis trains a linear head in its span when that has at most this fraction of d.
SPAN_BELOW = 0.8


def span_basis(model: MLP, data: Records, canary: Canary | None,
               also: Sequence[Canary] = ()) -> torch.Tensor | None:
    """Orthonormal basis (d, v), float64 on the CPU, of the input directions a linear
    head's training and scores depend on: the records, the input rows of the canary (and of
    the canaries in ``also``, scored on the same runs) and the input-space rows of their
    gradients and score directions.  None for an MLP or a canary or score of a kind this
    module does not know."""
    if len(model.sizes) != 2:
        return None
    d, K = model.sizes
    vecs = [data.x.detach().double().cpu()]
    for c in [] if canary is None else [canary, *also]:
        score = c.score
        if type(c) not in (InputCanary, GradientCanary) or getattr(c, "trap", ()) or \
                type(score) not in (LogitDifference, LogOddsDifference, Projection):
            return None
        rows = c.input_rows()
        flats = [] if c.gradients() is None else [c.gradients().reshape(-1, model.num_params)]
        if isinstance(score, Projection):
            flats.append(torch.atleast_2d(score.direction))
        if rows is not None:
            vecs.append(rows[0].reshape(-1, d).detach().double().cpu())
        vecs += [f[:, :K * d].reshape(-1, d).detach().double().cpu() for f in flats]
    a = torch.cat(vecs)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)     # one thread: the same basis whatever the thread count
    try:
        _, sv, vh = torch.linalg.svd(a, full_matrices=False)
    finally:
        torch.set_num_threads(threads)
    keep = sv > sv[0] * max(a.shape) * torch.finfo(torch.float64).eps
    keep[0] = True
    return vh[keep].T.contiguous()


def _in_span(flat: torch.Tensor, basis: torch.Tensor, K: int) -> torch.Tensor:
    """Flat parameter vectors (..., K d + K) in span coordinates (..., K v + K)."""
    d = basis.shape[0]
    w = flat[..., :K * d].double().cpu().reshape(*flat.shape[:-1], K, d) @ basis
    out = torch.cat([w.reshape(*flat.shape[:-1], -1), flat[..., K * d:].double().cpu()], dim=-1)
    return out.to(flat.dtype)


def canary_in_span(canary: Canary | None, basis: torch.Tensor, K: int) -> Canary | None:
    if canary is None:
        return None
    score = canary.scored_by
    if isinstance(score, Projection):
        score = Projection(_in_span(score.direction, basis, K))
    if isinstance(canary, InputCanary):
        x = (canary.x.double().cpu() @ basis).to(canary.x.dtype)
        return InputCanary(x, canary.y, scored_by=score)
    return GradientCanary(_in_span(canary.g, basis, K), scored_by=score)


def choose_basis(basis: str, model: MLP, data: Records, canary: Canary | None, dp: DPConfig,
                 needs_full: bool = False, also: Sequence[Canary] = ()) -> torch.Tensor | None:
    """The span basis :func:`train` trains in (``basis`` is ``auto``, ``full`` or ``span``;
    ``needs_full``: test accuracy, final parameters or an observer are asked for; ``also``:
    canaries scored on the same runs), or None."""
    check_choice(basis, "basis", BASES)
    if basis == "full":
        return None
    span = None if dp.optimizer != "sgd" or needs_full else span_basis(model, data, canary, also)
    if basis == "span" and span is None:
        raise ParameterError("basis", basis, "'auto' or 'full' here ('span' needs a linear head "
                             "trained with SGD, a canary of this module scored by LogitDifference, "
                             "LogOddsDifference or Projection, and no test, keep_params or observe)")
    if basis == "auto" and span is not None and span.shape[1] > SPAN_BELOW * model.sizes[0]:
        return None
    return span
