"""The engine's compiled CPU kernels (``_kernels.cpp``), called through ctypes.

What a CPU audit repeats R times per step, for a range of runs, every run's numbers
depending on that run alone (see the C++ file's header):

* :class:`CompiledStreamBlock`: random streams, one per run and purpose (xoroshiro128++ lanes,
  24-bit uniforms, ziggurat normals);
* :func:`clipped_sum`: the sum of a run's clipped per-example gradients over its sampled
  records, for a Tanh MLP or a linear head, with a dense or a sparse (CSR) first layer;
* :func:`noise_step`: Gaussian noise into the privatised gradient and the SGD or Adam step;
* :func:`train_runs`: whole trainings (sampling, both of the above, canaries), one run after
  another, so that a run's parameters and optimiser state stay in the core's cache; the
  parameters at the checkpoints come back for scoring;
* :func:`head_clipped_sum`: a dense linear head's softmax, norms and clipping between
  torch's matrix products (large q, where those products run near the matmul rate).

The library is built by ``pip install`` (``setup.py``) once per x86-64 instruction set
(SSE2, AVX2, AVX-512); :func:`library` loads the widest this CPU runs (``SUBAUDIT_KERNELS``
picks another).  All builds give the same bits (tested).  Runs are split over
``torch.get_num_threads()`` threads (ctypes releases the GIL), which changes nothing but
the wall time.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from subaudit.validation import ParameterError

__all__ = ["VARIANTS", "RecordTable", "SaAudit", "SaNet", "SaOptimiser", "SaTable", "CompiledStreamBlock", "available",
           "clipped_sum", "cpu_variant", "draw_only", "head_clipped_sum", "library", "noise_step", "over_runs",
           "train_runs"]

#: Builds of the library on x86-64, widest first, with the CPU flags each needs.
VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("avx512", ("avx512f", "avx512dq", "avx512bw", "avx512vl")),
    ("avx2", ("avx2",)),
    ("sse2", ()),
)

_VP = ctypes.c_void_p
_I64 = ctypes.c_int64
_D = ctypes.c_double
_PI64 = ctypes.POINTER(ctypes.c_int64)


class SaNet(ctypes.Structure):
    """A chunk's networks: 2L run-batched tensors of parameters, gradients and (Adam) moments."""

    _fields_ = [("layers", _I64), ("sizes", _VP), ("params", _VP), ("grads", _VP), ("m", _VP), ("v", _VP)]


class SaTable(ctypes.Structure):
    """The records every run samples from (:meth:`RecordTable.as_struct`)."""

    _fields_ = [("rows", _I64), ("x", _VP), ("ptr", _VP), ("col", _VP), ("val", _VP), ("y", _VP), ("xsq", _VP)]


class SaOptimiser(ctypes.Structure):
    """SGD (``adam`` 0) or Adam and their hyper-parameters."""

    _fields_ = [("adam", _I64), ("lr", _D), ("beta1", _D), ("beta2", _D), ("eps", _D)]


class SaAudit(ctypes.Structure):
    """What whole trainings need beyond the network and the records (:func:`train_runs`)."""

    _fields_ = [("n", _I64), ("mc", _I64), ("input", _I64), ("bits", _VP), ("draw", _I64), ("q", _D),
                ("qc", _D), ("clip", _D), ("scale", _D), ("std_scale", _D), ("steps", _I64), ("ng", _I64),
                ("g_canary", _VP), ("g_col", _VP), ("g_val", _VP), ("ns", _I64), ("snap_steps", _VP),
                ("snap", _VP), ("R", _I64), ("P", _I64)]


