"""DP-SGD and DP-Adam, each operation defined once: the settings (:class:`DPConfig`), the
per-example clip and sum, the noise and the SGD and Adam updates.

The semantics are Opacus' (``GradSampleModule`` + ``DPOptimizer``), checked against it in
the engine's tests:

* per-example gradients of the cross-entropy are clipped jointly over all parameters by
  Opacus' factor ``min(1, C / (||g_i|| + 1e-6))`` and summed (:func:`clipped_sum`);
* ``N(0, sigma^2 C^2)`` noise is added to the sum (:func:`add_noise`), which is divided by
  the expected batch size (:meth:`DPConfig.gradient_scale`; the engine folds the division
  into the clip factor and the noise's scale);
* SGD or Adam then steps on the privatised gradient (:func:`sgd_update`,
  :func:`adam_update`, torch.optim's formulas).

Every function here works on run-batched tensors (a leading run axis R) and is both the
engine's torch path (in place, ``out=``) and differentiable (the unrolled training of S6,
:mod:`subaudit.engine.unroll`): the same operations in the same order, so the two give the
same numbers.  The compiled CPU kernels (:mod:`subaudit.engine.kernels`) are the fast
mirror of these functions, held equal to them by tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from subaudit.validation import (
    ParameterError,
    check_choice,
    check_count,
    check_positive,
    check_sampling_rate,
)

__all__ = ["CLIP_EPS", "OPTIMIZERS", "Batch", "DPConfig", "adam_update", "add_noise", "clip_factor",
           "clipped_sum", "forward", "loss_gradient", "sgd_update"]

OPTIMIZERS: tuple[str, ...] = ("sgd", "adam")

#: Opacus' clip factor: min(1, C / (||g|| + 1e-6)).
CLIP_EPS = 1e-6


@dataclass(frozen=True)
class DPConfig:
    """DP-SGD / DP-Adam hyper-parameters of one audit setting."""

    steps: int
    sampling_rate: float
    noise_multiplier: float
    clip: float
    lr: float
    optimizer: str = "sgd"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    expected_batch_size: float | None = None
    #: Poisson rate of the canary records (None: ``sampling_rate``); the paper's code samples
    #: its Purchase100 input canary at a rate of its own.
    canary_sampling_rate: float | None = None

    def __post_init__(self) -> None:
        check_count(self.steps, "steps")
        check_sampling_rate(self.sampling_rate, "sampling_rate")
        if not (math.isfinite(self.noise_multiplier) and self.noise_multiplier >= 0):
            raise ParameterError("noise_multiplier", self.noise_multiplier, "a finite number >= 0")
        check_positive(self.clip, "clip")
        check_positive(self.lr, "lr")
        check_choice(self.optimizer, "optimizer", OPTIMIZERS)
        if self.expected_batch_size is not None:
            check_positive(self.expected_batch_size, "expected_batch_size")
        if self.canary_sampling_rate is not None:
            check_sampling_rate(self.canary_sampling_rate, "canary_sampling_rate")

    @property
    def canary_rate(self) -> float:
        """Poisson rate of the canary records: their own, else the data's."""
        return self.sampling_rate if self.canary_sampling_rate is None else self.canary_sampling_rate

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise on the summed clipped gradient, ``sigma C``."""
        return self.noise_multiplier * self.clip

    def record_rates(self, n: int, m: int, device: str | torch.device = "cpu") -> float | torch.Tensor:
        """Poisson rate of each of a run's ``n + m`` records (its data, then its m canaries):
        one number when the canaries share the data's rate, else a tensor (n + m,)."""
        if self.canary_rate == self.sampling_rate:
            return self.sampling_rate
        rates = torch.full((n + m,), self.sampling_rate, device=device)
        rates[n:] = self.canary_rate
        return rates

    @property
    def samples_all(self) -> bool:
        """Every record in every batch (q = 1 for the data and the canaries): no uniforms
        are drawn."""
        return self.sampling_rate == 1.0 == self.canary_rate

    def expected_batch(self, n_records: int) -> float:
        """The expected batch size the noisy sum is divided by: given, else ``q`` times the
        ``n_records`` a run samples from (canaries included), as Opacus' default."""
        return self.expected_batch_size or self.sampling_rate * n_records

    def gradient_scale(self, n_records: int) -> float:
        """What the noisy sum is multiplied by: one over :meth:`expected_batch`."""
        return 1.0 / self.expected_batch(n_records)


