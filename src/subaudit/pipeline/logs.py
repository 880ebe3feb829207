"""Logging set-up for workflow jobs: one log file per job, warnings and fatal errors included."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def to_file(path: str | Path, level: int = logging.INFO) -> logging.Logger:
    """Send the root logger (and Python warnings) to ``path``; return the subaudit logger."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=str(path), filemode="w", level=level, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    return logging.getLogger("subaudit")


def _log_uncaught(kind, error, trace) -> None:  # noqa: ANN001 - sys.excepthook's signature
    """A job's fatal error goes to its own log too, not only to the executor's output."""
    logging.getLogger("subaudit").critical("job failed: %s", error, exc_info=(kind, error, trace))
    sys.__excepthook__(kind, error, trace)
