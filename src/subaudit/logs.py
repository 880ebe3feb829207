"""Logging set-up for workflow jobs: one log file per job, warnings included."""

from __future__ import annotations

import logging
from pathlib import Path


def to_file(path: str | Path, level: int = logging.INFO) -> logging.Logger:
    """Send the root logger (and Python warnings) to ``path``; return the subaudit logger."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=str(path), filemode="w", level=level, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    return logging.getLogger("subaudit")
