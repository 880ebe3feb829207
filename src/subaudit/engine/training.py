"""Training and scoring R audit runs of one model as one computation (:func:`train`).

An audit trains the same model many times, half the runs on ``D`` (bit 1, the target record
``z``) and half on ``D'`` (bit 0, the substitute ``z'``).  :func:`train` checks its inputs,
picks the basis (:mod:`subaudit.engine.span`) and the batching
(:mod:`subaudit.engine.batching`), and trains chunks of whole aligned blocks of runs that
fit the memory (on one CPU thread also the cache), each step being Poisson sampling (each of
the ``n + m`` records joins run r's batch with probability q, drawn as uniforms ``< q``,
Opacus' ``UniformWithReplacementSampler``), the clipped sum, the canaries' gradients, noise
and the optimiser (:mod:`subaudit.engine.dpsgd`, or the compiled kernels doing the same).
Scores are recorded at checkpoints (:func:`subaudit.schedule.checkpoints`).

Determinism: run r's randomness comes only from ``(seed, r)``, through three streams of its
own (:class:`~subaudit.engine.streams.RunStreams`: initialisation on the CPU, sampling and
noise on the training device) consumed in a fixed pattern per step: n + m uniforms and P
normals.  So on one device kind a run's scores are bitwise the same alone, in a chunk of 7
or of 1,000, and for any thread count (tested).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from subaudit.engine import kernels
from subaudit.engine.batching import (
    BATCHINGS,
    MIN_CHUNK,
    SLOT_MAIN_TAIL,
    Setup,
    bytes_per_run,
    choose_batching,
    gather_slots,
    input_rows,
    shared_rows,
)
from subaudit.engine.canaries import Canary, InputCanary
from subaudit.engine.dpsgd import DPConfig, add_noise, adam_update, forward, sgd_update
from subaudit.engine.model import MLP, Records, init_params
from subaudit.engine.span import canary_in_span, choose_basis
from subaudit.engine.streams import NOISE, RunStreams, draw_step
from subaudit.schedule import checkpoints
from subaudit.validation import ParameterError, check_count, check_positive

__all__ = ["CPU_CHUNK_BYTES", "Observer", "TrainResult", "train"]

#: A one-thread CPU job (the workflow's) keeps a chunk's working set (:func:`bytes_per_run`
#: times its runs) near the last-level cache: a step makes a few passes over every run's
#: activations, gradients, noise and optimiser state, so a chunk much larger than the cache
#: is bound by memory bandwidth (measured on 2 cores, R = 1,008, one thread: one chunk of all
#: runs trains the tabular MLP at 0.67x (q = 0.25) and 0.92x (q = 0.0625) and the image head
#: at 0.74x (q = 1) and 0.85x (q = 0.0625) the rate of 16-32 MB chunks; two such jobs side by
#: side, 0.6x and 0.8x).  With more threads small chunks lose more to the threads' per-operation
#: hand-offs than they gain (2 threads, R = 256: 0.84-0.9x at q = 0.0625), and on a GPU a
#: chunk is as large as ``memory_mb`` allows, for parallelism.  The numbers are bitwise the
#: same whatever the chunking.
CPU_CHUNK_BYTES = 24 * 2**20


@dataclass
class TrainResult:
    """Scores per checkpoint and run (larger under ``D``), and optional extras."""

    runs: np.ndarray                 # (R,) run indices
    bits: np.ndarray                 # (R,) 1 = D (z), 0 = D' (z')
    steps: np.ndarray                # (S,) checkpoints: training steps done
    scores: np.ndarray               # (S, R) float64
    accuracy_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    accuracy: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (A, R)
    params: list[np.ndarray] | None = None  # final parameters, each (R, *shape)
    also: list[np.ndarray] = field(default_factory=list)  # (S, R) per canary of ``also``


Observer = Callable[[int, list[torch.Tensor], list[torch.Tensor]], None]


def _accuracy(params: Sequence[torch.Tensor], test: Records, rows_per_pass: int) -> torch.Tensor:
    correct = torch.zeros(params[0].shape[0], dtype=torch.float64, device=params[0].device)
    for lo in range(0, test.x.shape[0], rows_per_pass):
        x, y = test.x[lo:lo + rows_per_pass], test.y[lo:lo + rows_per_pass]
        _, z = forward(params, x, shared=True)
        correct += (z.argmax(-1) == y.view(1, -1)).sum(1).double()
    return correct / test.x.shape[0]


def _train_chunk(
    s: Setup, runs: np.ndarray, bits_np: np.ndarray, real: np.ndarray, seed: int,
    init: str | Sequence[torch.Tensor], steps_out: np.ndarray, acc_steps: np.ndarray,
    test: Records | None, test_rows: int, bar: tqdm, observe: Observer | None,
    also: Sequence[Canary] = (),
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Train the runs of whole aligned blocks; ``real`` marks those asked for; the scores
    of the canaries in ``also`` are recorded beside the canary's."""
    R, dev, dt = len(runs), s.device, s.dtype
    streams = RunStreams.for_runs(seed, runs, dev)
    bits = torch.as_tensor(bits_np.astype(bool)).reshape(R, -1).to(dev)      # (R, m)
    keep = torch.as_tensor(np.flatnonzero(real)).to(dev)

    params = init_params(s.full, streams, init, dt)
    if s.canary is not None:
        s.canary.initialise(params)
    if s.basis is not None:
        params[0] = (params[0].double() @ s.basis).to(dt)
    params = [p.to(dev) for p in params]
    if s.canary is None:
        scorer = lambda _params: torch.full((R, 1), math.nan, dtype=torch.float64)  # noqa: E731
    else:
        scorer = s.canary.score.bind(s.canary, params)
    others = [c.score.bind(c, params) for c in also]
    scores = np.empty((len(steps_out), R, max(s.m, 1)))
    extra = np.empty((len(also), len(steps_out), R))
    accuracy = np.empty((len(acc_steps), R))
    want_scores = {int(t): i for i, t in enumerate(steps_out)}
    want_acc = {int(t): i for i, t in enumerate(acc_steps)}

    def record(t: int, at: Sequence[torch.Tensor]) -> None:
        if t in want_scores:
            scores[want_scores[t]] = scorer(at).cpu().numpy()
            for j, other in enumerate(others):
                extra[j, want_scores[t]] = other(at)[:, 0].cpu().numpy()
        if t in want_acc and test is not None:
            accuracy[want_acc[t]] = _accuracy(at, test, test_rows).cpu().numpy()

    run = _run_whole if s.batching.whole_runs else _run_steps
    run(s, params, streams, bits, keep, sorted(want_scores.keys() | want_acc.keys()), record, bar, observe)
    final = [p[keep].cpu().numpy() for p in params]
    return scores[:, real], accuracy[:, real], final, list(extra[:, :, real])


