"""A workflow job's start: one log file per job (warnings and fatal errors included), and the
garbage collector told to leave the modules the job imported alone."""

from __future__ import annotations

import gc
import logging
import os
import sys
from pathlib import Path

from subaudit.devices import NUMERICS_ENV


def start(path: str | Path, level: int = logging.INFO) -> logging.Logger:
    """Start a job, after its imports: send the root logger (and Python warnings) to ``path``
    and return the subaudit logger, which first records the job's numerics settings
    (:data:`subaudit.devices.NUMERICS_ENV`, as this process has them).

    Also moves every object alive now (the imported modules' objects, a great many once torch
    is in) out of the collector's reach (:func:`gc.freeze`).  They live as long as the job, and
    each full collection would walk them all again, in every job that imports torch.
    """
    gc.freeze()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=str(path), filemode="w", level=level, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    log = logging.getLogger("subaudit")
    log.info("numerics: %s", " ".join(f"{k}={os.environ.get(k, '(unset)')}" for k in NUMERICS_ENV))
    return log


def _log_uncaught(kind, error, trace) -> None:  # noqa: ANN001 - sys.excepthook's signature
    """A job's fatal error goes to its own log too, not only to the executor's output."""
    logging.getLogger("subaudit").critical("job failed: %s", error, exc_info=(kind, error, trace))
    sys.__excepthook__(kind, error, trace)
