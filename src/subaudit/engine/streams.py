"""Each run's random streams, derived only from ``(seed, run)``: a run's numbers are the same
alone, in any chunk, on any number of threads.

On the CPU the streams are the compiled kernels' generator (:mod:`subaudit.engine.kernels`:
xoroshiro128++ lanes, 24-bit uniforms, ziggurat normals), or, where the library is not
built (no C++ compiler) or ``SUBAUDIT_KERNELS=none``, its numpy twin
(:mod:`subaudit.engine.generator`), which draws the same numbers bit for bit, slower.  On a
GPU they are torch's Philox generators on the device, so a GPU step copies no random
numbers from the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch

from subaudit.engine import kernels
from subaudit.seeding import derive_seed

__all__ = ["MASK", "NOISE", "RunStreams", "StreamBlock", "draw_step", "new_block"]

#: Columns of a run's CPU streams in a block: the Poisson masks' uniforms, the noise.
MASK, NOISE = 0, 1


class StreamBlock(Protocol):
    """Random streams of R runs, ``purposes`` each, as one array of states (the compiled
    :class:`kernels.StreamBlock` or :class:`subaudit.engine.generator.NumpyStreamBlock`)."""

    runs: int
    purposes: int
    state: np.ndarray

    def uniform(self, purpose: int, out: torch.Tensor, rows: slice = ...) -> torch.Tensor: ...

    def normal(self, purpose: int, out: torch.Tensor, rows: slice = ...) -> torch.Tensor: ...


def new_block(seeds: Sequence[Sequence[int]]) -> StreamBlock:
    """A block of CPU streams seeded with ``seeds[r][k]``: the compiled kernels' where they are
    loaded (:func:`kernels.available`), else their numpy twin (the same numbers)."""
    if kernels.available():
        return kernels.StreamBlock(seeds)
    from subaudit.engine.generator import NumpyStreamBlock

    return NumpyStreamBlock(seeds)


class _BlockStream:
    """One of a run's CPU streams (a row and purpose of a block of streams), with
    the ``get_state`` / ``set_state`` of a torch generator."""

    def __init__(self, block: StreamBlock, row: int, purpose: int) -> None:
        self.block, self.row, self.purpose = block, row, purpose

    def get_state(self) -> np.ndarray:
        return self.block.state[self.row, self.purpose].copy()

    def set_state(self, state: np.ndarray) -> None:
        self.block.state[self.row, self.purpose] = state


class RunStreams:
    """The three random streams of one run, derived only from ``(seed, run)``.

    Per step the engine draws exactly ``n_records`` uniforms (float32; none when q and the
    canary's rate are 1, where every record is sampled) from ``mask`` and P standard normals
    from ``noise`` (parameters in order, weight then bias per layer); ``init`` is used once.
    Tests feed Opacus from the same streams.

    ``mask`` and ``noise`` live on ``device``, where the model is trained: on the CPU a row of a
    block of streams (:func:`new_block`; float32 normals are the float64 ones rounded), on a
    GPU torch's Philox.  The two kinds
    draw different numbers from one seed; on one device kind a run's numbers are the same
    alone or in any chunk.  ``init`` (used once) is always a torch CPU generator.
    """

    def __init__(self, seed: int, run: int, device: str | torch.device = "cpu",
                 block: StreamBlock | None = None, row: int = 0) -> None:
        run = int(run)
        self.init = torch.Generator().manual_seed(derive_seed(seed, "run", run, "init"))
        self.block: StreamBlock | None = None
        if torch.device(device).type == "cpu":
            self.block = block or new_block([_stream_seeds(seed, run)])
            self.row = row if block is not None else 0
            self.mask: torch.Generator | _BlockStream = _BlockStream(self.block, self.row, MASK)
            self.noise: torch.Generator | _BlockStream = _BlockStream(self.block, self.row, NOISE)
        else:
            self.mask = torch.Generator(device).manual_seed(derive_seed(seed, "run", run, "mask"))
            self.noise = torch.Generator(device).manual_seed(derive_seed(seed, "run", run, "noise"))

    @classmethod
    def for_runs(cls, seed: int, runs: Sequence[int], device: str | torch.device = "cpu"
                 ) -> list[RunStreams]:
        """The streams of ``runs``; on the CPU in one block, so that a step draws every run's
        numbers in one call (:func:`draw_step`)."""
        if torch.device(device).type != "cpu":
            return [cls(seed, int(r), device) for r in runs]
        block = new_block([_stream_seeds(seed, int(r)) for r in runs])
        return [cls(seed, int(r), device, block, i) for i, r in enumerate(runs)]

    def draw_uniform(self, out: torch.Tensor) -> torch.Tensor:
        """One step's sampling uniforms (float32, one per record); ``< q`` samples."""
        if self.block is None:
            return torch.rand(out.shape, generator=self.mask, out=out)
        return self.block.uniform(MASK, out, slice(self.row, self.row + 1))

    def draw_noise(self, out: torch.Tensor) -> torch.Tensor:
        """One step's standard normal noise, P values in parameter order."""
        if self.block is None:
            return out.normal_(generator=self.noise)
        return self.block.normal(NOISE, out, slice(self.row, self.row + 1))


def _stream_seeds(seed: int, run: int) -> list[int]:
    return [derive_seed(seed, "run", run, "mask"), derive_seed(seed, "run", run, "noise")]


def _one_block(streams: Sequence[RunStreams]) -> slice | None:
    """The rows of the streams' shared CPU block when they are consecutive rows of one."""
    block = streams[0].block
    if block is None or any(st.block is not block for st in streams):
        return None
    lo = streams[0].row
    if any(st.row != lo + i for i, st in enumerate(streams)):
        return None
    return slice(lo, lo + len(streams))


def draw_step(
    streams: Sequence[RunStreams], uniforms: torch.Tensor | None, noise: torch.Tensor | None
) -> None:
    """Each run's uniforms and noise for one step, into row r of ``uniforms`` (or None at
    q = 1) and ``noise`` (or None); on the CPU in one call per block of streams, the runs
    split over threads.

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

    if streams[0].block is None:     # a device's generators: one after another
        work(0, len(streams))
    else:
        kernels.over_runs(len(streams), work)