def _run_whole(s: Setup, params: list[torch.Tensor], streams: Sequence[RunStreams], bits: torch.Tensor,
                 keep: torch.Tensor, at_steps: list[int], record: Callable[[int, Sequence[torch.Tensor]], None],
                 bar: tqdm, observe: Observer | None) -> None:
    """A mode that trains whole runs (``per-run``): every step of the chunk's runs in the
    compiled kernel, which hands back the parameters at ``at_steps`` for ``record``; ``params``
    stay the initial ones."""
    dp, R = s.dp, len(bits)
    scale = dp.gradient_scale(s.n_records)
    snaps = kernels.train_runs(
        params, kernels.RecordTable(*shared_rows(s)), streams[0].block, n=s.n, bits=bits,
        input_canary=input_rows(s) is not None, q=dp.sampling_rate, q_canary=dp.canary_rate, clip=dp.clip,
        scale=scale, std_scale=dp.noise_std * scale, steps=dp.steps, optimizer=dp.optimizer, lr=dp.lr,
        betas=dp.betas, eps=dp.eps, gradient_canary=_flat_canary_gradients(s, _canary_gradients(s, bits, scale)),
        checkpoints=at_steps)
    offsets = s.model.offsets
    for snap, t in zip(snaps, at_steps):
        record(t, [snap[:, lo:hi].reshape(R, *sh) for sh, lo, hi in zip(s.model.shapes, offsets[:-1], offsets[1:])])
    bar.update(len(keep) * dp.steps)


