"""Where torch computes: the ``device`` setting (cpu, cuda, auto) resolved for this process, its
threads, and the numerics that make float32 work on the CPU independent of the processor."""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from subaudit.validation import ParameterError


def resolve_device(device: Any = "auto") -> str:
    """A torch device string for ``device``: 'cpu', 'cuda', 'cuda:<i>', or 'auto' / None.

    'auto' (or None) is CUDA when this process sees a GPU, else the CPU; asking for CUDA
    where there is none is an error rather than a silent fall-back to the CPU.
    """
    import torch

    if device is None or device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ParameterError("device", device, "'auto', 'cpu', 'cuda' or 'cuda:<index>'") from None
    if dev.type not in ("cpu", "cuda"):
        raise ParameterError("device", device, "'auto', 'cpu', 'cuda' or 'cuda:<index>'")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ParameterError("device", device, "'cpu' or 'auto' (CUDA is not available here)")
    return str(dev)


def use_threads(threads: int) -> None:
    """Let torch compute on ``threads`` cores in this process (a workflow job's share).

    A run's numbers do not depend on it (tested); throughput does: on 2 cores two one-thread
    training jobs did 1.1-1.3x the work of one two-thread job (1.3x alone, 1.1x side by side,
    where they share the memory bandwidth).
    """
    import torch

    torch.set_num_threads(max(1, int(threads)))


@contextmanager
def fixed_threads(threads: int) -> Iterator[None]:
    """Compute with exactly ``threads`` torch threads inside the block, whatever the process
    was given, then restore: for a computation whose last bits depend on how a reduction is
    split between threads (the metagradient canaries: :data:`subaudit.integrations.deep.CANARY_THREADS`)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


#: What the workflow sets in its environment, before any job (and any MKL) starts, so that
#: float32 work on the CPU gives the same bits on every x86-64 processor: MKL's conditional
#: numerical reproducibility (``MKL_CBWR``), whose default picks a code path by processor
#: (AVX-512 on Intel, AVX2 on AMD). Measured with ``shared/cross-machine/digests.py`` (image and
#: text features, a 20-step Opacus training; torch 2.13.0+cpu): an Intel Xeon (Emerald Rapids)
#: and an AMD EPYC, both AVX-512, differ in all three by default and agree in all three under
#: ``COMPATIBLE`` (docs/reproducibility.md).
NUMERICS_ENV: dict[str, str] = {"MKL_CBWR": "COMPATIBLE"}


def machine_independent_numerics(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set :data:`NUMERICS_ENV` in ``environ`` (this process's environment by default, which the
    processes it starts inherit; MKL reads it when it first loads, so call this before torch is
    imported). Returns the values it replaced that differed (a user's own setting), for a note."""
    env = os.environ if environ is None else environ
    replaced = {k: env[k] for k, v in NUMERICS_ENV.items() if k in env and env[k] != v}
    env.update(NUMERICS_ENV)
    return replaced
