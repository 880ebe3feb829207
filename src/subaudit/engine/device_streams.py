"""The CPU kernels' random streams on a GPU: the same masks and noise for the same seed and run,
every run's draws of a step in one launch.

:class:`DeviceStreamBlock` keeps R runs' stream states on the device (the layout of
:class:`subaudit.engine.kernels.CompiledStreamBlock`: a state copies between the two) and draws with
the Triton kernels of :mod:`subaudit.engine.device_kernels`: a uniform draw or a normal draw of
any number of runs is one kernel launch (:attr:`DeviceStreamBlock.launches` counts them), and
each run's numbers depend only on its stream, so a run's numbers are the same alone or in any
chunk, on the CPU or on a GPU.

How equal:

* uniforms, and normals of the ziggurat's fast path (99.3% of draws) and of its wedge, are the
  kernels' bit for bit: integer operations, exact conversions, float64 operations in the C++
  order, without fused multiply-adds (``enable_fp_fusion=False``, as the library's
  ``-ffp-contract=off``);
* the slow path calls the device's ``exp`` (the wedge's accept test) and ``log`` (the tail
  beyond R = 3.65, about 3 draws in 10,000) where the kernels call the C library's.  Both are
  within an ulp of the true value, so a test's outcome differs only when the test's two sides
  are within an ulp of each other (about 1e-16 of the tests), and a tail value may differ in
  its last bit, which a float32 draw (the engine's default) rounds away except with
  probability about 2^-29 per tail value.  Float64 tail values agree to 2 ulp.

Where Triton is missing (torch's CUDA wheels bring it) or cannot compile for the device,
:class:`CopiedStreamBlock` draws with the CPU kernels and copies each draw to the device: the
same numbers, slower (:func:`block_for` says so once).  On the CPU the kernels run in Triton's
interpreter: the tests' twin of the GPU path, far too slow for work.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["BLOCK", "CopiedStreamBlock", "DeviceStreamBlock", "block_for", "launches", "triton_available"]

#: Lanes (4 per run) per program of a kernel.
BLOCK = 64

_launched = [0]


def launches() -> int:
    """Generator kernel launches (or, without Triton, copied draws) in this process so far."""
    return _launched[0]


@functools.cache
def triton_available() -> str | None:
    """None where Triton imports, else why not."""
    try:
        import triton  # noqa: F401
    except Exception as err:   # ImportError, or a broken install
        return f"{type(err).__name__}: {err}"
    return None


@functools.cache
def _kernels(interpret: bool) -> tuple:
    """The uniform and normal kernels, compiled for the device or interpreted on the CPU."""
    import triton

    from subaudit.engine import device_kernels as body

    if interpret:
        from triton.runtime.interpreter import InterpretedFunction
        return InterpretedFunction(body.uniform_body), InterpretedFunction(body.normal_body)
    return triton.jit(body.uniform_body), triton.jit(body.normal_body)


@functools.cache
def _tables(device: torch.device) -> tuple[torch.Tensor, ...]:
    from subaudit.engine.ziggurat_tables import FI, KI, R, WI

    return (torch.tensor(KI, dtype=torch.int64, device=device),
            torch.tensor(WI, dtype=torch.float64, device=device),
            torch.tensor(FI, dtype=torch.float64, device=device),
            torch.tensor([R], dtype=torch.float64, device=device))


def _seed_state(seeds: Sequence[Sequence[int]]) -> np.ndarray:
    """The kernels' seeded states (runs, purposes, 8 words) as int64."""
    from subaudit.engine.generator import seed_states

    return seed_states(np.asarray(seeds, dtype=np.uint64)).view(np.int64)