def _run_steps(s: Setup, params: list[torch.Tensor], streams: Sequence[RunStreams], bits: torch.Tensor,
               keep: torch.Tensor, at_steps: list[int], record: Callable[[int, Sequence[torch.Tensor]], None],
               bar: tqdm, observe: Observer | None) -> None:
    """The other modes: step by step in torch, ``params`` updated in place; ``record`` at
    every step (it keeps those it wants), ``observe`` after each."""
    dp, R, dev, dt = s.dp, len(bits), s.device, s.dtype
    table = shared_rows(s)
    scale = dp.gradient_scale(s.n_records)
    canary_g = _canary_gradients(s, bits, scale)
    # At q = 1 every record is in every batch: no uniforms are drawn.  Canary records at a
    # rate of their own compare their uniforms with that rate.
    uniforms = None if dp.samples_all else torch.empty(R, s.n_records, device=dev)
    rates = dp.record_rates(s.n, s.m, dev)
    all_in = torch.ones(R, s.n_records, dtype=torch.bool, device=dev)
    grads = [torch.empty_like(p) for p in params]
    noisy_step = _noisy_step(dp, params, streams, dp.noise_std * scale)
    for t in range(dp.steps + 1):
        record(t, params)
        if t == dp.steps:
            break
        if uniforms is not None:
            draw_step(streams, uniforms, None)
        masks = all_in if uniforms is None else uniforms < rates
        # Gradients are divided by the expected batch size as they are made.
        s.batching.clipped_sum(s, params, s.batching.batch(s, masks, bits, table), masks, table, grads, scale)
        for i, layer, cols, values in canary_g:
            grads[layer].view(R, -1).index_add_(1, cols, values * masks[:, s.n + i, None].to(dt))
        noisy_step(grads, t + 1)
        if observe is not None:
            observe(t + 1, [p[keep] for p in params], [g[keep] for g in grads])
        bar.update(len(keep))


def _noisy_step(dp: DPConfig, params: list[torch.Tensor], streams: Sequence[RunStreams],
                std_scale: float) -> Callable[[list[torch.Tensor], int], None]:
    """``step(grads, t)``: each run's P noise values times ``std_scale`` added to its
    gradients, then the optimiser's t-th step: on the CPU one pass of the compiled kernels
    (:func:`kernels.noise_step`), else (a GPU, or the CPU without the kernels) the streams'
    draws and :mod:`subaudit.engine.dpsgd`'s noise and update, in place."""
    moments = None
    if dp.optimizer == "adam":
        moments = ([torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params])
    block = streams[0].block
    if isinstance(block, kernels.CompiledStreamBlock):
        def cpu_step(grads: list[torch.Tensor], t: int) -> None:
            kernels.noise_step(params, grads, block, NOISE, std_scale, dp.optimizer, dp.lr,
                               moments=moments, betas=dp.betas, eps=dp.eps, step=t)
        return cpu_step
    noise = torch.empty(len(streams), sum(p[0].numel() for p in params), dtype=params[0].dtype,
                        device=params[0].device)

    def torch_step(grads: list[torch.Tensor], t: int) -> None:
        draw_step(streams, None, noise)
        add_noise(grads, noise, std_scale)
        if moments is None:
            sgd_update(params, grads, dp.lr)
        else:
            adam_update(params, grads, moments, t, dp.lr, dp.betas, dp.eps)
    return torch_step


