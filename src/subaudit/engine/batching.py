"""Batching: which rows a step of a chunk of runs computes, and how.

Modes (:data:`BATCHINGS`, a registry of :class:`Batching` strategies, chosen by
:func:`choose_batching`): each says what a run holds in memory, which rows a step computes and
how it sums their clipped gradients.

* ``per-run`` (CPU, the compiled kernels): each run trained to its last step before the
  next, its sampled records one at a time, its state in the core's cache;
* ``dense``: the records shared by all runs, the first layer's forward and weight gradient
  each one large matrix product over all runs;
* ``gather`` (GPU, small q): each run's sampled records packed into a fixed number of slots
  (covering its batch but with probability 1e-3), per-run batched products doing about q of
  the dense work; the rare excess goes through overflow slots, computed only for the blocks
  that need them;
* ``sampled`` (a linear head at small q): the logits and weight gradients of the sampled
  (run, record) pairs only.

A new mode is a :class:`Batching` subclass and its entry in :data:`BATCHINGS` (with its rule in
:func:`choose_batching` if ``auto`` is to pick it).

Every product has shapes that depend on neither the other runs nor the chunking (gather and
overflow slots depend only on n and q), and runs are trained in aligned blocks of
:data:`MIN_CHUNK` consecutive indices, run r always in slot ``r % MIN_CHUNK``, so a run's
numbers are the same alone or in any chunk.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch

from subaudit.engine import kernels
from subaudit.engine.dpsgd import Batch, DPConfig, clip_factor, clipped_sum, loss_gradient
from subaudit.engine.model import MLP, Records
from subaudit.validation import ParameterError, check_choice

if TYPE_CHECKING:
    from subaudit.engine.canaries import Canary

__all__ = ["BATCHINGS", "GATHER_MIN_WIDTH", "MIN_CHUNK", "SLOT_MAIN_TAIL", "SLOT_TAIL", "Batching", "Setup",
           "bytes_per_run", "choose_batching", "clipped_sum_sampled", "gather_slots", "input_rows",
           "shared_rows"]

#: Runs are trained in aligned blocks of this many consecutive run indices.
#: Batched products round a matrix differently by its position in the batch and
#: by the batch's width (measured: a 500 x 768 by 768 x 10 product alone differs
#: in the last bit from the same rows inside a wider one; a 3 x 62 by 62 x 6
#: product differs by its position among 16), so a run keeps its slot.
MIN_CHUNK = 16

#: Gather slots cover a run's batch except with probability ``SLOT_MAIN_TAIL`` per step;
#: the rare excess goes through overflow slots that cover it except with ``SLOT_TAIL``.
SLOT_MAIN_TAIL = 1e-3
SLOT_TAIL = 1e-15

#: ``auto`` batching gathers when the slots are fewer than this fraction of the
#: records and the first layer has at least this many outputs.
_GATHER_BELOW = 0.5
GATHER_MIN_WIDTH = 32
#: ``auto`` batching of a linear head computes only the sampled pairs at q below this.
_SAMPLED_BELOW = 0.15
#: On the CPU, ``auto`` batching trains an MLP with the compiled kernels (``per-run``: each
#: run's sampled records one by one), and a linear head too at q below this; above it a head's
#: records of all runs go through shared matrix products (``dense``), near the machine's
#: matmul rate.  Measured (one thread, 1,000 runs, model-steps of the default's heads):
#: image 1280 -> 10 (span) at q = 0.25 per-run 101 us, dense 101 us, at q = 0.0625 41 us
#: against 101 us; text 384 -> 2 at q = 0.25 per-run 43 us, dense 37 us.  The tabular MLP
#: (one-hot first layer) at q = 0.25: per-run 235 us, dense 1,291 us.
_PER_RUN_BELOW = 0.2


def gather_slots(n: int, q: float, tail: float = SLOT_TAIL) -> int:
    """Slots covering a run's sample but with probability ``tail``: the ``1 - tail``
    quantile of Binomial(n, q), rounded up to a multiple of 8.

    A function of n and q only, so products have the same shapes in every chunk.
    """
    if q >= 1.0:
        return n
    from scipy import stats  # here, not at import: 0.5 s of every training job's start-up

    k = int(stats.binom.isf(tail, n, q)) + 1
    return min(n, max(8, -(-k // 8) * 8))


def choose_batching(batching: str, model: MLP, n: int, q: float, device: torch.device,
                     observed: bool = False) -> str:
    """``auto``: on the CPU, ``per-run`` (the compiled kernels: each run trained to the end in
    turn, its sampled records one at a time) for an MLP, and for a linear head at small q, else
    ``dense``; ``observed`` (an observer sees every step) rules ``per-run`` out.  On a GPU,
    for a linear head, ``sampled`` at small q, else ``dense``; for an MLP, ``gather`` when the
    slots are few and the first layer is wide.  Without the compiled kernels
    (:func:`kernels.available`) the CPU follows the GPU's rules and ``per-run`` trains
    ``dense``: the torch path, the same numbers to float rounding.

    Gathering copies each sampled row (d values) for ``2 * sizes[1]`` flops per
    value and per pass; with a narrow first layer (a linear head with K = 10)
    the copy and the narrow per-run products cost more than dense batching
    saves (measured: 768 -> 10 head, n = 500, q = 0.0625: dense 7,200,
    gather 4,100 model-steps/s; 600 -> 128 -> 100 MLP, n = 5,000, q = 0.25:
    dense 47, gather 141).  ``sampled`` computes a linear head's logits and weight
    gradients of the sampled (run, record) pairs only, without copying rows.
    """
    check_choice(batching, "batching", ("auto", *BATCHINGS))
    linear = len(model.sizes) == 2
    if batching != "auto" and BATCHINGS[batching].linear_only and not linear:
        raise ParameterError("batching", batching, f"{_others(batching)} for an MLP "
                             f"('{batching}' needs a linear head)")
    if batching != "auto" and BATCHINGS[batching].whole_runs and (device.type != "cpu" or observed):
        raise ParameterError("batching", batching, f"{_others(batching)} on a GPU or with an observer "
                             f"('{batching}' is the CPU kernels, which train each run to the end)")
    if len(model.sizes) > 17:
        raise ParameterError("sizes", len(model.sizes), "at most 16 layers")
    compiled = device.type == "cpu" and kernels.available()
    if batching != "auto":
        return "dense" if batching == "per-run" and not compiled else batching
    if compiled and not observed:
        return "per-run" if q < _PER_RUN_BELOW or not linear else "dense"
    if linear:
        return "sampled" if q < _SAMPLED_BELOW else "dense"
    few = gather_slots(n, q) < _GATHER_BELOW * (n + 1)
    return "gather" if few and model.sizes[1] >= GATHER_MIN_WIDTH else "dense"


@dataclass
class Setup:
    model: MLP
    data: Records
    canary: Canary | None
    dp: DPConfig
    batching: Batching
    slots: int          # gather slots per run, then ``overflow`` more for the rare excess
    overflow: int
    device: torch.device
    dtype: torch.dtype
    full: MLP                        # the model as given (``model`` may be its span form)
    basis: torch.Tensor | None       # span basis (d, v), or None: training in full
    workspace: dict = field(default_factory=dict)   # reused gather buffers, by shape

    @property
    def n(self) -> int:
        return self.data.x.shape[0]

    @property
    def m(self) -> int:
        """Canaries per run."""
        return 0 if self.canary is None else self.canary.count

    @property
    def n_records(self) -> int:
        """Records a run samples from: the data and its canaries (records n .. n + m - 1)."""
        return self.n + self.m


def bytes_per_run(s: Setup, test_rows: int, snapshots: int = 0) -> int:
    """Rough peak memory of one run in a chunk (activations, gradients, state): the rows its
    step holds (:meth:`Batching.rows`), or the test rows if more; a mode that trains whole runs
    also keeps the run's parameters at its ``snapshots`` checkpoints."""
    width = sum(s.model.sizes[1:])
    per_row = 5 * width + 4 + s.batching.row_values(s)
    params = s.model.num_params * (6 + (2 if s.dp.optimizer == "adam" else 0)
                                   + (snapshots if s.batching.whole_runs else 0))
    item = torch.empty(0, dtype=s.dtype).element_size()
    return item * (max(s.batching.rows(s), test_rows) * per_row + params)


