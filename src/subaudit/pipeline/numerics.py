"""The numerical environment of the workflow's jobs: float32 work that does not depend on the
processor, where a setting can make it so.

Every library below subaudit picks its code path by the processor it runs on, and different
paths round differently: MKL (torch's matrix products and convolutions on the CPU) by
instruction set and vendor, ATen's vectorised kernels and oneDNN by instruction set, NumPy's
ufuncs (``exp``, ``log``, ... in float64 too) by instruction set, OpenBLAS (NumPy's and
SciPy's products) by core type.  The same code then gives other bits on an Intel Xeon than on
an AMD EPYC, or on an AVX-512 machine than on an AVX2 one.

:data:`PINNED` holds each of them at a path every x86-64 machine with AVX2 and FMA
(x86-64-v3: every server since 2015) runs the same way; the ``Snakefile`` applies it
(:func:`apply`) before any job or the warm worker starts, so every job of a run, local or on a
cluster, inherits it.  MKL promises the same bits on Intel and non-Intel processors only in its
``COMPATIBLE`` branch (SSE2), which makes its float32 products 3 to 5 times slower: jobs whose
cost allows it (:data:`PORTABLE`: the backbone features and the deep phase's Opacus trainings,
about 10% slower) start under it (their scripts pass it to
:func:`subaudit.pipeline.warm.hand_over`); the engine's training shards, whose time is mostly
MKL's products, keep MKL's own path.  What that leaves different across machines, measured, is
in ``docs/reproducibility.md``; ``subaudit compare`` shows it for any two runs.

Torch-free, and imports nothing of subaudit: a job's script reads it before its own imports.
"""

from __future__ import annotations

import os
from typing import Mapping, MutableMapping

__all__ = ["PINNED", "PORTABLE", "apply", "mkl_branch"]

PINNED: Mapping[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",              # torch's vectorised kernels (read as torch loads)
    "ONEDNN_MAX_CPU_ISA": "AVX2",               # torch's oneDNN convolutions
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # NumPy's ufuncs at x86-64-v3
    "OPENBLAS_CORETYPE": "Haswell",             # NumPy's and SciPy's OpenBLAS
}
"""The code paths every job of the workflow runs on (each variable as its library names it)."""

PORTABLE: Mapping[str, str] = {"MKL_CBWR": "COMPATIBLE"}
"""MKL's conditional numerical reproducibility branch that gives the same bits on Intel and
non-Intel processors; MKL reads it once, as it starts, so a job that needs it starts under it."""

_BRANCHES = {0: "OFF", 1: "BRANCH_OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1",
             8: "SSE4_2", 9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1",
             14: "AVX512_E1", 15: "AVX512_E2", 16: "AVX512_E3", 17: "AVX512_E4", 18: "AVX2_E1",
             19: "AVX512_E5"}


def apply(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Set :data:`PINNED` in ``environ`` (the workflow's own environment, which its jobs
    inherit); return the values it replaced, so that a caller can say so."""
    replaced = {k: environ[k] for k, v in PINNED.items() if k in environ and environ[k] != v}
    environ.update(PINNED)
    return replaced


def mkl_branch() -> str:
    """The branch MKL runs in this process (``AUTO`` where nothing was asked for), from torch's
    own MKL (``mkl_cbwr_get``); ``"none"`` where torch has no MKL."""
    import ctypes

    import torch

    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        code = int(lib.mkl_serv_cbwr_get(1))
    except (OSError, AttributeError):
        return "none"
    return _BRANCHES.get(code, str(code)).replace("BRANCH_OFF", "AUTO")