def _flat_canary_gradients(s: Setup, canary_g: list[tuple[int, int, torch.Tensor, torch.Tensor]]
                           ) -> tuple[np.ndarray, np.ndarray, torch.Tensor] | None:
    """:func:`_canary_gradients` as :func:`kernels.train_runs` takes them: per entry its canary
    and flat column, and the values (R, entries)."""
    if not canary_g:
        return None
    offsets = s.model.offsets
    which = np.concatenate([np.full(len(cols), i) for i, _, cols, _ in canary_g])
    cols = np.concatenate([offsets[layer] + cols.cpu().numpy() for _, layer, cols, _ in canary_g])
    return which, cols, torch.cat([values for *_, values in canary_g], dim=1)


def _canary_gradients(s: Setup, bits: torch.Tensor, scale: float
                      ) -> list[tuple[int, int, torch.Tensor, torch.Tensor]]:
    """What each gradient canary adds to a run's gradient when sampled, on its support:
    (canary, parameter tensor, flat columns, values (R, columns) times ``scale``).  The
    paper's canary is one coordinate, so a step touches R numbers, not R x P."""
    columns = None if s.canary is None else s.canary.gradient_columns()
    if columns is None:
        return []
    offsets = s.model.offsets
    out = []
    for i, (cols, values) in enumerate(columns):
        cols = cols.to(s.device)
        values = values.to(s.device, s.dtype)
        chosen = torch.where(bits[:, i, None], values[0], values[1]) * scale    # (R, k)
        for layer, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
            inside = (cols >= int(lo)) & (cols < int(hi))
            if bool(inside.any()):
                out.append((i, layer, cols[inside] - int(lo), chosen[:, inside].contiguous()))
    return out


def _check_same_target(canary: Canary | None, also: Sequence[Canary], model: MLP, dp: DPConfig,
                       bits: Sequence[int] | np.ndarray) -> None:
    """ParameterError unless every run is in D (bit 1) and each canary of ``also`` is an
    input canary of the same record z as ``canary``, without a trap."""
    if not isinstance(canary, InputCanary) or canary.trap:
        raise ParameterError("canary", type(canary).__name__, "an input canary without a trap when also is given")
    if not np.all(np.asarray(bits) == 1):
        raise ParameterError("bits", "some 0", "1 for every run when also is given (the runs train on D)")
    for c in also:
        if not isinstance(c, InputCanary) or c.trap:
            raise ParameterError("also", type(c).__name__, "input canaries without a trap")
        c.check(model, dp)
        if not (torch.equal(c.x[0], canary.x[0]) and int(c.y[0]) == int(canary.y[0])):
            raise ParameterError("also", "a canary of another record z", "canaries of the same z (row 0)")