@dataclass
class Batch:
    """One step's rows: shared ``x`` (N, d) or per-run ``x`` (R, B, d), with weights."""

    x: torch.Tensor
    y: torch.Tensor            # (N,) or (R, B): labels
    x_sq: torch.Tensor         # (N,) or (R, B): ||x||^2 + 1 (weight and bias of layer 1)
    weight: torch.Tensor       # (R, rows): 1 where the record is in the batch
    shared: bool


def forward(params: Sequence[torch.Tensor], x: torch.Tensor, shared: bool):
    """Activations ``a_0..a_{L-1}`` (a_0 = x) and logits (R, rows, K).  In-place operations
    here touch only fresh products, so the pass is also differentiable."""
    acts = [x]
    L = len(params) // 2
    a = x
    for layer in range(L):
        w, b = params[2 * layer], params[2 * layer + 1]
        R, out, fan_in = w.shape
        if layer == 0 and shared:
            # One product for all runs; stored rows-major (rows, R, out), seen as (R, rows, out).
            z = (x @ w.reshape(R * out, fan_in).T).view(x.shape[0], R, out)
            z = z.add_(b).transpose(0, 1)
        else:
            z = torch.baddbmm(b[:, None, :], a, w.transpose(1, 2))
        if layer < L - 1:
            # Per-run contiguous: a batched product over a strided view picks kernels
            # by the stride (that is, by the number of runs), and rounds differently.
            a = z.tanh_() if z.is_contiguous() else torch.tanh(z).contiguous()
            acts.append(a)
        else:
            return acts, z
    raise AssertionError  # pragma: no cover


def loss_gradient(z: torch.Tensor, y: torch.Tensor, inplace: bool) -> torch.Tensor:
    """``softmax(z) - one_hot(y)`` over the last axis: the gradient of the cross-entropy in
    the logits ``z`` (``y`` broadcasts to ``z``'s other axes).  The softmax is written out
    (K is small: torch.softmax is 6x slower here) and -1 is added at each label, the same
    float operation as subtracting the one-hot row, without a one-hot table; ``inplace``
    overwrites ``z``."""
    labels = y.expand(z.shape[:-1])[..., None]
    minus_one = torch.full((1,), -1.0, dtype=z.dtype, device=z.device).expand(labels.shape)
    if inplace:
        e = z.sub_(z.amax(-1, keepdim=True)).exp_()
        return e.div_(e.sum(-1, keepdim=True)).scatter_add_(-1, labels, minus_one)
    e = (z - z.amax(-1, keepdim=True).detach()).exp()       # the shift does not change the softmax
    return (e / e.sum(-1, keepdim=True)).scatter_add(-1, labels, minus_one)


def clip_factor(sq: torch.Tensor, clip: float, scale: float, weight: torch.Tensor | None = None,
                inplace: bool = True) -> torch.Tensor:
    """Each example's clip factor ``min(1, C / (||g|| + 1e-6))`` from its squared norm ``sq``,
    times its ``weight`` (1 in the batch, 0 out) and ``scale``."""
    f = (clip / (sq.sqrt() + CLIP_EPS)).clamp(max=1.0)
    if weight is not None:
        f = f.mul_(weight) if inplace else f * weight
    return f.mul_(scale) if inplace else f * scale