def input_rows(s: Setup) -> tuple[torch.Tensor, torch.Tensor] | None:
    return None if s.canary is None else s.canary.input_rows()


def shared_rows(s: Setup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dense batching's rows: the data, then z and z' of each input canary."""
    x, y = s.data.x, s.data.y
    rows = input_rows(s)
    if rows is not None:
        x = torch.cat([x, rows[0].reshape(-1, x.shape[1])])
        y = torch.cat([y, rows[1].reshape(-1).to(y.device, y.dtype)])
    return x, y, (x * x).sum(-1) + 1


def _shared_weight(s: Setup, masks: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """Which rows of :func:`shared_rows` are in each run's batch, (R, rows) bool: the
    sampled data, then z (bit 1) or z' (bit 0) of each sampled input canary."""
    weight = masks[:, :s.n]
    if input_rows(s) is None:
        return weight
    cols = [weight]
    for i in range(s.m):
        canary_in = masks[:, s.n + i]
        cols += [(canary_in & bits[:, i])[:, None], (canary_in & ~bits[:, i])[:, None]]
    return torch.cat(cols, dim=1)


def _slots(base: torch.Tensor, lo: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices (R, width) of each run's sampled records number lo .. lo + width - 1
    (ascending; unused slots point at row 0) and whether each slot holds one."""
    R, n = base.shape
    pos = base.cumsum(1) - 1
    take = base & (pos >= lo) & (pos < lo + width)
    slot = torch.where(take, pos - lo, width)                      # column ``width``: discarded
    idx = torch.zeros(R, width + 1, dtype=torch.long, device=base.device)
    idx.scatter_(1, slot, torch.arange(n, device=base.device).expand(R, n))
    counts = base.sum(1, keepdim=True)
    weight = torch.arange(lo, lo + width, device=base.device)[None, :] < counts
    return idx[:, :width], weight


def _gathered(table, idx: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype,
              workspace: dict | None = None) -> Batch:
    """The rows of ``idx`` (R, width) from the shared rows ``table``; the rows are copied
    into ``workspace``'s buffer of their shape when one is given (a fresh tensor of
    100 MB per step costs more in page faults than the copy: measured 66 ms against 7 ms
    for 42,560 x 600 floats)."""
    x, y, x_sq = table
    R, width = idx.shape
    flat = idx.reshape(-1)
    shape = (R * width, x.shape[1])
    out = None
    if workspace is not None:
        out = workspace.get(shape)
        if out is None:
            out = workspace[shape] = torch.empty(shape, dtype=x.dtype, device=x.device)
    rows = torch.index_select(x, 0, flat, out=out)
    return Batch(rows.view(R, width, x.shape[1]), y[flat].view(R, width),
                  x_sq[flat].view(R, width), weight.to(dtype), shared=False)


def _add_overflow(s: Setup, params: Sequence[torch.Tensor], masks: torch.Tensor, table,
                  clip: float, grads: Sequence[torch.Tensor], scale: float) -> None:
    """Add the clipped gradients of records beyond a run's ``s.slots`` gather slots.

    Only aligned blocks holding such a run are computed (each run in its own slot of
    ``MIN_CHUNK``, with ``s.overflow`` more slots), and only those runs' sums change, so a
    run's numbers still depend on its own sample alone.
    """
    base = masks[:, :s.n]
    counts = base.sum(1)
    over = counts > s.slots
    if not bool(over.any()):
        return
    blocks = torch.unique(torch.nonzero(over)[:, 0] // MIN_CHUNK)
    sub = (blocks[:, None] * MIN_CHUNK + torch.arange(MIN_CHUNK, device=masks.device)).reshape(-1)
    width = max(s.overflow, int(counts.max()) - s.slots)  # more only with probability < 1e-15
    idx, weight = _slots(base[sub], s.slots, width)
    sub_params = [p[sub] for p in params]
    extra = [torch.empty_like(p) for p in sub_params]
    clipped_sum(sub_params, _gathered(table, idx, weight, s.dtype), clip, scale, out=extra)
    has = over[sub]
    for g, e in zip(grads, extra):
        g[sub[has]] += e[has]


def clipped_sum_sampled(
    params: Sequence[torch.Tensor], batch: Batch, clip: float, grads: Sequence[torch.Tensor],
    scale: float = 1.0,
) -> None:
    """:func:`clipped_sum` of a linear head over the sampled (run, record) pairs only.

    The logits of the pairs are one sampled matrix product (CSR pattern: row (r, k), a
    column per record of run r's batch); each run's weight gradient is, per class, a
    weighted sum of its sampled rows (an embedding bag).  The class-sized steps in
    between (softmax, norms, clipping) work on the pairs, (pairs, K).  Every pair and
    every bag is computed on its own and each run's sums run over its own pairs in
    record order, so a run's numbers do not depend on the other runs.
    """
    w, b = params
    gw, gb = grads
    R, K, d = w.shape
    x, dev = batch.x, batch.x.device
    run, rec = batch.weight.nonzero(as_tuple=True)            # sampled pairs, by run then record
    counts = torch.bincount(run, minlength=R)
    start = torch.cumsum(counts, 0) - counts
    rank = torch.arange(run.numel(), device=dev) - start[run]
    # CSR entry of (pair, class): row (r, k) holds run r's records in order.
    entry = ((start[run] * K + rank)[:, None]
             + torch.arange(K, device=dev)[None, :] * counts[run][:, None]).reshape(-1)
    cols = torch.empty(run.numel() * K, dtype=torch.long, device=dev)
    cols[entry] = rec.repeat_interleave(K)
    bias = torch.empty(run.numel() * K, dtype=x.dtype, device=dev)
    bias[entry] = b[run].reshape(-1)
    offsets = torch.zeros(R * K + 1, dtype=torch.long, device=dev)
    torch.cumsum(counts.repeat_interleave(K), 0, out=offsets[1:])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
        pattern = torch.sparse_csr_tensor(offsets, cols, bias, size=(R * K, x.shape[0]),
                                          check_invariants=False)
    z = torch.sparse.sampled_addmm(pattern, w.reshape(R * K, d), x.T).values()[entry].view(-1, K)
    delta = loss_gradient(z, batch.y[rec], inplace=True)                  # (pairs, K)
    sq = (delta * delta).sum(1) * batch.x_sq[rec]
    factor = clip_factor(sq, clip, scale)
    wd = delta.mul_(factor[:, None])
    gb.zero_().index_add_(0, run, wd)
    weights = torch.empty_like(bias)
    weights[entry] = wd.reshape(-1)
    sums = torch.nn.functional.embedding_bag(cols, x, offsets[:-1], mode="sum",
                                             per_sample_weights=weights)
    gw.view(R * K, d).copy_(sums)


class Batching:
    """A batching mode: what a run's step holds in memory, which rows it computes and how
    their clipped gradients are summed. This base is ``dense`` batching: the rows of
    :func:`shared_rows`, shared by all runs, weighted by each run's sample."""

    name: ClassVar[str] = "dense"
    #: Needs a linear head (one weight matrix and a bias).
    linear_only: ClassVar[bool] = False
    #: The compiled CPU kernels train each run to its end (:func:`kernels.train_runs`): no step
    #: in torch, no observer; the run's parameters are kept at each checkpoint.
    whole_runs: ClassVar[bool] = False

    def rows(self, s: Setup) -> int:
        """Rows one run's step holds (activations and gradients each)."""
        return s.n + 2 * s.m

    def row_values(self, s: Setup) -> int:
        """Values a row holds besides its activations (its own copy of the inputs)."""
        return 0

    def batch(self, s: Setup, masks: torch.Tensor, bits: torch.Tensor, table) -> Batch:
        """This step's rows and weights for a chunk; ``masks`` is (R, n_records) bool, ``bits``
        (R, m) bool and ``table`` the rows of :func:`shared_rows`."""
        x, y, x_sq = table
        return Batch(x, y, x_sq, _shared_weight(s, masks, bits).to(s.dtype), shared=True)

    def clipped_sum(self, s: Setup, params: Sequence[torch.Tensor], batch: Batch, masks: torch.Tensor, table,
                    grads: Sequence[torch.Tensor], scale: float) -> None:
        """Each run's sum of its batch's clipped gradients, times ``scale``, into ``grads``: a
        linear head on the CPU through the compiled kernel, else :func:`clipped_sum`."""
        if len(params) == 2 and s.device.type == "cpu" and kernels.available():
            kernels.head_clipped_sum(params, batch.x, batch.y, batch.x_sq, batch.weight, s.dp.clip, grads, scale)
        else:
            clipped_sum(params, batch, s.dp.clip, scale, out=grads)


class Sampled(Batching):
    """``sampled``: a linear head's logits and weight gradients of the sampled (run, record)
    pairs only (:func:`clipped_sum_sampled`), over the shared rows."""

    name = "sampled"
    linear_only = True

    def clipped_sum(self, s: Setup, params: Sequence[torch.Tensor], batch: Batch, masks: torch.Tensor, table,
                    grads: Sequence[torch.Tensor], scale: float) -> None:
        clipped_sum_sampled(params, batch, s.dp.clip, grads, scale)


class Gather(Batching):
    """``gather``: each run's first ``s.slots`` sampled records (ascending) and its canary rows
    packed into rows of its own; the records beyond its slots through overflow slots."""

    name = "gather"

    def rows(self, s: Setup) -> int:
        return s.slots + s.m

    def row_values(self, s: Setup) -> int:
        return s.model.sizes[0]

    def batch(self, s: Setup, masks: torch.Tensor, bits: torch.Tensor, table) -> Batch:
        idx, weight = _slots(masks[:, :s.n], 0, s.slots)
        if input_rows(s) is not None:
            # z of canary i is table row n + 2i, z' row n + 2i + 1.
            pick = s.n + 2 * torch.arange(s.m, device=masks.device) + (~bits).long()
            idx = torch.cat([idx, pick], dim=1)
            weight = torch.cat([weight, masks[:, s.n:s.n + s.m]], dim=1)
        return _gathered(table, idx, weight, s.dtype, s.workspace)

    def clipped_sum(self, s: Setup, params: Sequence[torch.Tensor], batch: Batch, masks: torch.Tensor, table,
                    grads: Sequence[torch.Tensor], scale: float) -> None:
        clipped_sum(params, batch, s.dp.clip, scale, out=grads)
        _add_overflow(s, params, masks, table, s.dp.clip, grads, scale)


class PerRun(Batching):
    """``per-run`` (CPU, the compiled kernels): each run trained to its last step before the
    next, its sampled records one at a time, so a chunk holds no rows."""

    name = "per-run"
    whole_runs = True

    def rows(self, s: Setup) -> int:
        return 0


#: The batching modes by name (``auto`` besides them: :func:`choose_batching`).
BATCHINGS: dict[str, Batching] = {b.name: b for b in (Batching(), Gather(), Sampled(), PerRun())}


def _others(name: str) -> str:
    """The other modes' names, quoted, for an error message."""
    names = [f"'{n}'" for n in ("auto", *BATCHINGS) if n != name]
    return ", ".join(names[:-1]) + " or " + names[-1]