def _checked(model: MLP, data: Records, canary: Canary | None, dp: DPConfig, runs: Sequence[int] | np.ndarray,
             bits: Sequence[int] | np.ndarray, test: Records | None, accuracy_steps: Sequence[int],
             also: Sequence[Canary], memory_mb: float, dtype: torch.dtype
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`train`'s arguments checked before any work: the runs, their bits, the accuracy
    steps (sorted) and the canary's count m."""
    data.check(model, "data")
    if canary is not None:
        if not isinstance(canary, Canary):
            raise ParameterError("canary", type(canary).__name__, "a Canary (subaudit.engine) or None")
        canary.check(model, dp)
    m = 1 if canary is None else check_count(canary.count, "canary.count")
    if also:
        _check_same_target(canary, also, model, dp, bits)
    if test is not None:
        test.check(model, "test")
    runs_np = np.asarray(runs, dtype=np.int64).reshape(-1)
    bits_np = np.asarray(bits)
    if runs_np.size == 0:
        raise ParameterError("runs", [], "at least one run index")
    if bits_np.shape not in ({runs_np.shape, (runs_np.size, m)} if m == 1 else {(runs_np.size, m)}):
        raise ParameterError("bits", f"shape {bits_np.shape}",
                             f"one per run ({runs_np.size},)" if m == 1
                             else f"one per run and canary ({runs_np.size}, {m})")
    if not np.isin(bits_np, (0, 1)).all():
        raise ParameterError("bits", sorted(set(bits_np.tolist())), "0 or 1 per run")
    if len(np.unique(runs_np)) != runs_np.size or (runs_np < 0).any():
        raise ParameterError("runs", "duplicate or negative indices", "distinct indices >= 0")
    acc = np.asarray(sorted({int(a) for a in accuracy_steps}), dtype=np.int64)
    if acc.size and (acc[0] < 0 or acc[-1] > dp.steps):
        raise ParameterError("accuracy_steps", acc.tolist(), f"step counts in 0..{dp.steps}")
    if acc.size and test is None:
        raise ParameterError("test", None, "test records when accuracy_steps is given")
    check_positive(memory_mb, "memory_mb")
    if dtype not in (torch.float32, torch.float64):
        raise ParameterError("dtype", str(dtype), "torch.float32 or torch.float64")
    return runs_np, bits_np, acc, m


def _setup(model: MLP, data: Records, canary: Canary | None, dp: DPConfig, also: Sequence[Canary],
           batching: str, basis: str, dev: torch.device, dtype: torch.dtype, *, needs_full: bool,
           observed: bool) -> tuple[Setup, list[Canary]]:
    """What the chunks share: the basis the runs train in (the model, records and canaries
    moved into it), the batching mode and the records' gather slots, on ``dev``; and the
    canaries of ``also`` there."""
    full = model
    span = choose_basis(basis, model, data, canary, dp, needs_full=needs_full, also=also)
    if span is not None:
        K = model.num_classes
        model = MLP((span.shape[1], K))
        data = Records((data.x.double().cpu() @ span).to(data.x.dtype), data.y)
        canary = canary_in_span(canary, span, K)
        also = [canary_in_span(c, span, K) for c in also]
    also = [c.to(dev, dtype) for c in also]
    n = data.x.shape[0]
    mode = choose_batching(batching, model, n, dp.sampling_rate, dev, observed=observed)
    data = Records(data.x.to(dev, dtype), data.y.to(dev, torch.long))
    if canary is not None:
        canary = canary.to(dev, dtype)
    slots = gather_slots(n, dp.sampling_rate, SLOT_MAIN_TAIL)
    return Setup(model, data, canary, dp, BATCHINGS[mode], slots, gather_slots(n, dp.sampling_rate) - slots, dev, dtype,
                 full, span), also


def train(
    model: MLP,
    data: Records,
    canary: Canary | None,
    dp: DPConfig,
    *,
    seed: int,
    runs: Sequence[int] | np.ndarray,
    bits: Sequence[int] | np.ndarray,
    score_every: int,
    init: str | Sequence[torch.Tensor] = "zero",
    test: Records | None = None,
    accuracy_steps: Sequence[int] = (),
    batching: str = "auto",
    basis: str = "auto",
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    memory_mb: float = 2048,
    keep_params: bool = False,
    observe: Observer | None = None,
    progress: bool = True,
    also: Sequence[Canary] = (),
) -> TrainResult:
    """Train runs ``runs`` (bits ``bits``: 1 = D with z, 0 = D' with z') and score them.

    ``bits`` holds one bit per run, or (R, m) for a canary of ``count`` m > 1 (one bit
    per run and canary; scores are then (S, R, m)).  Scores are recorded after every
    ``score_every`` steps and after the last
    (:func:`subaudit.schedule.checkpoints`); test accuracy after each step count in
    ``accuracy_steps`` (0 = before training).  ``canary=None`` trains on the
    data alone (scores are NaN).  ``observe(t, params, grads)`` is called after
    every step with the chunk's parameters and the privatised gradients of that step.
    Runs are processed in chunks that fit ``memory_mb`` (on one CPU thread, also the cache:
    :data:`CPU_CHUNK_BYTES`); results do not depend on the chunking.  ``basis``: ``span``
    trains a linear head with SGD in the span of what it sees (:func:`span_basis`; the same
    score distribution for less work), ``full`` in all d dimensions, ``auto`` the span where
    it is allowed and has at most 0.8 d dimensions.

    ``also``: input canaries scored on the same runs (their scores are ``also`` of the
    result, one (S, R) array each).  Every run's bit must be 1 and each must hold the same
    record z as ``canary`` (row 0): the runs then train on D, which none of the z' depend on,
    so one training serves the audits of several substitutes of one target.
    """
    model, also = MLP(tuple(model.sizes)), list(also)
    runs_np, bits_np, acc, m = _checked(model, data, canary, dp, runs, bits, test, accuracy_steps, also,
                                        memory_mb, dtype)
    dev = torch.device(device)
    setup, also = _setup(model, data, canary, dp, also, batching, basis, dev, dtype,
                         needs_full=test is not None or keep_params or observe is not None,
                         observed=observe is not None)
    steps_out = checkpoints(dp.steps, score_every)
    test_rows = setup.n + 2 if test is None else min(test.x.shape[0], setup.n + 2)
    test_dev = None if test is None else Records(test.x.to(dev, dtype), test.y.to(dev, torch.long))
    budget = memory_mb * 2**20
    if dev.type == "cpu" and torch.get_num_threads() == 1 and not setup.batching.whole_runs:
        budget = min(budget, CPU_CHUNK_BYTES)
    snapshots = len(set(steps_out.tolist()) | set(acc.tolist()))
    per_chunk = max(1, int(budget // bytes_per_run(setup, test_rows, snapshots)) // MIN_CHUNK)
    model = setup.model

    # Runs are trained in aligned blocks of MIN_CHUNK consecutive indices, run r in slot
    # r % MIN_CHUNK: batched products may round a slot differently by its position, so
    # a run keeps its position whatever else is trained.  Unrequested runs of a block
    # are trained too and dropped.
    order = np.argsort(runs_np, kind="stable")
    blocks = np.unique(runs_np // MIN_CHUNK)
    scores = np.empty((len(steps_out), runs_np.size, m))
    also_scores = np.empty((len(also), len(steps_out), runs_np.size))
    accuracy = np.empty((len(acc), runs_np.size))
    finals: list[list[np.ndarray]] = []
    with torch.no_grad(), tqdm(total=runs_np.size * dp.steps, unit="model-step",
                               disable=not progress, desc="DP training", mininterval=1.0) as bar:
        for i in range(0, len(blocks), per_chunk):
            slot_runs = (blocks[i:i + per_chunk, None] * MIN_CHUNK
                         + np.arange(MIN_CHUNK)).reshape(-1)
            asked = np.isin(slot_runs, runs_np)
            where = order[np.searchsorted(runs_np[order], slot_runs[asked])]
            slot_bits = np.zeros((slot_runs.size, m), dtype=np.int64)
            slot_bits[asked] = bits_np[where].reshape(-1, m)
            sc, ac, fin, extra = _train_chunk(
                setup, slot_runs, slot_bits, asked, seed, init, steps_out, acc,
                test_dev, test_rows, bar, observe, also)
            scores[:, where] = sc
            for j, e in enumerate(extra):
                also_scores[j][:, where] = e
            accuracy[:, where] = ac
            finals.append([where, *fin])
    params = None
    if keep_params:
        params = [np.empty((runs_np.size, *shape), dtype=np.float64 if dtype == torch.float64
                           else np.float32) for shape in model.shapes]
        for where, *fin in finals:
            for out, f in zip(params, fin):
                out[where] = f
    return TrainResult(runs=runs_np, bits=bits_np.astype(np.int8), steps=steps_out,
                       scores=scores[..., 0] if m == 1 else scores, accuracy_steps=acc,
                       accuracy=accuracy, params=params, also=list(also_scores))