_STRUCTS = (SaNet, SaTable, SaOptimiser, SaAudit)
_PNET, _PTABLE, _POPT, _PAUDIT = (ctypes.POINTER(t) for t in _STRUCTS)
_SIGNATURES = {
    "sa_stream_words": ([], ctypes.c_int),
    "sa_seed": ([_VP, ctypes.c_uint64], None),
    "sa_struct_sizes": ([_PI64], None),
    "sa_uniform_f32": ([_I64, _I64, _VP, _I64, _VP, _I64], None),
    "sa_normal_f32": ([_I64, _I64, _VP, _I64, _VP, _I64], None),
    "sa_normal_f64": ([_I64, _I64, _VP, _I64, _VP, _I64], None),
    "sa_clipped_sum_f32": ([_I64, _I64, _PNET, _PTABLE, _VP, _D, _D], None),
    "sa_noise_step_f32": ([_I64, _I64, _PNET, _VP, _I64, _D, _POPT, _I64], None),
    "sa_train_runs_f32": ([_I64, _I64, _PNET, _PTABLE, _POPT, _PAUDIT, _VP], None),
    "sa_softmax_clip_f32": ([_I64, _I64, _I64, _I64, _I64, _VP, _VP, _VP, _VP, _VP, _D, _D, _VP], None),
    "sa_draw_only_f32": ([_I64, _I64, _VP, _I64, _I64, _I64], None),
}
for _name in ("sa_clipped_sum", "sa_noise_step", "sa_train_runs", "sa_softmax_clip"):
    _SIGNATURES[f"{_name}_f64"] = _SIGNATURES[f"{_name}_f32"]


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def device_path_on_cpu() -> bool:
    """Whether ``SUBAUDIT_STREAMS=device`` asks the CPU to run the GPU's code path (the device
    kernels interpreted, training through torch): the tests of that path."""
    return os.environ.get("SUBAUDIT_STREAMS") == "device"


def cpu_variant() -> str:
    """The build this process runs: the widest of ``avx512``, ``avx2``, ``sse2`` this CPU has
    on x86-64 (``SUBAUDIT_KERNELS`` may name a narrower one, all giving the same bits, or
    ``none``: no compiled kernels), ``""`` elsewhere."""
    asked = os.environ.get("SUBAUDIT_KERNELS")
    if asked == "none" or device_path_on_cpu():
        return "none"
    if importlib.util.find_spec("subaudit.engine._kernels") is not None:
        return ""
    flags = _cpu_flags()
    usable = [name for name, need in VARIANTS if set(need) <= flags]
    if asked is None:
        return usable[0]
    if asked not in usable:
        raise ParameterError("SUBAUDIT_KERNELS", asked, f"a build this CPU runs: {usable} or none")
    return asked


@lru_cache(maxsize=None)
def library(variant: str | None = None) -> ctypes.CDLL:
    """The loaded kernels (``variant``: a build of :data:`VARIANTS`; default the CPU's own)."""
    variant = cpu_variant() if variant is None else variant
    if variant == "none":
        raise ImportError("SUBAUDIT_KERNELS=none: the compiled CPU kernels are switched off")
    name = f"subaudit.engine._kernels_{variant}" if variant else "subaudit.engine._kernels"
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ImportError(f"subaudit's compiled CPU kernels ({name}) are not built: reinstall the "
                          "package with a C++ compiler on PATH (pip install -e .)")
    lib = ctypes.CDLL(spec.origin)
    for fn, (args, res) in _SIGNATURES.items():
        try:
            f = getattr(lib, fn)
        except AttributeError:   # a broken or partial build
            raise ImportError(f"{name} ({spec.origin}) lacks {fn}: a broken build of the kernels; "
                              "rebuild the package (pip install -e .)") from None
        f.argtypes, f.restype = args, res
    sizes = (ctypes.c_int64 * len(_STRUCTS))()
    lib.sa_struct_sizes(sizes)
    ours = [ctypes.sizeof(t) for t in _STRUCTS]
    if list(sizes) != ours:   # a build of another version of _kernels.cpp
        raise ImportError(f"{name}: argument structures of {list(sizes)} bytes, the binding has {ours}: "
                          "rebuild the package (pip install -e .)")
    return lib


@lru_cache(maxsize=None)
def available() -> bool:
    """Whether the compiled kernels load in this process: built (a C++ compiler was there at
    ``pip install``) and not switched off by ``SUBAUDIT_KERNELS=none``.  Without them the
    engine trains through torch and draws from the numpy twin of the kernels' generator
    (:mod:`subaudit.engine.generator`): the same random numbers, scores equal to float
    rounding, slower."""
    try:
        library()
    except ImportError:
        return False
    return True


