"""The engine's training, differentiable: R runs unrolled over T steps, for metagradients.

:func:`unroll` trains runs by DP-SGD or DP-Adam exactly as :func:`subaudit.engine.train`
defines it (Poisson masks from each run's :class:`~subaudit.engine.streams.RunStreams`, the
canary as record n, per-example clipping, Gaussian noise, division by the expected batch
size, the optimiser), through the same operations (:mod:`subaudit.engine.dpsgd`) in their
differentiable form, and returns the final parameters as a function of the initial ones and
of each run's canary record.  The S6 scenario differentiates an audit score through it.
Its final parameters equal the engine's to 1e-12 in float64 (tested); the sums over a
batch's records run in another order (the canary's gradient is summed on its own), so they
are not the same bits.

Steps run in segments recomputed in the backward pass (``torch.utils.checkpoint``): memory
is one segment's activations plus the parameters at each segment boundary, not T steps'.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.utils.checkpoint import checkpoint

from subaudit.engine.batching import GATHER_MIN_WIDTH
from subaudit.engine.dpsgd import Batch, DPConfig, adam_update, add_noise, clipped_sum, sgd_update
from subaudit.engine.model import MLP, Records
from subaudit.engine.streams import RunStreams, draw_step
from subaudit.validation import ParameterError, check_count

__all__ = ["unroll"]


def _step(params: list[torch.Tensor], moments: tuple[list[torch.Tensor], list[torch.Tensor]], t: int,
          data: Records, x_sq: torch.Tensor, xc: torch.Tensor, yc: torch.Tensor, masks: torch.Tensor,
          noise: torch.Tensor, dp: DPConfig, scale: float
          ) -> tuple[list[torch.Tensor], tuple[list[torch.Tensor], list[torch.Tensor]]]:
    """One DP step of every run (pure): ``masks`` (R, n + 1), the canary row ``xc`` (R, d) of
    each run as record n; returns the new parameters and the optimiser's moments."""
    n, dt = data.x.shape[0], params[0].dtype
    base = masks[:, :n]
    counts = base.sum(1)
    width = int(counts.max())
    if width > n // (8 if params[0].shape[1] < GATHER_MIN_WIDTH else 2):
        # One shared product over all records: for a wide first layer once most are sampled;
        # for a narrow one (a linear head) already from an eighth, where copying each run's
        # rows costs more than the extra rows (measured on the default image head, n = 500,
        # one thread: q = 0.25 crafts in 53 s shared against 84 s gathered; q = 0.0625 in
        # 31 s gathered against 51 s shared; the Tanh MLP at q = 0.25: 127 s gathered, 225 s
        # shared).
        batch = Batch(data.x, data.y, x_sq, base.to(dt), shared=True)
    else:                         # each run's sampled records only, padded to the largest batch
        order = torch.argsort((~base).to(torch.int8), dim=1, stable=True)[:, :max(width, 1)]
        weight = (torch.arange(order.shape[1])[None, :] < counts[:, None]).to(dt)
        batch = Batch(data.x[order], data.y[order], x_sq[order], weight, shared=False)
    canary = Batch(xc[:, None, :], yc[:, None], (xc * xc).sum(-1)[:, None] + 1, masks[:, n:].to(dt),
                   shared=False)
    grads = [a + b for a, b in zip(clipped_sum(params, batch, dp.clip, scale),
                                   clipped_sum(params, canary, dp.clip, scale))]
    grads = add_noise(grads, noise, dp.noise_std * scale, inplace=False)
    if dp.optimizer == "sgd":
        return sgd_update(params, grads, dp.lr, inplace=False), moments
    return adam_update(params, grads, moments, t + 1, dp.lr, dp.betas, dp.eps, inplace=False)


def unroll(model: MLP, data: Records, xc: torch.Tensor, yc: torch.Tensor, start: Sequence[torch.Tensor],
           dp: DPConfig, streams: Sequence[RunStreams], *, segment: int = 10) -> list[torch.Tensor]:
    """Final parameters (R, *shape) of R runs trained by DP-SGD/DP-Adam on ``data`` plus one
    canary record per run (``xc`` (R, d), ``yc`` (R,)), from ``start``; differentiable in
    ``start`` and ``xc``.

    ``streams`` holds B runs' random streams with R a multiple of B: run r draws from
    ``streams[r % B]``, so runs r, r + B, ... share their masks and noise (the two worlds of
    one crafting run).  The draws are the engine's (n + 1 uniforms then P normals per step,
    in the training dtype).  Steps run in checkpointed segments of ``segment``.
    """
    check_count(segment, "segment")
    B, R = len(streams), xc.shape[0]
    if R % B:
        raise ParameterError("canary rows", R, f"a multiple of the {B} streams")
    dt = start[0].dtype
    n = data.x.shape[0]
    data = Records(data.x.to(dt), data.y.long())
    x_sq = (data.x * data.x).sum(-1) + 1
    yc = yc.long()
    scale = dp.gradient_scale(n + 1)
    rates = dp.record_rates(n, 1)
    uniforms = None if dp.samples_all else torch.empty(B, n + 1)
    noise = torch.empty(B, model.num_params, dtype=dt)
    k = len(start)

    def run_segment(t0: int, t1: int, states: list[tuple[torch.Tensor, torch.Tensor]],
                    xc: torch.Tensor, *flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        for st, (ms, ns) in zip(streams, states):    # the same draws when recomputed
            st.mask.set_state(ms)
            st.noise.set_state(ns)
        params, moments = list(flat[:k]), (list(flat[k:2 * k]), list(flat[2 * k:]))
        for t in range(t0, t1):
            draw_step(streams, uniforms, noise)
            masks = (torch.ones(B, n + 1, dtype=torch.bool) if uniforms is None
                     else uniforms < rates).repeat(R // B, 1)
            params, moments = _step(params, moments, t, data, x_sq, xc, yc, masks,
                                    noise.repeat(R // B, 1), dp, scale)
        return (*params, *moments[0], *moments[1])

    zeros = [torch.zeros_like(p) for p in start] if dp.optimizer == "adam" else []
    state: tuple[torch.Tensor, ...] = (*start, *zeros, *zeros)
    for t0 in range(0, dp.steps, segment):
        t1 = min(t0 + segment, dp.steps)
        states = [(st.mask.get_state(), st.noise.get_state()) for st in streams]
        if torch.is_grad_enabled() and (xc.requires_grad or any(t.requires_grad for t in state)):
            # Re-entrant: the non-re-entrant variant kept memory growing with T (measured on
            # the tabular MLP, 64 runs: 2.9 GB at T = 10, 5.8 GB at T = 40, 8.3 GB at T = 80,
            # whatever the segment; re-entrant 1.9 GB and 2.2 GB).  It needs .backward(),
            # not torch.autograd.grad.
            state = checkpoint(run_segment, t0, t1, states, xc, *state, use_reentrant=True)
        else:
            state = run_segment(t0, t1, states, xc, *state)
    return list(state[:k])
