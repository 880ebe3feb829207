"""Training schedules shared by the engine and the workflow, importable without torch
(the workflow imports this while Snakemake parses it, once per cluster job)."""

from __future__ import annotations

import numpy as np

from subaudit.validation import check_count


def checkpoints(steps: int, every: int) -> np.ndarray:
    """Steps at which scores are recorded: every ``every`` steps, and the last."""
    check_count(every, "score_every")
    pts = list(range(every, steps + 1, every))
    if not pts or pts[-1] != steps:
        pts.append(steps)
    return np.asarray(pts, dtype=np.int64)