def _ptr(t: torch.Tensor | np.ndarray | None) -> int | None:
    if t is None:
        return None
    if isinstance(t, np.ndarray):
        return t.ctypes.data
    return t.data_ptr()


def _ptrs(tensors: Sequence[torch.Tensor]) -> ctypes.Array:
    return (_VP * len(tensors))(*[t.data_ptr() for t in tensors])


_POOL: ThreadPoolExecutor | None = None


def over_runs(R: int, work: Callable[[int, int], None]) -> None:
    """``work(r0, r1)`` over [0, R) split into one contiguous range per thread."""
    global _POOL
    workers = max(1, torch.get_num_threads())
    if workers == 1 or R < 2 * workers:
        work(0, R)
        return
    if _POOL is None or _POOL._max_workers != workers:
        _POOL = ThreadPoolExecutor(workers, thread_name_prefix="subaudit-kernels")
    bounds = np.linspace(0, R, workers + 1).astype(int)
    list(_POOL.map(work, bounds[:-1], bounds[1:]))


class CompiledStreamBlock:
    """Random streams of R runs, ``purposes`` each (e.g. mask and noise), as one array of
    states: stream (r, k) is row r, column k, seeded with ``seeds[r][k]``."""

    def __init__(self, seeds: Sequence[Sequence[int]]) -> None:
        lib = library()
        seeds = np.asarray(seeds, dtype=np.uint64)
        self.runs, self.purposes = seeds.shape
        self.words = lib.sa_stream_words()
        self.state = np.zeros((self.runs, self.purposes, self.words), dtype=np.uint64)
        for r in range(self.runs):
            for k in range(self.purposes):
                lib.sa_seed(self.state[r, k].ctypes.data, int(seeds[r, k]))

    def _call(self, fn: str, purpose: int, out: torch.Tensor, rows: slice) -> None:
        if not out.is_contiguous() or out.device.type != "cpu":
            raise ValueError("draws go into a contiguous CPU tensor")
        lo, hi, _ = rows.indices(self.runs)
        n = out.numel() // max(1, hi - lo)
        f = getattr(library(), fn)
        base = self.state[lo:hi, purpose]
        step = self.purposes
        over_runs(hi - lo, lambda r0, r1: f(r0, r1, base.ctypes.data, step, out.data_ptr(), n))

    def uniform(self, purpose: int, out: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """Each run's next ``n`` uniforms on [0, 1) into row r of ``out`` (float32)."""
        if out.dtype != torch.float32:
            raise ValueError("uniforms are float32")
        self._call("sa_uniform_f32", purpose, out, rows)
        return out

    def normal(self, purpose: int, out: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """Each run's next ``n`` standard normals into row r of ``out`` (float32: the float64
        draws rounded)."""
        _kind(out.dtype)
        self._call("sa_normal_f64" if out.dtype == torch.float64 else "sa_normal_f32", purpose,
                   out, rows)
        return out


def _kind(dtype: torch.dtype) -> str:
    if dtype == torch.float32:
        return "f32"
    if dtype == torch.float64:
        return "f64"
    raise ValueError(f"kernels compute in float32 or float64, not {dtype}")


class RecordTable:
    """A table of records in the form :func:`clipped_sum` reads: dense rows, or CSR when the
    rows are mostly zeros (a one-hot first layer then costs its non-zeros only)."""

    #: Rows with at most this share of non-zeros go as CSR.
    SPARSE_BELOW = 0.25

    def __init__(self, x: torch.Tensor, y: torch.Tensor, x_sq: torch.Tensor) -> None:
        self.rows, self.d = x.shape
        self.dtype = x.dtype
        self.y = y.to(torch.int64).contiguous()
        self.x_sq = x_sq.to(x.dtype).contiguous()
        nonzero = x != 0
        self.sparse = int(nonzero.sum()) <= self.SPARSE_BELOW * x.numel()
        if self.sparse:
            counts = nonzero.sum(1)
            self.ptr = torch.zeros(self.rows + 1, dtype=torch.int64)
            torch.cumsum(counts, 0, out=self.ptr[1:])
            r, c = nonzero.nonzero(as_tuple=True)
            self.col = c.to(torch.int64).contiguous()
            self.val = x[r, c].contiguous()
            self.x = None
        else:
            self.x = x.contiguous()
            self.ptr = self.col = self.val = None

    def as_struct(self) -> SaTable:
        """The table as the kernels take it: x or CSR, labels, ||x||^2 + 1."""
        return SaTable(self.rows, *(_ptr(a) for a in (self.x, self.ptr, self.col, self.val, self.y, self.x_sq)))


class _Net:
    """A :class:`SaNet` and the arrays it points into (kept alive as long as it is)."""

    def __init__(self, params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor],
                 moments: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]] | None = None) -> None:
        L = len(params) // 2
        self.sizes = np.array([params[0].shape[2]] + [params[2 * k].shape[1] for k in range(L)], np.int64)
        self.arrays = [_ptrs(params), _ptrs(grads)] + ([_ptrs(m) for m in moments] if moments else [None, None])
        self.struct = SaNet(L, self.sizes.ctypes.data, *(None if a is None else ctypes.addressof(a)
                                                        for a in self.arrays))


