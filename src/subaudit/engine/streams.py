"""Each run's random streams, derived only from ``(seed, run)``: a run's numbers are the same
alone, in any chunk, on any number of threads, on the CPU or on a GPU.

On the CPU the streams are the compiled kernels' generator (:mod:`subaudit.engine.kernels`:
xoroshiro128++ lanes, 24-bit uniforms, ziggurat normals), or, where the library is not
built (no C++ compiler) or ``SUBAUDIT_KERNELS=none``, its numpy twin
(:mod:`subaudit.engine.generator`), which draws the same numbers bit for bit, slower.  On a
GPU they are the same generator as Triton kernels (:mod:`subaudit.engine.device_streams`):
the same numbers (to the last bit of a rare tail value), every run's draw of a step in one
launch, no random number copied from the host.  ``SUBAUDIT_STREAMS=device`` makes the CPU
take the GPU's path (the device kernels in Triton's interpreter, training through torch): the
tests' way to run on the CPU the code a GPU runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch

from subaudit.engine import kernels
from subaudit.seeding import derive_seed

__all__ = ["MASK", "NOISE", "RunStreams", "StreamBlock", "cpu_block", "draw_step", "new_block"]

#: Columns of a run's CPU streams in a block: the Poisson masks' uniforms, the noise.
MASK, NOISE = 0, 1


class StreamBlock(Protocol):
    """Random streams of R runs, ``purposes`` each, as one array of states (the compiled
    :class:`kernels.CompiledStreamBlock`, :class:`subaudit.engine.generator.NumpyStreamBlock`, or on a
    device :class:`subaudit.engine.device_streams.DeviceStreamBlock`)."""

    runs: int
    purposes: int
    state: np.ndarray | torch.Tensor

    def uniform(self, purpose: int, out: torch.Tensor, rows: slice = ...) -> torch.Tensor: ...

    def normal(self, purpose: int, out: torch.Tensor, rows: slice = ...) -> torch.Tensor: ...


def new_block(seeds: Sequence[Sequence[int]], device: str | torch.device = "cpu") -> StreamBlock:
    """A block of streams seeded with ``seeds[r][k]`` for ``device``: on the CPU the compiled
    kernels' where they are loaded (:func:`kernels.available`), else their numpy twin; on a GPU
    (or the CPU under ``SUBAUDIT_STREAMS=device``) the device kernels'.  The same numbers."""
    if torch.device(device).type != "cpu" or kernels.device_path_on_cpu():
        from subaudit.engine.device_streams import block_for

        return block_for(seeds, device, cpu_block)
    return cpu_block(seeds)


def cpu_block(seeds: Sequence[Sequence[int]]) -> StreamBlock:
    """The CPU's block of streams: the compiled kernels' where they are loaded, else their numpy
    twin (the same numbers)."""
    if kernels.available():
        return kernels.CompiledStreamBlock(seeds)
    from subaudit.engine.generator import NumpyStreamBlock

    return NumpyStreamBlock(seeds)


class _BlockStream:
    """One of a run's CPU streams (a row and purpose of a block of streams), with
    the ``get_state`` / ``set_state`` of a torch generator."""

    def __init__(self, block: StreamBlock, row: int, purpose: int) -> None:
        self.block, self.row, self.purpose = block, row, purpose

    def get_state(self) -> np.ndarray | torch.Tensor:
        state = self.block.state[self.row, self.purpose]
        return state.clone() if isinstance(state, torch.Tensor) else state.copy()

    def set_state(self, state: np.ndarray | torch.Tensor) -> None:
        self.block.state[self.row, self.purpose] = state


class RunStreams:
    """The three random streams of one run, derived only from ``(seed, run)``.

    Per step the engine draws exactly ``n_records`` uniforms (float32; none when q and the
    canary's rate are 1, where every record is sampled) from ``mask`` and P standard normals
    from ``noise`` (parameters in order, weight then bias per layer); ``init`` is used once.
    Tests feed Opacus from the same streams.

    ``mask`` and ``noise`` are a row of a block of streams (:func:`new_block`) for ``device``,
    where the model is trained; float32 normals are the float64 ones rounded.  Every device
    draws the same numbers.  ``init`` (used once) is always a torch CPU generator.
    """

    def __init__(self, seed: int, run: int, device: str | torch.device = "cpu",
                 block: StreamBlock | None = None, row: int = 0) -> None:
        run = int(run)
        self.init = torch.Generator().manual_seed(derive_seed(seed, "run", run, "init"))
        self.block: StreamBlock = block or new_block([_stream_seeds(seed, run)], device)
        self.row = row if block is not None else 0
        self.mask = _BlockStream(self.block, self.row, MASK)
        self.noise = _BlockStream(self.block, self.row, NOISE)

    @classmethod
    def for_runs(cls, seed: int, runs: Sequence[int], device: str | torch.device = "cpu"
                 ) -> list[RunStreams]:
        """The streams of ``runs`` in one block, so that a step draws every run's numbers in
        one call (:func:`draw_step`; on a GPU one kernel launch)."""
        block = new_block([_stream_seeds(seed, int(r)) for r in runs], device)
        return [cls(seed, int(r), device, block, i) for i, r in enumerate(runs)]

    def draw_uniform(self, out: torch.Tensor) -> torch.Tensor:
        """One step's sampling uniforms (float32, one per record); ``< q`` samples."""
        return self.block.uniform(MASK, out, slice(self.row, self.row + 1))

    def draw_noise(self, out: torch.Tensor) -> torch.Tensor:
        """One step's standard normal noise, P values in parameter order."""
        return self.block.normal(NOISE, out, slice(self.row, self.row + 1))


def _stream_seeds(seed: int, run: int) -> list[int]:
    return [derive_seed(seed, "run", run, "mask"), derive_seed(seed, "run", run, "noise")]


def _one_block(streams: Sequence[RunStreams]) -> slice | None:
    """The rows of the streams' shared block when they are consecutive rows of one."""
    block = streams[0].block
    if any(st.block is not block for st in streams):
        return None
    lo = streams[0].row
    if any(st.row != lo + i for i, st in enumerate(streams)):
        return None
    return slice(lo, lo + len(streams))


def draw_step(
    streams: Sequence[RunStreams], uniforms: torch.Tensor | None, noise: torch.Tensor | None
) -> None:
    """Each run's uniforms and noise for one step, into row r of ``uniforms`` (or None at
    q = 1) and ``noise`` (or None): one call per block of streams (on the CPU the runs split
    over threads, on a GPU one kernel launch per draw).

    Every run owns its generators and its rows, so the split changes nothing but the wall
    time.
    """
    rows = _one_block(streams)
    if rows is not None:
        if uniforms is not None:
            streams[0].block.uniform(MASK, uniforms, rows)
        if noise is not None:
            streams[0].block.normal(NOISE, noise, rows)
        return

    def work(lo: int, hi: int) -> None:
        for r in range(lo, hi):
            if uniforms is not None:
                streams[r].draw_uniform(uniforms[r])
            if noise is not None:
                streams[r].draw_noise(noise[r])

    if kernels.device_path_on_cpu() or any(t is not None and t.device.type != "cpu" for t in (uniforms, noise)):
        work(0, len(streams))        # streams of several device blocks: one after another
    else:
        kernels.over_runs(len(streams), work)
