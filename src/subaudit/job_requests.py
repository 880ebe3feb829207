"""A workflow job's SLURM requests from its modelled work: one formula for every cost model
(:mod:`subaudit.pipeline.costs`). Importable without torch: the
workflow reads it while Snakemake parses."""

from __future__ import annotations

import math

__all__ = ["OUTPUT_FIXED_KB", "RUNTIME_FIXED_MIN", "RUNTIME_MARGIN", "UNMEASURED_GPU_MACS_PER_S", "job_request"]

#: Margin of a job's time limit over its estimate (machines of one kind differ by up to 2x), and
#: the minutes it spends besides its modelled work (start-up, loading, writing).
RUNTIME_MARGIN, RUNTIME_FIXED_MIN = 3.0, 10
#: Kilobytes a job writes besides its modelled outputs (a JSON summary, archive headers).
OUTPUT_FIXED_KB = 16
#: Multiply-accumulates per second of a network's float32 forward and backward on a GPU where no
#: GPU has measured it (the backbones' features, the metagradient proxy): assumed, about a
#: sixth of one H100's float32 peak.
UNMEASURED_GPU_MACS_PER_S = 5e12


def job_request(seconds: float, mem_mb: float, out_bytes: float = 0.0) -> dict[str, int]:
    """A job's requests from its modelled ``seconds``, memory (MB) and output (bytes):
    ``runtime`` (minutes: :data:`RUNTIME_MARGIN` x the estimate + :data:`RUNTIME_FIXED_MIN`),
    ``mem_mb``, ``expected_s`` (the estimate itself, no margin) and ``out_kb`` (its outputs
    uncompressed and :data:`OUTPUT_FIXED_KB`: an upper bound of what it writes)."""
    return {"runtime": RUNTIME_FIXED_MIN + math.ceil(RUNTIME_MARGIN * seconds / 60), "mem_mb": math.ceil(mem_mb),
            "expected_s": math.ceil(seconds), "out_kb": OUTPUT_FIXED_KB + math.ceil(out_bytes / 2**10)}