def _optimiser(optimizer: str, lr: float, betas: tuple[float, float], eps: float) -> SaOptimiser:
    return SaOptimiser(int(optimizer == "adam"), lr, betas[0], betas[1], eps)


def clipped_sum(params: Sequence[torch.Tensor], records: RecordTable, weight: torch.Tensor, clip: float,
                grads: Sequence[torch.Tensor], scale: float) -> None:
    """``grads`` (each (R, *shape), contiguous) = ``scale`` x the sum over each run's records
    with ``weight[r, i]`` (bool, (R, rows)) of the clipped per-example gradients of the MLP
    with parameters ``params`` (weight (R, out, in), bias (R, out) per layer)."""
    net, table = _Net(params, grads), records.as_struct()
    weight = weight.contiguous()
    f = getattr(library(), f"sa_clipped_sum_{_kind(records.dtype)}")

    def work(r0: int, r1: int) -> None:
        f(r0, r1, net.struct, table, _ptr(weight), clip, scale)

    over_runs(params[0].shape[0], work)


def head_clipped_sum(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor, x_sq: torch.Tensor,
                     weight: torch.Tensor, clip: float, grads: Sequence[torch.Tensor], scale: float) -> None:
    """:func:`clipped_sum` of a linear head (weight (R, K, d), bias (R, K)) over every record
    of ``x`` (rows, d) with ``weight`` (R, rows) 0 or 1: the logits and the weight gradients
    are torch's matrix products over all runs at once, the softmax, norms and clipping between
    them one pass of the kernels."""
    w, b = params
    gw, gb = grads
    R, K, d = w.shape
    rows = x.shape[0]
    z = x @ w.reshape(R * K, d).T                                               # (rows, R K)
    weight = weight.to(x.dtype).contiguous()
    f = getattr(library(), f"sa_softmax_clip_{_kind(x.dtype)}")
    yy, xs = y.to(torch.int64).contiguous(), x_sq.contiguous()
    over_runs(R, lambda r0, r1: f(r0, r1, rows, R, K, z.data_ptr(), b.data_ptr(), yy.data_ptr(),
                                   xs.data_ptr(), weight.data_ptr(), clip, scale, gb.data_ptr()))
    torch.mm(z.T, x, out=gw.view(R * K, d))


def noise_step(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], streams: CompiledStreamBlock,
               purpose: int, std_scale: float, optimizer: str, lr: float, *,
               moments: tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]] | None = None,
               betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, step: int = 1) -> None:
    """Per run: its next P normals (parameters in order) times ``std_scale`` into ``grads``,
    then the optimiser's step on ``params`` (SGD: p -= lr g; Adam: torch.optim.Adam's update
    with ``moments`` (exp_avg, exp_avg_sq) and bias corrections at ``step``)."""
    if optimizer == "adam" and moments is None:
        raise ValueError("Adam needs its moments (exp_avg, exp_avg_sq)")
    net = _Net(params, grads, moments if optimizer == "adam" else None)
    opt = _optimiser(optimizer, lr, betas, eps)
    f = getattr(library(), f"sa_noise_step_{_kind(params[0].dtype)}")
    base = streams.state[:, purpose]

    def work(r0: int, r1: int) -> None:
        f(r0, r1, net.struct, base.ctypes.data, streams.purposes, std_scale, opt, step)

    over_runs(params[0].shape[0], work)


