"""Where torch computes: the ``device`` setting (cpu, cuda, auto) resolved for this process."""

from __future__ import annotations

from collections.abc import Iterator
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