class DeviceStreamBlock:
    """Random streams of R runs, ``purposes`` each, on ``device``: the kernels' streams (their
    state layout, their numbers), each draw of any rows one Triton kernel launch."""

    def __init__(self, seeds: Sequence[Sequence[int]], device: str | torch.device) -> None:
        state = _seed_state(seeds)
        self.runs, self.purposes = state.shape[:2]
        self.device = torch.device(device)
        self.state = torch.as_tensor(state).to(self.device).contiguous()
        self.launches = 0
        self._interpret = self.device.type == "cpu"

    def _launch(self, which: int, purpose: int, out: torch.Tensor, rows: slice, *extra) -> torch.Tensor:
        if not out.is_contiguous() or out.device != self.device:
            raise ValueError(f"draws go into a contiguous tensor on {self.device}")
        lo, hi, _ = rows.indices(self.runs)
        nrows = max(0, hi - lo)
        n = out.numel() // max(1, nrows)
        if nrows == 0 or n == 0:
            return out
        if n >= 2**31 // 4 or nrows * n >= 2**62:
            raise ValueError(f"a draw of {n} values per run is beyond the kernels' int32 counts")
        kernel = _kernels(self._interpret)[which]
        state = self.state[lo:hi, purpose]
        grid = (-(-4 * nrows // BLOCK),)
        options = {} if self._interpret else {"enable_fp_fusion": False}
        kernel[grid](state, self.purposes * 8, out, nrows, n, *extra, BLOCK=BLOCK, **options)
        self.launches += 1
        _launched[0] += 1
        return out

    def uniform(self, purpose: int, out: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """Each run's next ``n`` uniforms on [0, 1) into row r of ``out`` (float32)."""
        if out.dtype != torch.float32:
            raise ValueError("uniforms are float32")
        return self._launch(0, purpose, out, rows)

    def normal(self, purpose: int, out: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """Each run's next ``n`` standard normals into row r of ``out`` (float32: the float64
        draws rounded)."""
        if out.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"kernels compute in float32 or float64, not {out.dtype}")
        return self._launch(1, purpose, out, rows, *_tables(self.device))


class CopiedStreamBlock:
    """A CPU block of streams (:func:`subaudit.engine.streams.cpu_block`) drawing for a device:
    each draw made on the CPU and copied to ``device`` (the same numbers as
    :class:`DeviceStreamBlock`, where Triton is missing)."""

    def __init__(self, cpu: Any, device: str | torch.device) -> None:
        self.cpu = cpu
        self.runs, self.purposes = self.cpu.runs, self.cpu.purposes
        self.device = torch.device(device)
        self.launches = 0
        self._buf: dict[tuple[torch.Size, torch.dtype], torch.Tensor] = {}

    @property
    def state(self) -> np.ndarray:
        return self.cpu.state

    def _host(self, out: torch.Tensor) -> torch.Tensor:
        key = (out.shape, out.dtype)
        if key not in self._buf:
            self._buf[key] = torch.empty(out.shape, dtype=out.dtype, pin_memory=torch.cuda.is_available())
        return self._buf[key]

    def uniform(self, purpose: int, out: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """As :meth:`DeviceStreamBlock.uniform`."""
        host = self.cpu.uniform(purpose, self._host(out), rows)
        self.launches += 1
        _launched[0] += 1
        return out.copy_(host)

    def normal(self, purpose: int, out: torch.Tensor, rows: slice = slice(None)) -> torch.Tensor:
        """As :meth:`DeviceStreamBlock.normal`."""
        host = self.cpu.normal(purpose, self._host(out), rows)
        self.launches += 1
        _launched[0] += 1
        return out.copy_(host)


def block_for(seeds: Sequence[Sequence[int]], device: str | torch.device,
              cpu_block: Callable[[Sequence[Sequence[int]]], Any]) -> DeviceStreamBlock | CopiedStreamBlock:
    """The streams of a device other than the CPU: Triton's where it imports, else
    ``cpu_block(seeds)``'s copied over, with a warning (once) that says why and what it costs."""
    why = triton_available()
    if why is None:
        return DeviceStreamBlock(seeds, device)
    _warn_copied(why)
    return CopiedStreamBlock(cpu_block(seeds), device)


@functools.cache
def _warn_copied(why: str) -> None:
    warnings.warn(f"Triton is not available ({why}): the engine draws its masks and noise on the "
                  "CPU and copies them to the device; the same numbers, slower. torch's CUDA "
                  "wheels bring Triton: install the one matching torch to draw on the device.",
                  RuntimeWarning, stacklevel=3)