def train_runs(params: Sequence[torch.Tensor], records: RecordTable, streams: CompiledStreamBlock, *,
               n: int, bits: torch.Tensor, input_canary: bool, q: float, q_canary: float, clip: float,
               scale: float, std_scale: float, steps: int, optimizer: str, lr: float,
               betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
               gradient_canary: tuple[np.ndarray, np.ndarray, torch.Tensor] | None = None,
               checkpoints: Sequence[int] = ()) -> torch.Tensor:
    """Train every run of ``params`` (trained in place from their values) for ``steps`` steps
    and return the parameters at ``checkpoints`` (ascending step counts, 0 = the start), as
    (checkpoints, R, P).

    Per step a run draws ``n + m`` uniforms from stream 0 (none when ``q`` and ``q_canary``
    are 1): record i < n is in its batch when ``u_i < q``, canary i when ``u_{n+i} <
    q_canary``; an input canary (``input_canary``) is then table row ``n + 2i`` (bit 1) or
    ``n + 2i + 1`` (bit 0) of ``records``; a gradient canary adds its values
    (``gradient_canary``: canary index and flat column per entry, values (R, entries) chosen
    by the bit and times ``scale``).  Then :func:`clipped_sum`, and :func:`noise_step` with
    stream 1.
    """
    R = params[0].shape[0]
    dt = params[0].dtype
    P_total = sum(math.prod(p.shape[1:]) for p in params)
    grads = [torch.empty_like(p) for p in params]
    moments = ([torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]) \
        if optimizer == "adam" else None
    net = _Net(params, grads, moments)
    bits8 = bits.to(torch.uint8).contiguous()
    mc = bits8.shape[1]
    g_canary, g_col, g_val = (np.zeros(0, np.int64), np.zeros(0, np.int64),
                              torch.zeros(R, 0, dtype=dt)) if gradient_canary is None else gradient_canary
    g_canary = np.ascontiguousarray(g_canary, np.int64)
    g_col = np.ascontiguousarray(g_col, np.int64)
    g_val = g_val.to(dt).contiguous()
    snap_steps = np.asarray(sorted({int(t) for t in checkpoints}), np.int64)
    snap = torch.empty(len(snap_steps), R, P_total, dtype=dt)
    draw = not (q == 1.0 and q_canary == 1.0)
    if streams.purposes != 2 or streams.runs != R:
        raise ValueError("train_runs needs a block of (R, 2) streams: mask, noise")
    audit = SaAudit(n=n, mc=mc, input=int(input_canary), bits=_ptr(bits8), draw=int(draw), q=q, qc=q_canary,
                    clip=clip, scale=scale, std_scale=std_scale, steps=steps, ng=len(g_col),
                    g_canary=g_canary.ctypes.data, g_col=g_col.ctypes.data, g_val=_ptr(g_val),
                    ns=len(snap_steps), snap_steps=snap_steps.ctypes.data, snap=_ptr(snap), R=R, P=P_total)
    table, opt = records.as_struct(), _optimiser(optimizer, lr, betas, eps)
    f = getattr(library(), f"sa_train_runs_{_kind(dt)}")

    def work(r0: int, r1: int) -> None:
        f(r0, r1, net.struct, table, opt, audit, streams.state.ctypes.data)

    over_runs(R, work)
    return snap


def draw_only(streams: CompiledStreamBlock, n_uniforms: int, num_params: int, steps: int) -> None:
    """Only the draws of ``steps`` steps of :func:`train_runs` (the cost of its randomness)."""
    if streams.purposes != 2:
        raise ValueError("draw_only needs a block of (R, 2) streams: mask, noise")
    f = library().sa_draw_only_f32
    over_runs(streams.runs, lambda r0, r1: f(r0, r1, streams.state.ctypes.data, n_uniforms,
                                              num_params, steps))