def clipped_sum(params: Sequence[torch.Tensor], batch: Batch, clip: float, scale: float = 1.0,
                out: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """The sum over each run's batch of the clipped per-example gradients, times ``scale``,
    per parameter tensor (R, *shape): written into ``out`` (in place, reusing the
    activations' memory), or returned as new tensors, differentiable in the parameters and
    the rows.

    Per-example norms use the closed form of linear layers, ``||g_i||^2 = sum_l
    ||delta_i^l||^2 (||a_i^{l-1}||^2 + 1)``, instead of materialising per-example
    gradients (for R = 256 image heads they would take 4 GB).
    """
    inplace = out is not None
    acts, z = forward(params, batch.x, batch.shared)
    delta = loss_gradient(z, batch.y, inplace)                              # (R, rows, K)
    L = len(params) // 2
    deltas = [delta]
    a_sq = [None] + [a * a for a in acts[1:]]
    for layer in range(L - 1, 0, -1):
        back = torch.bmm(delta, params[2 * layer])
        delta = back.mul_(1 - a_sq[layer]) if inplace else back * (1 - a_sq[layer])
        deltas.append(delta)
    deltas.reverse()
    sq = (deltas[0] * deltas[0]).sum(-1) * batch.x_sq
    for layer in range(1, L):
        sq = sq + (deltas[layer] * deltas[layer]).sum(-1) * (a_sq[layer].sum(-1) + 1)
    factor = clip_factor(sq, clip, scale, batch.weight, inplace)[..., None]
    sums: list[torch.Tensor] = []
    for layer in range(L):
        wd = deltas[layer].mul_(factor) if inplace else deltas[layer] * factor  # (R, rows, out)
        R, n_out, fan_in = params[2 * layer].shape
        gw = None if out is None else out[2 * layer]
        if layer == 0 and batch.shared:
            flat = wd.transpose(0, 1).reshape(batch.x.shape[0], R * n_out)
            w_sum = torch.mm(flat.T, batch.x, out=None if gw is None else gw.view(R * n_out, fan_in))
            w_sum = w_sum.view(R, n_out, fan_in)
        else:
            w_sum = torch.bmm(wd.transpose(1, 2), acts[layer], out=gw)
        b_sum = wd.sum(1) if out is None else torch.sum(wd, dim=1, out=out[2 * layer + 1])
        sums += [w_sum, b_sum]
    return sums


def add_noise(grads: Sequence[torch.Tensor], noise: torch.Tensor, std_scale: float,
              inplace: bool = True) -> list[torch.Tensor]:
    """``g + std_scale * z`` per parameter tensor, with ``noise`` (R, P) each run's P standard
    normals in parameter order (weight then bias per layer)."""
    out, lo = [], 0
    for g in grads:
        z = noise[:, lo:lo + g[0].numel()].reshape(g.shape)
        lo += g[0].numel()
        out.append(g.add_(z, alpha=std_scale) if inplace else torch.add(g, z, alpha=std_scale))
    return out


def sgd_update(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], lr: float,
               inplace: bool = True) -> list[torch.Tensor]:
    """SGD: ``p - lr g`` (torch.optim.SGD without momentum)."""
    if inplace:
        return [p.add_(g, alpha=-lr) for p, g in zip(params, grads)]
    return [torch.add(p, g, alpha=-lr) for p, g in zip(params, grads)]


def adam_update(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor],
                moments: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]], step: int, lr: float,
                betas: tuple[float, float], eps: float, inplace: bool = True
                ) -> tuple[list[torch.Tensor], tuple[list[torch.Tensor], list[torch.Tensor]]]:
    """Adam's ``step``-th update (torch.optim.Adam's formulas, as the kernels compute them):
    ``m <- m + (1 - b1)(g - m)``, ``v <- b2 v + (1 - b2) g^2``, ``p <- p - lr / (1 - b1^t)
    m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.  Returns the parameters and the moments (the
    same tensors when ``inplace``).  The smallest normal number is added under the root:
    sqrt'(0) is infinite at a coordinate no gradient reached (no change in the value at
    eps = 1e-8)."""
    b1, b2 = betas
    neg_step = -lr / (1.0 - b1 ** step)
    bc2_sqrt = math.sqrt(1.0 - b2 ** step)
    new_p, new_m, new_v = [], [], []
    for p, g, m, v in zip(params, grads, *moments):
        tiny = torch.finfo(p.dtype).tiny
        if inplace:
            m = m.lerp_(g, 1 - b1)
            v = v.mul_(b2).add_(g * g, alpha=1 - b2)
            p = p.add_(m / ((v + tiny).sqrt_().div_(bc2_sqrt).add_(eps)), alpha=neg_step)
        else:
            m = torch.lerp(m, g, 1 - b1)
            v = torch.add(v * b2, g * g, alpha=1 - b2)
            p = torch.add(p, m / ((v + tiny).sqrt() / bc2_sqrt + eps), alpha=neg_step)
        new_p.append(p)
        new_m.append(m)
        new_v.append(v)
    return new_p, (new_m, new_v)
